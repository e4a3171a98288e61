//! Memory samples (MEMORY chunks) of real recordings: a program whose heap grows by a known amount
//! shows that growth on its seq axis; a recording without samples reads as before; a file cut
//! inside the samples keeps those before the cut.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::common::{programs, read_trace};
use trace::{MemorySample, Op, TraceReader};

const MIB: u64 = 1 << 20;

/// Live requested bytes after each call: `live[s]` is the total once every call below seq `s`
/// has happened.
fn live_by_seq(img: &crate::common::Image) -> Vec<u64> {
    let mut live = vec![0u64];
    let mut blocks: HashMap<u64, u64> = HashMap::new();
    let mut now = 0u64;
    for e in img.events() {
        while live.len() as u64 <= e.seq {
            live.push(now);
        }
        if e.op.is_free() {
            now -= blocks.remove(&e.addr).unwrap_or(0);
        } else {
            if e.op.is_realloc() {
                now -= blocks.remove(&e.old_addr).unwrap_or(0);
            }
            if e.addr != 0 {
                now += e.size;
                blocks.insert(e.addr, e.size);
            }
        }
        live.push(now);
        assert_eq!(live.len() as u64, e.seq + 2, "dense seqs");
    }
    live
}

fn trace_path(name: &str) -> PathBuf {
    programs()
        .dir
        .path()
        .join(format!("{name}-{}.alt", std::process::id()))
}

/// Records progs/traced.c with `args` into `path` (memory sampled unless `configure` says
/// otherwise).
fn record(
    path: &Path,
    args: &[&str],
    configure: impl FnOnce(&mut recorder::RecordOptions),
) -> (recorder::RecordSummary, Vec<crate::common::Image>) {
    let mut command: Vec<std::ffi::OsString> = vec![programs().traced.clone().into()];
    command.extend(args.iter().map(Into::into));
    let mut o = recorder::RecordOptions::new(command, path.to_path_buf());
    o.addresses = true;
    configure(&mut o);
    let summary = recorder::record(&o).unwrap();
    (summary, read_trace(path))
}

#[test]
fn a_growing_heap_grows_on_the_seq_axis() {
    let grow = 40u64;
    let path = trace_path("grow");
    let (summary, images) = record(&path, &["grow", &grow.to_string()], |_| {});
    assert_eq!(summary.status.code(), Some(0));
    let img = &images[0];
    assert_eq!(img.count(Op::Malloc, 65536 - 64), grow as usize * 16);
    let reader = TraceReader::open(&path).unwrap();
    let samples: Vec<MemorySample> = reader.memory_samples(0).to_vec();
    let with_heap: Vec<&MemorySample> = samples.iter().filter(|s| s.heap.is_some()).collect();
    // About 0.9 s at 100 ms between smaps reads (fewer when the machine is loaded).
    assert!(with_heap.len() >= 3, "{samples:#?}");
    for w in samples.windows(2) {
        assert!(w[0].seq <= w[1].seq && w[0].t_ns < w[1].t_ns, "{w:?}");
    }
    let live = live_by_seq(img);
    let live_at = |seq: u64| live[(seq as usize).min(live.len() - 1)];
    let first = with_heap[0];
    for s in &samples {
        assert!(s.seq <= s.seq_end && s.anon <= s.rss && s.rss > 0, "{s:?}");
        if let (Some(heap), Some(file), Some(stack)) = (s.heap, s.file, s.stack) {
            assert!(heap + file + stack <= s.rss, "{s:?}");
            assert!(s.pss.is_some_and(|p| p > 0 && p <= s.rss), "{s:?}");
            // The heap grew with the live bytes between the two readings, as the calls
            // bracketing each reading say (touched after the malloc returns: a block's pages
            // may be missing; glibc's own bookkeeping adds a little).
            let grown = heap as i64 - first.heap.unwrap() as i64;
            let low = live_at(s.seq) as i64 - live_at(first.seq_end) as i64;
            let high = live_at(s.seq_end) as i64 - live_at(first.seq) as i64;
            let slack = (MIB + high.unsigned_abs() / 20) as i64;
            assert!(
                low - slack <= grown && grown <= high + slack,
                "heap grew {grown} by seq {}..{}; live bytes grew {low}..{high}; {samples:?}",
                s.seq,
                s.seq_end
            );
        }
    }
    // The 0.4 s hold at the end: a reading sees all of it (and the 130 KiB heap of a small C
    // program before it).
    let last = with_heap.last().unwrap().heap.unwrap();
    assert!(
        last >= grow * MIB - MIB && last <= (grow + 4) * MIB,
        "heap of {last} bytes at the end, {grow} MiB expected"
    );
    // Statm readings between the smaps ones follow the growth too.
    let peak_rss = samples.iter().map(|s| s.rss).max().unwrap();
    assert!(peak_rss >= grow * MIB, "{peak_rss}");
}

