//! Built-in programs that reproduce allocation patterns from the field, so every alloclens feature can
//! be demonstrated and tested without the user's own program.
//!
//! Each workload has a typed option struct (with `Default` giving a 0.5-2 s run on a small machine) and
//! a `run(&options, out)` function that:
//! - calls the C allocator directly (`malloc`/`calloc`/`realloc`/`free`, see [`heap`]) and writes every
//!   byte it wants resident;
//! - is deterministic given `seed`: [`Summary::checksum`] digests the sequence of (call, size);
//! - writes its marker lines to `out`, flushing each line, because `alloclens run` reads them live;
//! - ends with two lines (see [`output`]): `done: ...` and `throughput: <rate> <unit>/s`.
//!
//! The patterns, flags and exact output lines are documented in `docs/workloads.md`.

pub mod cache;
pub mod churn;
pub mod events;
mod fork;
pub mod forkworkers;
pub mod heap;
pub mod leak;
pub mod output;
pub mod realloc;
pub mod rng;
pub mod tree;
pub mod twowave;
pub mod xthread;

use std::time::Duration;

/// What a workload returns when it completes.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Workload name, as on the command line.
    pub workload: &'static str,
    /// Units of work done (objects, events, appends, processes: see `unit`).
    pub ops: u64,
    /// What one op is, e.g. "events"; the throughput line says `<unit>/s`.
    pub unit: &'static str,
    /// Wall time of the whole workload.
    pub elapsed: Duration,
    /// Allocator calls made by the workload itself (all threads and processes), excluding Rust's own
    /// bookkeeping allocations (pointer tables, channels).
    pub allocator_calls: u64,
    /// Digest of the sequence of (call, size) made; equal seeds and options give equal checksums.
    /// Multi-threaded and multi-process workloads combine per-thread digests order-independently.
    pub checksum: u64,
    /// VmRSS at labelled points (twowave phases with `report_rss`); empty otherwise.
    pub rss_marks: Vec<RssMark>,
    /// The processes a multi-process workload ran (forkworkers' workers, every process of tree).
    pub processes: Vec<WorkloadProcess>,
}

impl Summary {
    /// `ops` per second of wall time.
    pub fn throughput(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.ops as f64 / secs
        } else {
            0.0
        }
    }
}

/// The resident set at one labelled point of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssMark {
    pub label: String,
    pub vmrss_kb: u64,
}

/// One process of a multi-process workload, as reported by the process itself through a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadProcess {
    /// Worker or tree-node index (0 = the parent for `tree`).
    pub index: u32,
    pub pid: u32,
    pub ops: u64,
    pub allocator_calls: u64,
    pub checksum: u64,
}

/// Why a workload could not run or complete.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("invalid option {name}: {reason}")]
    InvalidOption { name: &'static str, reason: String },
    #[error(
        "{call}({size}) returned NULL with {live_bytes} bytes live: out of memory \
         (lower the workload's size options or raise the memory limit)"
    )]
    OutOfMemory {
        call: &'static str,
        size: usize,
        live_bytes: u64,
    },
    #[error("cannot write the workload's output")]
    Output(#[source] std::io::Error),
    #[error("cannot read {path}")]
    Proc {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} failed")]
    Sys {
        what: &'static str,
        #[source]
        source: nix::Error,
    },
    #[error("{role} {index} (pid {pid}) {how}")]
    ChildFailed {
        role: &'static str,
        index: u32,
        pid: i32,
        how: String,
    },
    #[error("thread {index} panicked")]
    ThreadPanicked { index: usize },
}

impl From<std::io::Error> for WorkloadError {
    fn from(e: std::io::Error) -> Self {
        WorkloadError::Output(e)
    }
}

pub(crate) fn require(ok: bool, name: &'static str, reason: &str) -> Result<(), WorkloadError> {
    if ok {
        Ok(())
    } else {
        Err(WorkloadError::InvalidOption {
            name,
            reason: reason.to_string(),
        })
    }
}

/// The request size range of a workload: `1 <= min_size <= max_size`.
pub(crate) fn require_size_range(min_size: u64, max_size: u64) -> Result<(), WorkloadError> {
    require(min_size >= 1, "min_size", "must be at least 1")?;
    require(min_size <= max_size, "min_size", "must not exceed max_size")
}

/// Threads of a workload: 1 to 1024.
pub(crate) fn require_threads(threads: u32) -> Result<(), WorkloadError> {
    require(
        (1..=1024).contains(&threads),
        "threads",
        "must be between 1 and 1024",
    )
}

/// Joins worker threads in spawn order; a panicked thread becomes an error naming its index.
pub(crate) fn join_workers<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, WorkloadError>>>,
) -> Vec<Result<T, WorkloadError>> {
    handles
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            h.join()
                .unwrap_or(Err(WorkloadError::ThreadPanicked { index: i }))
        })
        .collect()
}

/// Adds up the (allocator calls, checksum) of each thread. Digests are combined order-independently
/// (threads finish in any order) but keyed by thread index, so the same seed gives the same checksum.
pub(crate) fn combine_thread_results(
    results: Vec<Result<(u64, u64), WorkloadError>>,
    seed: u64,
) -> Result<(u64, u64), WorkloadError> {
    let mut calls = 0;
    let mut checksum = seed;
    for (i, result) in results.into_iter().enumerate() {
        let (c, sum) = result?;
        calls += c;
        checksum = checksum.wrapping_add(rng::mix(sum ^ i as u64));
    }
    Ok((calls, checksum))
}
