//! The results of an analysis: plain data, serialisable, specified field by field in docs/metrics.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::timeline::TimelinePoint;

/// Everything `alloclens analyze` reports for one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Version of this JSON schema (docs/metrics.md); bumped on incompatible changes.
    pub schema_version: u32,
    pub filters: Filters,
    pub processes: Vec<ProcessReport>,
    /// What could not be analysed (damaged file, recorder notes, missing trailer), one sentence each.
    pub warnings: Vec<String>,
    /// Programs that ran during the recording without the shim: none of their calls are in the
    /// trace (docs/trace-format.md, UNTRACED). Matching `process` when filtered by pid.
    #[serde(default)]
    pub untraced: Vec<trace::Untraced>,
    /// The trace ends with the trailer of a finished recording; false when the recorder was killed or
    /// crashed, or the file was cut (its figures may then stop short). True for records analysed in
    /// memory.
    #[serde(default = "yes")]
    pub recorder_finished: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filters {
    pub phase: Option<String>,
    pub process: Option<u32>,
}

/// Processes among process images: each exec starts a new image of the same process (pid), so a
/// shell that execs its last command is one process with two images.
pub fn process_count(images: &[ProcessReport]) -> usize {
    let pids: std::collections::BTreeSet<u32> = images.iter().map(|p| p.pid).collect();
    pids.len()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub ppid: u32,
    pub exec_index: u32,
    pub cmdline: Vec<String>,
    pub start_unix_ns: u64,
    pub truncated: bool,
    /// The process life: number of allocator calls recorded for this image (all phases).
    pub life_calls: u64,
    /// Time of the last recorded call, ns since the image start.
    pub duration_ns: u64,
    /// Figures of the whole process (restricted to the selected phase with a phase filter).
    pub stats: ScopeReport,
    /// Step of `timeline_by_calls`, in calls.
    pub timeline_calls_step: u64,
    /// In JSON, one array per column (`timeline::columns`).
    #[serde(with = "crate::timeline::columns")]
    pub timeline_by_calls: Vec<TimelinePoint>,
    /// Step of `timeline_by_time`, in ns.
    pub timeline_time_step_ns: u64,
    #[serde(with = "crate::timeline::columns")]
    pub timeline_by_time: Vec<TimelinePoint>,
    pub threads: Vec<ThreadReport>,
    pub phases: Vec<PhaseReport>,
    /// The original run's memory, from the readings the recorder took while it ran
    /// (docs/trace-format.md, "Memory samples"): peak and mean over calls of its RSS, anonymous
    /// memory, heap (private anonymous, smaps split) and the rest of the RSS. With a phase
    /// filter, the readings taken during the selected phases. `null` when the trace has none
    /// (recorded before alloclens took them, or with `record --memory-interval 0`).
    #[serde(default)]
    pub memory: Option<trace::MemorySummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub tid: u32,
    pub stats: ScopeReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Position among the process's phases (0 = first).
    pub index: u32,
    /// Label of the marker that opens the phase; "start" before the first marker.
    pub name: String,
    /// First call index of the phase (a call's `seq`).
    pub start_call: u64,
    /// One past the last call index of the phase.
    pub end_call: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stats: ScopeReport,
}

/// A maximum and when it was first reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peak {
    pub value: u64,
    /// Index (`seq`) of the call after which the maximum was first reached.
    pub call: u64,
    pub t_ns: u64,
}

/// The figures of one scope: a process, a thread or a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeReport {
    /// Calls per entry point name (only those made at least once) and their total.
    pub calls: BTreeMap<String, u64>,
    pub calls_total: u64,
    /// Successful calls that started an allocation (a realloc chain counts once).
    pub allocations: u64,
    /// Successful size requests: allocations plus successful reallocs that did not free.
    pub requests: u64,
    /// Sum of the sizes of `requests` = the cumulated upper bound, bytes.
    pub requested_bytes: u64,
    /// Sum over allocations started in the scope of their last size, bytes.
    pub cumulated_lower_bytes: u64,
    pub failed_allocations: u64,
    pub failed_bytes: u64,
    pub null_frees: u64,
    pub unmatched_frees: u64,
    /// The bytes the unmatched frees said they released: a `free_sized` size, and under
    /// `record --pid` the allocator's usable size of each block allocated before the attach.
    #[serde(default)]
    pub unmatched_freed_bytes: u64,
    pub unmatched_reallocs: u64,
    pub peak_live_bytes: Peak,
    pub peak_live_allocations: Peak,
    pub sizes: SizeReport,
    pub lifetimes: LifetimeReport,
    pub leaks: LeakReport,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// Smallest size in the bucket, bytes.
    pub low: u64,
    /// Largest size in the bucket, bytes (inclusive).
    pub high: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverRepresented {
    /// 16-byte bucket [low, low + 15].
    pub low: u64,
    pub count: u64,
    /// Median count of the neighbouring buckets (window of the rule).
    pub neighbour_median: u64,
    /// The exact size most requested in that bucket, and its count.
    pub top_size: u64,
    pub top_size_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeReport {
    /// Number of sizes counted (= `requests`).
    pub count: u64,
    /// Fraction of them below 512 bytes (0 when there are none).
    pub share_below_512: f64,
    /// Non-empty buckets only, increasing.
    pub buckets_16: Vec<Bucket>,
    pub buckets_32k: Vec<Bucket>,
    /// [0,0], [1,1], [2,3], [4,7], ... non-empty only.
    pub buckets_pow2: Vec<Bucket>,
    /// By decreasing count.
    pub over_represented: Vec<OverRepresented>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    /// The rank, as a fraction (0.5 = median).
    pub q: f64,
    pub calls: u64,
    /// `calls / life_calls` of the process.
    pub share_of_life: f64,
    pub ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// Fraction of lifetimes strictly below `below_calls`.
    pub below_calls: u64,
    pub share_of_life: f64,
    pub fraction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifetimeReport {
    /// Allocations whose end (free, or realloc to 0) was seen.
    pub count: u64,
    /// Fraction of them with lifetime 0 (0 when there are none).
    pub share_zero: f64,
    pub median_calls: Option<u64>,
    pub median_ns: Option<u64>,
    pub mean_calls: f64,
    pub max_calls: u64,
    pub percentiles: Vec<Percentile>,
    pub cdf: Vec<CdfPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakSize {
    pub size: u64,
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakReport {
    /// Allocations still live at the end of the stream.
    pub count: u64,
    pub bytes: u64,
    /// Sizes with the most leaked bytes first.
    pub top_sizes: Vec<LeakSize>,
}
