//! The heap's residency, for the verdict's quote: which share of the heap's resident pages hold
//! no live block (docs/memory-metrics.md, "The verdict").
//!
//! Under glibc the heap is walked from outside (`heapwalk`) while the program runs, at most every
//! [`MIN_GAP_S`] and never more than [`COST_SHARE`] of one core: the gap after a reading is
//! that many times its CPU time (a 600 MB heap takes longer to read than a 20 MB one). The
//! verdict is only known at the end, when a program that exited can no longer be read, so the
//! readings are not kept for some classes only; the last one is quoted. jemalloc and tcmalloc
//! report their free whole pages themselves (dirty pages, the page heap's free bytes): a lower
//! bound (pages partly used by free slots are not among them). Other allocators: not known.

use serde::{Deserialize, Serialize};

use crate::engine::ProcessFigures;

/// Seconds between two readings at least.
const MIN_GAP_S: f64 = 1.0;
/// The share of one core the readings may take: the gap is the last reading's CPU time over it.
const COST_SHARE: f64 = 0.02;

/// What the watch knows of the heap's resident pages: watch.json's `residency`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResidencyQuote {
    /// The allocator the figures are of.
    pub allocator: String,
    /// glibc: the last reading, of the process with the largest heap then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<heapwalk::PageSplit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// When the last reading was taken, s since the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_s: Option<f64>,
    pub readings: u32,
    /// Attempts that were not read (the heap changed under the walk twice, or the process went).
    pub not_read: u32,
    /// Why the last attempt that failed was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// alloclens's CPU time for the readings, s.
    pub cpu_s: f64,
    /// jemalloc, tcmalloc: the free whole pages they report, resident, and the heap's resident
    /// bytes (smaps) they are a share of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_resident: Option<u64>,
}

impl ResidencyQuote {
    /// The share of the heap's resident pages that hold no live block, %, when known.
    pub fn free_percent(&self) -> Option<f64> {
        if let Some(s) = &self.split {
            return s.free_only_percent();
        }
        let (free, heap) = (self.free_pages?, self.heap_resident?);
        (heap > 0).then(|| 100.0 * free as f64 / heap as f64)
    }
}

/// The readings of a watch under glibc.
pub(crate) struct HeapReadings {
    reader: procmem::ResidencyReader,
    next_s: f64,
    quote: Option<ResidencyQuote>,
}

impl HeapReadings {
    pub(crate) fn new() -> HeapReadings {
        HeapReadings {
            reader: procmem::ResidencyReader::new(),
            next_s: 0.0,
            quote: None,
        }
    }

    /// A reading at `t_s` when one is due (or `force`d: the last one), of the glibc process with
    /// the largest heap among `processes`.
    pub(crate) fn on_sample(&mut self, t_s: f64, processes: &[ProcessFigures], force: bool) {
        if t_s < self.next_s && !force {
            return;
        }
        if let Some(quote) = from_statistics(processes) {
            // An allocator that counts its free pages itself: its figures at this sample.
            self.quote = Some(ResidencyQuote {
                t_s: Some(t_s),
                ..quote
            });
            return;
        }
        let Some(p) = processes
            .iter()
            .filter(|p| {
                p.snapshot
                    .as_ref()
                    .is_some_and(|s| s.allocator.name == allocators::GLIBC)
            })
            .max_by_key(|p| p.split.heap)
        else {
            return;
        };
        let started = procmem::thread_cpu_time();
        let read = heapwalk::read_process(p.pid, &mut self.reader);
        let cost = procmem::thread_cpu_time()
            .saturating_sub(started)
            .as_secs_f64();
        self.next_s = t_s + MIN_GAP_S.max(cost / COST_SHARE);
        let quote = self.quote.get_or_insert_with(|| ResidencyQuote {
            allocator: allocators::GLIBC.into(),
            ..Default::default()
        });
        quote.cpu_s += cost;
        match read {
            Ok(split) => {
                quote.readings += 1;
                quote.split = Some(split);
                quote.pid = Some(p.pid);
                quote.t_s = Some(t_s);
            }
            Err(e) => {
                quote.not_read += 1;
                quote.problem = Some(e.to_string());
            }
        }
    }

    pub(crate) fn quote(&self) -> Option<ResidencyQuote> {
        self.quote.clone()
    }
}

/// jemalloc's and tcmalloc's own count of free whole pages, from the snapshots of `processes`
/// (their last figures), against their heap's resident bytes; None for other allocators.
pub(crate) fn from_statistics(processes: &[ProcessFigures]) -> Option<ResidencyQuote> {
    let snaps: Vec<(&agent::Snapshot, u64)> = processes
        .iter()
        .filter_map(|p| Some((p.snapshot.as_ref()?, p.split.heap)))
        .collect();
    let (first, _) = snaps.first()?;
    let allocator = first.allocator.name.clone();
    let free_pages = |s: &agent::Snapshot| -> Option<u64> {
        let raw = |k: &str| s.allocator.raw.get(k).copied();
        match s.allocator.name.as_str() {
            allocators::JEMALLOC => Some(raw("stats.arenas.4096.pdirty")? * raw("arenas.page")?),
            allocators::TCMALLOC => raw("tcmalloc.pageheap_free_bytes"),
            _ => None,
        }
    };
    let mut quote = ResidencyQuote {
        allocator,
        free_pages: Some(0),
        heap_resident: Some(0),
        ..Default::default()
    };
    for (s, heap) in snaps {
        *quote.free_pages.as_mut()? += free_pages(s)?;
        *quote.heap_resident.as_mut()? += heap;
    }
    Some(quote)
}
