//! The data a run produces, serialised as results.json (schema in docs/results-format.md). These types
//! are the format: `results_dir` writes them and reads them back. Reading is lenient: every type that
//! results.json holds takes defaults for fields an older file lacks, and unknown fields are ignored.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::child::CommandExit;
use crate::host::HostInfo;
use crate::plan::{Assignment, Param};
use crate::summary::Group;

/// Why a sample was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleKind {
    Interval,
    Marker,
}

/// Whether the requested allocator library was seen mapped in the command's process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocatorCheck {
    /// The library was mapped at the last look.
    Loaded,
    /// The process ran long enough to be looked at and the library was not mapped: a static binary, a
    /// setuid program, or one that resets LD_PRELOAD. The results do not describe this allocator.
    NotLoaded,
    /// glibc: nothing is preloaded.
    NotApplicable,
    /// The process ended before it could be looked at. Also what a results file without the check,
    /// or with one this alloclens does not know, reads as.
    #[default]
    #[serde(other)]
    Unverified,
}

impl AllocatorCheck {
    /// The name results.json uses.
    pub fn as_str(&self) -> &'static str {
        match self {
            AllocatorCheck::Loaded => "loaded",
            AllocatorCheck::NotLoaded => "not_loaded",
            AllocatorCheck::NotApplicable => "not_applicable",
            AllocatorCheck::Unverified => "unverified",
        }
    }
}

/// Time-weighted statistics of one tree-total memory series, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesStats {
    pub peak: u64,
    pub mean: f64,
    pub last: u64,
}

/// Memory of the whole tree over one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemorySummary {
    pub samples: u64,
    pub pss: SeriesStats,
    pub rss: SeriesStats,
    pub uss: SeriesStats,
    pub vss: SeriesStats,
    pub swap: SeriesStats,
    pub anon: SeriesStats,
    /// Most processes seen in the tree at one sample.
    pub max_processes: u32,
    /// Distinct pids seen in the tree over the run.
    pub distinct_processes: u32,
    /// The kernel's high-water mark (wait4's `ru_maxrss`, KiB from the kernel, here in bytes): the
    /// peak RSS of the largest single process among the command and the descendants waited for,
    /// whatever the sampling missed; not the tree's sum. None when it could be alloclens's forked
    /// copy rather than the command's (`child::command_peak_rss`), and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_peak_rss: Option<u64>,
}

impl MemorySummary {
    /// The run's peak RSS: the larger of the samples' tree peak and the kernel's largest process
    /// peak, both lower bounds of the tree's true peak (the kernel's is exact for one process).
    /// None with neither (no sample, and a command too small for the kernel's figure).
    pub fn peak_rss(&self) -> Option<u64> {
        let sampled = (self.samples > 0).then_some(self.rss.peak);
        sampled.max(self.kernel_peak_rss)
    }

    /// Whether [`MemorySummary::peak_rss`] is the kernel's: no sample, or the samples missed a peak
    /// the kernel saw.
    pub fn peak_rss_is_kernel(&self) -> bool {
        self.kernel_peak_rss
            .is_some_and(|k| self.samples == 0 || k > self.rss.peak)
    }
}

/// Whether a marker's figures could be read for that marker (markers.csv `status`, `pss_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerStatus {
    /// Read after the line arrived and before a later marker line did.
    Ok,
    /// Not given: a later marker line had arrived before the figures were read, so they would be
    /// (partly) a later event's.
    Late,
    /// Not given: the command's tree had no process left (it had exited), or /proc was unreadable.
    Missing,
}

impl MarkerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerStatus::Ok => "ok",
            MarkerStatus::Late => "late",
            MarkerStatus::Missing => "missing",
        }
    }
}

/// How many markers of a run got a figure, by [`MarkerStatus`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MarkerCounts {
    pub ok: u64,
    pub late: u64,
    pub missing: u64,
}

impl MarkerCounts {
    pub fn add(&mut self, status: MarkerStatus) {
        match status {
            MarkerStatus::Ok => self.ok += 1,
            MarkerStatus::Late => self.late += 1,
            MarkerStatus::Missing => self.missing += 1,
        }
    }

    /// Markers without this figure.
    pub fn without(&self) -> u64 {
        self.late + self.missing
    }
}

