//! `forkworkers`: a parent that loads shared data and forks workers (GaudiMP, CMS multi-process).
//!
//! The parent allocates and writes `shared_mb` of data (conditions, geometry...), then forks `workers`
//! children without exec. The children only read the shared data, so its pages stay shared
//! copy-on-write and each worker's PSS is well below its RSS; each worker then processes events with
//! the `events` allocation pattern (smaller by default) and `_exit`s. The parent waits for all of them.
//!
//! For kernel samepage merging (KSM) studies, each worker can also build `postfork_mb` of data that is
//! identical in every worker but written *after* the fork (copy-on-write cannot share it, KSM can),
//! keep `volatile_mb` of its own pages rewritten all the time (KSM's `pages_volatile`), and linger
//! `linger_ms` after its events so ksmd has time to scan.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::events::{run_event, EventShape};
use crate::fork::{reap, spawn, ReportPipe};
use crate::heap::{Block, Heap};
use crate::output::{finish, line, self_rss_pss_kb};
use crate::rng::{mix, Rng};
use crate::{require, Summary, WorkloadError, WorkloadProcess};

#[derive(Debug, Clone, PartialEq)]
pub struct ForkworkersOptions {
    /// Data the parent allocates and writes before forking, MiB.
    pub shared_mb: u64,
    pub workers: u32,
    /// Events per worker.
    pub events: u64,
    /// Allocation pattern of one event.
    pub shape: EventShape,
    /// Each worker prints `worker W rss_kb=R pss_kb=P` (from /proc/self/smaps_rollup) once started.
    pub report_rss: bool,
    pub seed: u64,
    /// Data each worker builds after the fork, identical in every worker, MiB.
    pub postfork_mb: u64,
    /// Data each worker rewrites constantly (one word per page, per event and every 10 ms while it
    /// lingers), different in every worker, MiB.
    pub volatile_mb: u64,
    /// How long each worker stays alive after its events, holding its data, ms.
    pub linger_ms: u64,
}

impl Default for ForkworkersOptions {
    fn default() -> Self {
        Self {
            shared_mb: 64,
            workers: 4,
            events: 100,
            shape: EventShape {
                objects: 600,
                buffer_median: 128 << 10,
                ..EventShape::default()
            },
            report_rss: false,
            seed: 42,
            postfork_mb: 0,
            volatile_mb: 0,
            linger_ms: 0,
        }
    }
}

impl ForkworkersOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require(
            (1..=256).contains(&self.workers),
            "workers",
            "must be between 1 and 256",
        )?;
        require(
            self.shared_mb <= 1 << 20,
            "shared_mb",
            "must be at most 1048576",
        )?;
        require(
            self.postfork_mb <= 1 << 20,
            "postfork_mb",
            "must be at most 1048576",
        )?;
        require(
            self.volatile_mb <= 1 << 20,
            "volatile_mb",
            "must be at most 1048576",
        )?;
        require(
            self.linger_ms <= 3_600_000,
            "linger_ms",
            "must be at most 3600000 (one hour)",
        )?;
        self.shape.validate()
    }
}

