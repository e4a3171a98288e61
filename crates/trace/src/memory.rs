//! MEMORY chunks: the traced program's resident memory over time, sampled by the recorder from
//! `/proc/PID/smaps`, each sample placed on the image's seq axis (docs/trace-format.md, "Memory
//! samples"). They let a replay put the original run's memory beside its own, call for call.
use serde::{Deserialize, Serialize};

/// One reading of a process image's memory.
///
/// `seq` and `seq_end` bracket the reading: the image's counter (the seq of its next call) just
/// before the recorder began reading and just after it finished. Every call below `seq` had
/// happened before the reading; no call from `seq_end` on is in it. Under a fast allocation rate
/// they differ by the calls made while the kernel walked the page tables.
///
/// Every sample has `rss` and `anon`; the split by mapping (`heap`, `file`, `stack`) and `pss`
/// come from `/proc/PID/smaps`, whose read walks every page table, so the recorder reads it less
/// often than `/proc/PID/statm` (a few counters): they are `None` in the statm samples. In a
/// smaps sample `rss` and `anon` are exact, from the same walk; in a statm sample they are the
/// kernel's counters, which it keeps per CPU and shows without summing them, so they can lag by
/// megabytes while the process grows fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySample {
    /// The image's counter when the reading began.
    pub seq: u64,
    /// The image's counter when the reading ended (`>= seq`).
    pub seq_end: u64,
    /// When the reading began, ns since the image started (the clock of `Event::t_ns`).
    pub t_ns: u64,
    /// Resident set size (smaps: `Rss` summed; statm: resident).
    pub rss: u64,
    /// Resident anonymous memory (smaps: `Anonymous` summed; statm: resident less file and
    /// shared-memory pages, the kernel's `RssAnon`). Includes thread stacks and copied-on-write
    /// pages of file mappings, which `heap` leaves out.
    pub anon: u64,
    /// Proportional set size (`Pss` of every mapping), when smaps was read.
    pub pss: Option<u64>,
    /// The heap part, when smaps was read: `Rss` of `[heap]` and of private anonymous mappings
    /// other than thread stacks, the definition of `watch`'s smaps split
    /// (docs/memory-metrics.md, "RSS split").
    pub heap: Option<u64>,
    /// `Rss` of file mappings (the executable, libraries, mapped files, memfds), when smaps was
    /// read.
    pub file: Option<u64>,
    /// `Rss` of `[stack]` and thread stacks, when smaps was read.
    pub stack: Option<u64>,
}

impl MemorySample {
    /// Resident memory that is not the heap (files, stacks and the rest: `rss - heap`), when
    /// smaps was read.
    pub fn non_heap(&self) -> Option<u64> {
        self.heap.map(|h| self.rss.saturating_sub(h))
    }
}

/// Peak and mean of a stream's samples (`MemorySummary::of`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryFigures {
    /// The highest reading.
    pub peak: u64,
    /// The mean over calls: each reading holds from its seq to the next reading's (the last
    /// one to the stream's end), so a replay's readings, on the same call axis, give a mean
    /// comparable whatever its speed. The plain mean of the readings when no call separates
    /// them.
    pub mean: f64,
    /// Readings it is made of.
    pub samples: usize,
}

/// What a stream's memory samples say in a few figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    pub rss: MemoryFigures,
    pub anon: MemoryFigures,
    /// From the samples that read smaps; `None` when none did.
    pub heap: Option<MemoryFigures>,
    /// `rss - heap` of those samples.
    pub non_heap: Option<MemoryFigures>,
}

impl MemorySummary {
    /// Figures of `samples` (in the order taken); `end_seq` is the stream's counter at its end
    /// (its last seq + 1), the extent of the last reading. `None` without samples.
    pub fn of(samples: &[MemorySample], end_seq: u64) -> Option<MemorySummary> {
        if samples.is_empty() {
            return None;
        }
        let all: Vec<(u64, u64)> = samples.iter().map(|s| (s.seq, s.rss)).collect();
        let anon: Vec<(u64, u64)> = samples.iter().map(|s| (s.seq, s.anon)).collect();
        let heap: Vec<(u64, u64)> = samples
            .iter()
            .filter_map(|s| Some((s.seq, s.heap?)))
            .collect();
        let rest: Vec<(u64, u64)> = samples
            .iter()
            .filter_map(|s| Some((s.seq, s.non_heap()?)))
            .collect();
        Some(MemorySummary {
            rss: figures(&all, end_seq)?,
            anon: figures(&anon, end_seq)?,
            heap: figures(&heap, end_seq),
            non_heap: figures(&rest, end_seq),
        })
    }
}

/// Peak and call-weighted mean of (seq, value) readings.
fn figures(readings: &[(u64, u64)], end_seq: u64) -> Option<MemoryFigures> {
    let peak = readings.iter().map(|r| r.1).max()?;
    let (mut weighted, mut calls) = (0f64, 0u64);
    for (i, &(seq, value)) in readings.iter().enumerate() {
        let until = readings.get(i + 1).map_or(end_seq, |r| r.0).max(seq);
        weighted += value as f64 * (until - seq) as f64;
        calls += until - seq;
    }
    let mean = if calls > 0 {
        weighted / calls as f64
    } else {
        readings.iter().map(|r| r.1 as f64).sum::<f64>() / readings.len() as f64
    };
    Some(MemoryFigures {
        peak,
        mean,
        samples: readings.len(),
    })
}

