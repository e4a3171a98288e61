//! Streaming analysis of alloclens traces.
//!
//! One pass per process image over its `trace::Record`s in `seq` order computes every figure of
//! docs/metrics.md (calls, live and cumulated bytes and their timelines, size distributions, lifetimes,
//! leaks) for the process, each thread and each phase. Memory is bounded by the live set of the traced
//! program plus the number of distinct sizes, never by the number of events. Process images are
//! independent, so several are analysed in parallel.
//!
//! ```
//! use analyze::{analyze_process, Config};
//! use trace::{Event, Op, ProcessInfo, Record};
//!
//! let info = ProcessInfo { pid: 1, ppid: 0, exec_index: 0, cmdline: vec![], start_unix_ns: 0, truncated: false };
//! let ev = |seq, op, addr, size| Record::Event(Event { seq, t_ns: seq, tid: 1, op, addr, size, old_addr: 0, stack: 0 });
//! let records = vec![ev(0, Op::Malloc, 0x10, 42), ev(1, Op::Free, 0x10, 0)];
//! let report = analyze_process(info, records, &Config::default());
//! assert_eq!(report.stats.lifetimes.median_calls, Some(0));
//! ```
pub mod analysis;
pub mod block_observer;
pub mod calibration;
pub mod call_sites;
pub mod error;
pub mod file;
pub mod hash;
pub mod histogram;
pub mod leaks;
pub mod live_blocks;
pub mod live_set;
pub mod metrics;
pub mod output;
pub mod process;
pub mod residency;
pub mod sampling;
pub mod scope;
pub mod sites;
pub mod sizes;
mod stream_pass;
pub mod streams;
pub mod timeline;

pub use analysis::{
    process_count, Analysis, Filters, PhaseReport, ProcessReport, ScopeReport, ThreadReport,
};
pub use error::AnalyzeError;
pub use file::{analyze_file, analyze_file_with, FileAnalysis};
pub use process::{analyze_process, Config, ProcessAnalyzer};
pub use scope::ReportSettings;
pub use sizes::OverRepresentedRule;
pub use timeline::TimelinePoint;

use trace::{ProcessInfo, Record};

/// Version of the JSON schema of `Analysis` (docs/metrics.md).
pub const SCHEMA_VERSION: u32 = 1;

/// What to analyse: the pass configuration plus the process filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// Keep only the images of this pid (every exec'd image of it).
    pub process: Option<u32>,
    pub config: Config,
    /// Resolve and fold call sites when the trace has stacks (`FileAnalysis::call_sites`).
    pub call_sites: Option<call_sites::CallSiteOptions>,
    /// Threads analysing a file's streams (process images), each its own; 1 analyses them one
    /// after another on the calling thread. `None`: `streams::default_threads()`. The results
    /// are the same whatever the threads.
    pub threads: Option<usize>,
}

impl Options {
    pub fn wants(&self, info: &ProcessInfo) -> bool {
        self.process.is_none_or(|pid| pid == info.pid)
    }
}

/// Analyse in-memory (or lazily produced) process streams, one after the other.
pub fn analyze<I, R>(streams: I, options: &Options) -> Analysis
where
    I: IntoIterator<Item = (ProcessInfo, R)>,
    R: IntoIterator<Item = Record>,
{
    let processes = streams
        .into_iter()
        .filter(|(info, _)| options.wants(info))
        .map(|(info, records)| analyze_process(info, records, &options.config))
        .collect();
    assemble(processes, options)
}

/// Put per-process reports together in a stable order (pid, then exec index).
pub fn assemble(mut processes: Vec<ProcessReport>, options: &Options) -> Analysis {
    processes.sort_by_key(|p| (p.pid, p.exec_index, p.start_unix_ns));
    Analysis {
        schema_version: SCHEMA_VERSION,
        filters: Filters {
            phase: options.config.phase.clone(),
            process: options.process,
        },
        processes,
        warnings: Vec::new(),
        recorder_finished: true,
        untraced: Vec::new(),
    }
}

/// One line for a program that was not traced: "/bin/x (pid 12): statically linked: ...".
pub fn describe_untraced(u: &trace::Untraced) -> String {
    let shown = if u.argv0.is_empty() || u.program.ends_with(&u.argv0) {
        u.program.clone()
    } else {
        format!("{} (as {})", u.program, u.argv0)
    };
    format!("{shown}, pid {}: {}", u.pid, u.reason)
}