/// One output line that matched `--marker`, with the tree's memory at that line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MarkerRecord {
    /// Seconds from the run's start to the line's arrival (the read that brought it returned).
    pub t: f64,
    pub label: String,
    pub line: String,
    /// Tree totals of RSS and VSS (statm), read on arrival: present only when `status` is ok.
    pub rss: Option<u64>,
    pub vss: Option<u64>,
    /// Seconds from the line's arrival to the end of the RSS/VSS reading (when `status` is ok).
    pub delay: Option<f64>,
    pub status: MarkerStatus,
    /// Tree total PSS of the full sample taken for this marker: present only when `pss_status` is
    /// ok, i.e. that sample ended before a later marker line arrived.
    pub pss: Option<u64>,
    /// Seconds from the line's arrival to the end of that sample (when `pss_status` is ok).
    pub pss_delay: Option<f64>,
    pub pss_status: MarkerStatus,
}

/// How the run ended, beyond the exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ending {
    pub status: Option<CommandExit>,
    pub timed_out: bool,
    pub interrupted: bool,
    /// The command could not be started (e.g. not found): the message.
    pub spawn_error: Option<String>,
    /// Descendants still running when the command itself ended; they were stopped.
    pub stopped_leftovers: u32,
}

impl Ending {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success()) && !self.timed_out && !self.interrupted
    }

    /// A short human description: "ok", "exit 3", "signal 9", "timeout", "interrupted", "not started".
    pub fn describe(&self) -> String {
        if self.spawn_error.is_some() {
            return "not started".into();
        }
        if self.timed_out {
            return "timeout".into();
        }
        if self.interrupted {
            return "interrupted".into();
        }
        match self.status {
            Some(CommandExit { code: Some(0), .. }) => "ok".into(),
            Some(CommandExit { code: Some(c), .. }) => format!("exit {c}"),
            Some(CommandExit {
                signal: Some(s), ..
            }) => format!("signal {s}"),
            _ => "unknown".into(),
        }
    }
}

/// Everything measured in one run of one variant at one parameter point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunRecord {
    pub index: usize,
    pub variant: String,
    pub allocator: String,
    pub params: Assignment,
    pub repeat: u32,
    pub command: Vec<String>,
    pub ending: Ending,
    /// When the command was started, ns since the Unix epoch (system clock); None when it never
    /// started. `t_s` of samples.csv and markers.csv counts from this moment. Absent in results of
    /// an alloclens before it (left out when None, as the other later fields are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    /// Seconds from start to the command's exit.
    pub wall: f64,
    /// CPU seconds of the whole tree (the command and every descendant that was waited for).
    pub user: f64,
    pub sys: f64,
    pub memory: MemorySummary,
    pub markers: u64,
    /// Every marker of the run, in order (markers.csv has them; not repeated in results.json).
    #[serde(skip)]
    pub marker_records: Vec<MarkerRecord>,
    /// How many markers got their RSS and VSS (`status` of markers.csv)...
    pub marker_figures: MarkerCounts,
    /// ...and their PSS (`pss_status`).
    pub marker_pss: MarkerCounts,
    /// Units per second: from --throughput, or markers per second.
    pub throughput: Option<f64>,
    pub throughput_source: Option<String>,
    pub allocator_check: AllocatorCheck,
    /// Other known allocator libraries seen mapped in the command (it may bring its own).
    pub other_allocators: Vec<String>,
    /// CPU seconds alloclens itself spent sampling during this run.
    pub sampler_cpu: f64,
    /// KSM figures of the run (with `run --ksm`; docs/ksm.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ksm: Option<KsmSummary>,
}

/// How `run --ksm` drove ksmd for the session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KsmSession {
    /// How the command's tree was made mergeable in the `ksm=on` runs.
    pub mechanism: String,
    /// The `--ksm-set` settings as given (`{NAME}` placeholders follow the runs' parameters).
    pub settings: Vec<(String, String)>,
    /// The values found before the session, given back at its end (`run` included).
    pub previous: Vec<(String, String)>,
}