/// Fields per sample this version writes; a reader takes the first `SAMPLE_FIELDS` of each
/// sample and skips any more (fields are only ever appended).
const SAMPLE_FIELDS: u32 = 9;
/// Stored for a figure that was not read (`None`).
const UNKNOWN: u64 = u64::MAX;

/// The payload of a MEMORY chunk: `u32 fields per sample F, u32 count n`, then `n x F` u64
/// (little-endian): seq, seq_end, t_ns, rss, anon, pss, heap, file, stack; `u64::MAX` for a
/// figure not read.
pub fn memory_payload(samples: &[MemorySample]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + samples.len() * SAMPLE_FIELDS as usize * 8);
    p.extend_from_slice(&SAMPLE_FIELDS.to_le_bytes());
    p.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    for s in samples {
        for v in [
            s.seq,
            s.seq_end,
            s.t_ns,
            s.rss,
            s.anon,
            s.pss.unwrap_or(UNKNOWN),
            s.heap.unwrap_or(UNKNOWN),
            s.file.unwrap_or(UNKNOWN),
            s.stack.unwrap_or(UNKNOWN),
        ] {
            p.extend_from_slice(&v.to_le_bytes());
        }
    }
    p
}

/// Decodes a MEMORY chunk's payload (appending to `out`).
pub(crate) fn read_memory_payload(p: &[u8], out: &mut Vec<MemorySample>) -> Result<(), String> {
    let u32_at = |i: usize| {
        p.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(fields), Some(count)) = (u32_at(0), u32_at(4)) else {
        return Err("memory chunk cut short".into());
    };
    if fields < SAMPLE_FIELDS {
        return Err(format!(
            "memory chunk with {fields} fields per sample (at least {SAMPLE_FIELDS} expected)"
        ));
    }
    let stride = fields as usize * 8;
    let body = &p[8..];
    if body.len() as u64 != u64::from(count) * stride as u64 {
        return Err(format!(
            "memory chunk of {} bytes for {count} samples of {fields} fields",
            p.len()
        ));
    }
    for s in body.chunks_exact(stride) {
        let f = |k: usize| u64::from_le_bytes(s[k * 8..k * 8 + 8].try_into().unwrap_or_default());
        let read = |k: usize| Some(f(k)).filter(|&v| v != UNKNOWN);
        out.push(MemorySample {
            seq: f(0),
            seq_end: f(1),
            t_ns: f(2),
            rss: f(3),
            anon: f(4),
            pss: read(5),
            heap: read(6),
            file: read(7),
            stack: read(8),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64) -> MemorySample {
        let smaps = i.is_multiple_of(2);
        MemorySample {
            seq: i * 1000,
            seq_end: i * 1000 + 3,
            t_ns: i * 100_000_000,
            rss: 10 << 20,
            anon: 5 << 20,
            pss: smaps.then_some(9 << 20),
            heap: smaps.then_some(i << 20),
            file: smaps.then_some(3 << 20),
            stack: smaps.then_some(132 << 10),
        }
    }

    #[test]
    fn samples_round_trip() {
        let samples: Vec<_> = (0..5).map(sample).collect();
        let mut back = Vec::new();
        read_memory_payload(&memory_payload(&samples), &mut back).unwrap();
        assert_eq!(back, samples);
        assert_eq!(back[1].heap, None);
        assert_eq!(back[2].non_heap(), Some((10 << 20) - (2 << 20)));
    }

    #[test]
    fn later_fields_are_skipped_and_damage_is_refused() {
        // A writer of a later version with a 10th field: the first 9 are read.
        let mut p = Vec::new();
        p.extend_from_slice(&10u32.to_le_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        for v in [5u64, 6, 7, 8, 9, 10, 11, 12, 13, 14] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        let mut back = Vec::new();
        read_memory_payload(&p, &mut back).unwrap();
        assert_eq!((back[0].seq, back[0].stack), (5, Some(13)));
        assert!(read_memory_payload(&p[..p.len() - 1], &mut back).is_err());
        assert!(read_memory_payload(&p[..6], &mut back).is_err());
        let mut few = p.clone();
        few[0] = 8;
        assert!(read_memory_payload(&few, &mut back).is_err());
    }

    #[test]
    fn the_mean_is_over_calls() {
        // 10 MiB for 100 calls, then 30 MiB for 300 calls (to the end at 400): mean 25 MiB,
        // whatever the time between the readings.
        let mb = 1u64 << 20;
        let at = |seq: u64, rss: u64, heap: Option<u64>| MemorySample {
            seq,
            seq_end: seq,
            t_ns: seq * 7,
            rss,
            anon: rss / 2,
            pss: None,
            heap,
            file: None,
            stack: None,
        };
        let s = [at(0, 10 * mb, Some(4 * mb)), at(100, 30 * mb, None)];
        let m = MemorySummary::of(&s, 400).unwrap();
        assert_eq!(m.rss.peak, 30 * mb);
        assert_eq!(m.rss.mean, 25.0 * mb as f64);
        assert_eq!(m.anon.mean, 12.5 * mb as f64);
        let heap = m.heap.unwrap();
        assert_eq!(
            (heap.peak, heap.mean, heap.samples),
            (4 * mb, 4.0 * mb as f64, 1)
        );
        assert_eq!(m.non_heap.unwrap().peak, 6 * mb);
        // No call between the readings: their plain mean.
        let m = MemorySummary::of(&[at(5, mb, None), at(5, 3 * mb, None)], 5).unwrap();
        assert_eq!(m.rss.mean, 2.0 * mb as f64);
        assert!(m.heap.is_none());
        assert!(MemorySummary::of(&[], 0).is_none());
    }
}