pub fn run(opts: &ForkworkersOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    let mut rng = Rng::new(opts.seed);
    let mut heap = Heap::new();
    line(
        out,
        format_args!(
            "start: workload=forkworkers shared_mb={} workers={} events={} seed={} parent_pid={}",
            opts.shared_mb,
            opts.workers,
            opts.events,
            opts.seed,
            std::process::id()
        ),
    )?;
    let shared = load_shared(opts.shared_mb, &mut rng, &mut heap)?;
    line(out, format_args!("phase: shared-loaded"))?;

    let pipe = ReportPipe::new()?;
    let mut children = Vec::new();
    let mut spawn_error = None;
    for w in 0..opts.workers {
        let result = spawn(out, &pipe, |out| worker(opts, w, &shared, out));
        match result {
            Ok(pid) => children.push((w, pid)),
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
    }
    // Reap every child that was started, even after an error, so none is left behind.
    let reports = pipe.collect();
    let mut failure = spawn_error;
    for (w, pid) in children {
        if let Err(e) = reap("worker", w, pid) {
            failure.get_or_insert(e);
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut reports = reports?;
    reports.sort_by_key(|r| r.index);
    for block in shared {
        heap.free(block);
    }

    let summary = Summary {
        workload: "forkworkers",
        ops: reports.iter().map(|r| r.ops).sum(),
        unit: "events",
        elapsed: start.elapsed(),
        allocator_calls: heap.calls() + reports.iter().map(|r| r.allocator_calls).sum::<u64>(),
        checksum: reports.iter().fold(heap.checksum(), |acc, r| {
            acc.wrapping_add(mix(r.checksum ^ u64::from(r.index)))
        }),
        rss_marks: Vec::new(),
        processes: reports,
    };
    finish(out, summary)
}

/// Shared read-only data: blocks of 1 KiB to 256 KiB, written so they are resident before the fork.
fn load_shared(mb: u64, rng: &mut Rng, heap: &mut Heap) -> Result<Vec<Block>, WorkloadError> {
    let target = mb << 20;
    let mut blocks = Vec::new();
    let mut total = 0;
    while total < target {
        let size = rng.log_uniform(1 << 10, 256 << 10);
        let mut block = heap.malloc(size as usize)?;
        block.fill(0x5A);
        total += size;
        blocks.push(block);
    }
    Ok(blocks)
}

/// Runs in the forked child.
fn worker(
    opts: &ForkworkersOptions,
    index: u32,
    shared: &[Block],
    out: &mut dyn Write,
) -> Result<WorkloadProcess, WorkloadError> {
    let pid = std::process::id();
    line(out, format_args!("worker {index} started pid {pid}"))?;
    if opts.report_rss {
        let (rss, pss) = self_rss_pss_kb()?;
        line(
            out,
            format_args!("worker {index} rss_kb={rss} pss_kb={pss}"),
        )?;
    }
    let mut rng = Rng::stream(opts.seed, u64::from(index));
    let mut heap = Heap::new();
    // Same seed in every worker: byte for byte the same pages, but each worker's own copies.
    let identical = mib_blocks(opts.postfork_mb, &mut heap, |i, b| {
        b.fill_pattern(opts.seed ^ i)
    })?;
    let tag = u64::from(index) << 32;
    let mut volatile = mib_blocks(opts.volatile_mb, &mut heap, |_, b| b.stamp(PAGE, tag))?;
    if opts.postfork_mb > 0 || opts.volatile_mb > 0 {
        line(
            out,
            format_args!(
                "worker {index} built postfork_mb={} volatile_mb={}",
                opts.postfork_mb, opts.volatile_mb
            ),
        )?;
    }
    let mut kept = Vec::new();
    for n in 1..=opts.events {
        run_event(&opts.shape, &mut rng, &mut heap, &mut kept)?;
        rewrite(&mut volatile, tag | n);
        // Each event reads some of the shared data (reads only: the pages stay shared).
        for _ in 0..8 {
            if let Some(block) = shared.get(rng.below(shared.len() as u64) as usize) {
                block.read_sum(64);
            }
        }
        line(out, format_args!("worker {index} event {n}"))?;
    }
    let linger = Duration::from_millis(opts.linger_ms);
    let events_done = Instant::now();
    let mut round = opts.events;
    while events_done.elapsed() < linger {
        round += 1;
        rewrite(&mut volatile, tag | round);
        std::thread::sleep(Duration::from_millis(10).min(linger));
    }
    for block in kept.into_iter().chain(identical).chain(volatile) {
        heap.free(block);
    }
    Ok(WorkloadProcess {
        index,
        pid,
        ops: opts.events,
        allocator_calls: heap.calls(),
        checksum: heap.checksum(),
    })
}

/// Bytes between the words `stamp` writes: one per page.
const PAGE: usize = 4096;

/// `mb` blocks of 1 MiB, each prepared by `init(block index, block)` so its pages are resident.
fn mib_blocks(
    mb: u64,
    heap: &mut Heap,
    mut init: impl FnMut(u64, &mut Block),
) -> Result<Vec<Block>, WorkloadError> {
    let mut blocks = Vec::new();
    for i in 0..mb {
        let mut block = heap.malloc(1 << 20)?;
        init(i, &mut block);
        blocks.push(block);
    }
    Ok(blocks)
}

/// One new word in every page of the volatile blocks.
fn rewrite(blocks: &mut [Block], value: u64) {
    for block in blocks {
        block.stamp(PAGE, value);
    }
}
