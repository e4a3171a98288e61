//! `tree`: a tree of processes that each hold some resident memory for a while, then exit.
//!
//! Process 0 is the one started; process i forks processes 2i+1 and 2i+2 (while < procs), so the tree
//! has grandchildren, as real process trees do (a sampler must find descendants, not just children).
//! Each process allocates its own `mb` MiB after forking (private, so the tree's total RSS and PSS are
//! about procs x mb), holds it for `seconds`, frees it and waits for its children. Used by tests and by
//! the sampler benchmark.

use std::io::Write;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::fork::{reap, spawn, ReportPipe};
use crate::heap::Heap;
use crate::output::{finish, line};
use crate::rng::mix;
use crate::{require, Summary, WorkloadError, WorkloadProcess};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TreeOptions {
    /// Processes in the tree, this one included.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeOptions::default().procs))]
    pub procs: u32,
    /// Resident memory each process holds, MiB.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeOptions::default().mb))]
    pub mb: u64,
    /// How long each process holds it, seconds.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeOptions::default().seconds))]
    pub seconds: f64,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeOptions::default().seed))]
    pub seed: u64,
}

impl Default for TreeOptions {
    fn default() -> Self {
        Self {
            procs: 4,
            mb: 16,
            seconds: 1.0,
            seed: 42,
        }
    }
}

impl TreeOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require(
            (1..=1024).contains(&self.procs),
            "procs",
            "must be between 1 and 1024",
        )?;
        require(self.mb <= 1 << 20, "mb", "must be at most 1048576")?;
        require(
            self.seconds.is_finite() && (0.0..=86_400.0).contains(&self.seconds),
            "seconds",
            "must be between 0 and 86400",
        )
    }
}

pub fn run(opts: &TreeOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=tree procs={} mb={} seconds={} pid={}",
            opts.procs,
            opts.mb,
            opts.seconds,
            std::process::id()
        ),
    )?;
    let pipe = ReportPipe::new()?;
    let own = node(opts, 0, &pipe, out);
    let sent = own.and_then(|report| pipe.send(&report));
    let reports = pipe.collect();
    sent?;
    let mut reports = reports?;
    reports.sort_by_key(|r| r.index);

    let summary = Summary {
        workload: "tree",
        ops: reports.len() as u64,
        unit: "procs",
        elapsed: start.elapsed(),
        allocator_calls: reports.iter().map(|r| r.allocator_calls).sum(),
        checksum: reports.iter().fold(opts.seed, |acc, r| {
            acc.wrapping_add(mix(r.checksum ^ u64::from(r.index)))
        }),
        rss_marks: Vec::new(),
        processes: reports,
    };
    finish(out, summary)
}

/// Process `index` of the tree: fork its children, hold memory, wait for them.
fn node(
    opts: &TreeOptions,
    index: u32,
    pipe: &ReportPipe,
    out: &mut dyn Write,
) -> Result<WorkloadProcess, WorkloadError> {
    let mut children: Vec<(u32, Pid)> = Vec::new();
    let mut failure = None;
    for child in [2 * index + 1, 2 * index + 2] {
        if child >= opts.procs {
            continue;
        }
        match spawn(out, pipe, |out| node(opts, child, pipe, out)) {
            Ok(pid) => children.push((child, pid)),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let held = if failure.is_none() {
        hold(opts, index, out)
    } else {
        Ok((0, 0))
    };
    for (child, pid) in children {
        if let Err(e) = reap("tree process", child, pid) {
            failure.get_or_insert(e);
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let (calls, checksum) = held?;
    Ok(WorkloadProcess {
        index,
        pid: std::process::id(),
        ops: 1,
        allocator_calls: calls,
        checksum,
    })
}

/// Allocates and writes `mb` MiB in 1 MiB blocks, announces it, sleeps, frees.
fn hold(opts: &TreeOptions, index: u32, out: &mut dyn Write) -> Result<(u64, u64), WorkloadError> {
    let mut heap = Heap::new();
    let mut blocks = Vec::with_capacity(opts.mb as usize);
    for _ in 0..opts.mb {
        let mut block = heap.malloc(1 << 20)?;
        block.fill(0x7);
        blocks.push(block);
    }
    line(
        out,
        format_args!(
            "tree: process {index} pid {} holding {} MB",
            std::process::id(),
            opts.mb
        ),
    )?;
    std::thread::sleep(Duration::from_secs_f64(opts.seconds));
    for block in blocks {
        heap.free(block);
    }
    Ok((heap.calls(), heap.checksum()))
}