/// Kernel samepage merging over one run, from the same samples as the memory figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KsmSummary {
    /// Whether the command's tree was made mergeable for this run (KSM "on"); false when the
    /// madvise library was asked for but not seen mapped in the command (`library`).
    pub merging_enabled: bool,
    /// With `--ksm-mechanism madvise`, in the KSM-on runs: whether the preloaded library was seen
    /// mapped in the command's process, as `allocator_check` for an allocator's library.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<AllocatorCheck>,
    /// Bytes of the tree's pages that are merged (sum of `ksm_merging_pages` × page size).
    pub merging: SeriesStats,
    /// The kernel's figure for the tree: sum of `ksm_process_profit` (bytes saved minus KSM's
    /// metadata), at the last sample and at most.
    pub profit_last: i64,
    pub profit_peak: i64,
    /// System-wide `pages_sharing` and `pages_volatile`, in bytes.
    pub sharing: SeriesStats,
    pub volatile: SeriesStats,
    /// Seconds from the start until `merging` first reached 90 % of its peak; None when nothing
    /// merged.
    pub settle_s: Option<f64>,
    /// Full scans ksmd completed during the run.
    pub full_scans: u64,
    /// CPU seconds ksmd used between the first and last sample, and that as % of one core.
    pub ksmd_cpu_s: Option<f64>,
    pub ksmd_cpu_pct: Option<f64>,
}

/// How a variant was configured, as results.json records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VariantInfo {
    pub label: String,
    pub allocator: String,
    pub library: Option<PathBuf>,
    pub version: Option<String>,
    pub settings: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

impl VariantInfo {
    /// How results.json records `variants`, with the installed allocators' versions (looked up
    /// once: a tune space has dozens of variants).
    pub fn of_variants(variants: &[allocators::Variant]) -> Vec<VariantInfo> {
        let installed = allocators::discover();
        variants
            .iter()
            .map(|v| VariantInfo {
                label: v.label.clone(),
                allocator: v.allocator.clone(),
                library: v.library.clone(),
                version: installed
                    .iter()
                    .find(|a| a.name == v.allocator)
                    .and_then(|a| a.version.clone()),
                settings: v.settings.clone(),
                env: v.env.clone(),
            })
            .collect()
    }
}

/// Fields added after the first version are left out when empty, so such a file writes back
/// unchanged.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Everything results.json holds (schema in docs/results-format.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResults {
    /// [`crate::results_dir::SCHEMA_VERSION`] when written; a reader refuses a newer one.
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    pub created: String,
    pub host: HostInfo,
    pub command: Vec<String>,
    pub params: Vec<Param>,
    pub repeats: u32,
    pub interval_s: f64,
    pub marker: Option<String>,
    pub throughput: Option<String>,
    /// `--throughput-unit`, e.g. "ops/s" (absent: units per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_unit: Option<String>,
    /// `--warmup`: unmeasured runs per variant and point before the measured ones.
    #[serde(skip_serializing_if = "is_zero")]
    pub warmup: u32,
    /// `--prepare` and `--cleanup` commands, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<String>,
    pub baseline: Option<String>,
    pub variants: Vec<VariantInfo>,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Results files that miss something (a full disk), one line each; filled by
    /// [`crate::results_dir::ResultsDir::write_results`].
    pub incomplete_files: Vec<String>,
    pub runs: Vec<RunRecord>,
    pub summary: Vec<Group>,
    /// With `run --ksm`: how ksmd was driven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ksm: Option<KsmSession>,
    /// With `run --ksm`: what KSM saved per variant and point ([`crate::ksm_savings`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ksm_savings: Vec<crate::KsmSaving>,
    /// With `alloclens tune`: the search (candidates, their figures, what was dropped when and why,
    /// the recommendation; docs/tune.md); the runs of every candidate are `runs`, each candidate a
    /// variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<crate::tune_record::TuneRecord>,
}

impl RunResults {
    /// A results.json stamped with this alloclens, this host and now, every other field empty:
    /// the start of each command's literal (`RunResults { command, .., ..RunResults::stamped() }`).
    pub fn stamped() -> RunResults {
        RunResults {
            schema_version: crate::results_dir::SCHEMA_VERSION,
            tool: "alloclens".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            created: chrono::Local::now().to_rfc3339(),
            host: HostInfo::current(),
            ..RunResults::default()
        }
    }
}