#[test]
fn without_memory_samples_the_trace_reads_as_before() {
    let path = trace_path("nomemory");
    let (summary, images) = record(&path, &["grow", "4"], |o| o.memory_interval = None);
    assert_eq!(summary.status.code(), Some(0));
    assert_eq!(images[0].count(Op::Malloc, 65536 - 64), 64);
    let reader = TraceReader::open(&path).unwrap();
    assert!(!reader.has_memory_samples());
    assert!(reader.memory_samples(0).is_empty());
    assert!(chunk_kinds(&path).iter().all(|c| c.0 != 9));
}

/// (kind, stream, offset, total length) of every chunk of a trace file (docs/trace-format.md).
fn chunk_kinds(path: &Path) -> Vec<(u8, u32, usize, usize)> {
    let bytes = std::fs::read(path).unwrap();
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    let mut at = 20 + u32_at(12) as usize;
    let mut out = Vec::new();
    while at + 24 <= bytes.len() {
        assert_eq!(&bytes[at..at + 4], b"ALCK");
        let len = 24 + u32_at(at + 12) as usize;
        out.push((bytes[at + 4], u32_at(at + 8), at, len));
        at += len;
    }
    out
}

#[test]
fn a_cut_file_keeps_the_samples_before_the_cut() {
    let path = trace_path("cut");
    // About 1.3 s: the recorder writes the samples gathered every half second.
    let (summary, _) = record(&path, &["grow", "64"], |_| {});
    assert_eq!(summary.status.code(), Some(0));
    let full = TraceReader::open(&path).unwrap().memory_samples(0).to_vec();
    let memory: Vec<_> = chunk_kinds(&path)
        .into_iter()
        .filter(|c| c.0 == 9 && c.1 == 0)
        .collect();
    assert!(memory.len() >= 2, "{memory:?}");
    let last = memory.last().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut = trace_path("cut-short");
    std::fs::write(&cut, &bytes[..last.2 + last.3 / 2]).unwrap();
    let reader = TraceReader::open(&cut).unwrap();
    assert!(reader.damage().is_some());
    let kept = reader.memory_samples(0);
    let in_last = (last.3 - 24 - 8) / (9 * 8);
    assert_eq!(kept, &full[..full.len() - in_last]);
    assert!(!kept.is_empty());
    // The events before the cut read too.
    assert!(!read_trace_prefix(&cut).is_empty());
}

fn read_trace_prefix(path: &Path) -> Vec<trace::Record> {
    let mut reader = TraceReader::open(path).unwrap();
    reader
        .records(0)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// A program whose main thread calls pthread_exit while another thread holds 16 MiB: /proc/PID
/// shows the zombie leader (statm all 0), yet the image runs on and is sampled through its live
/// thread. Its samples were silently missing.
#[test]
fn an_image_whose_main_thread_exited_is_sampled() {
    let path = trace_path("leader-exit");
    let command = vec![
        testkit::program("leader_exit").as_os_str().to_owned(),
        "16".into(),
        "1".into(),
    ];
    let mut o = recorder::RecordOptions::new(command, path.clone());
    // About 1 s at 20 ms between smaps reads (at the default 100 ms, a loaded machine's recorder
    // once took fewer than three); main exits within milliseconds of the start.
    o.memory_interval = Some(std::time::Duration::from_millis(20));
    let summary = recorder::record(&o).unwrap();
    assert_eq!(summary.status.code(), Some(0));
    let reader = TraceReader::open(&path).unwrap();
    let samples = reader.memory_samples(0);
    let held: Vec<&MemorySample> = samples
        .iter()
        .filter(|s| s.rss >= 16 * MIB && s.heap.is_some_and(|h| h >= 16 * MIB))
        .collect();
    assert!(held.len() >= 3, "{samples:#?}");
}
