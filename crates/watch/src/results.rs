//! DIR/watch.json: the watch's format, written and read here (docs/watch.md). Written once at the
//! start (`ending: null`, so a killed watch still says what it watched) and replaced at the end,
//! each time beside the file and renamed over it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::{
    AttachReading, GdbReading, ProcessFigures, ProgramExit, TrimProbe, WatchEnding, WatchOutcome,
};
use crate::history::WatchSample;
use crate::residency::ResidencyQuote;
use crate::verdict::{
    classify, shell_line, HeldFree, LiveMissing, TrimResult, Verdict, VerdictInput,
};

pub const SCHEMA_VERSION: u32 = 1;
pub const WATCH_JSON: &str = "watch.json";
pub const SAMPLES_CSV: &str = "samples.csv";
/// The program's stdout and stderr when `alloclens live` kept them aside (the terminal is the
/// view's).
pub const PROGRAM_OUTPUT: &str = "program.out";
/// The pid of `alloclens live --pid`'s background collector while it runs (docs/live.md).
pub const COLLECTOR_PID: &str = "collector.pid";
/// That collector's standard output and error.
pub const COLLECTOR_LOG: &str = "collector.log";

/// The agent's snapshot files (one per live process, replaced in place).
pub const AGENT_DIR: &str = "agent";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchResults {
    pub schema_version: u32,
    pub tool_version: String,
    pub created: String,
    /// The command started (empty with `--pid`).
    pub command: Vec<String>,
    /// `--pid`: the process watched.
    pub pid: Option<u32>,
    /// The root process of the watched tree.
    pub root_pid: Option<u32>,
    /// `-a`: the allocator variant's label and settings.
    pub variant: Option<String>,
    /// The allocator that really serves malloc (the agent's view).
    pub allocator: Option<String>,
    pub interval_s: f64,
    pub duration_s: Option<f64>,
    pub started_unix_ms: u64,
    /// null while the watch runs (or when it was killed).
    pub ending: Option<WatchEnding>,
    pub exit: Option<ProgramExit>,
    pub still_running: bool,
    pub samples_taken: u64,
    pub samples_kept: u64,
    /// Ticks of the interval passed without a sample (alloclens was stopped, or a sample took
    /// longer than the interval): skipped, not taken in a burst.
    pub ticks_skipped: u64,
    pub verdict: Option<Verdict>,
    pub first: Option<WatchSample>,
    pub last: Option<WatchSample>,
    pub peak_rss: u64,
    pub processes: Vec<ProcessFigures>,
    /// `--pid`: how the agent was loaded into the process, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachReading>,
    /// gdb's readings, in watch.json files of alloclens versions that read `--pid` through gdb.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gdb: Vec<GdbReading>,
    pub trim: Vec<TrimProbe>,
    pub warnings: Vec<String>,
    pub incomplete_files: Vec<String>,
    /// alloclens's own CPU time over the watch, s.
    pub cpu_s: f64,
    /// Which share of the heap's resident pages hold no live block, when known
    /// (docs/memory-metrics.md, "The verdict").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub residency: Option<ResidencyQuote>,
}

/// Writes `results` to DIR/watch.json, whole (`safe_output::write_whole`): a write that fails (a
/// full disk) leaves the previous watch.json and no temporary file.
pub fn write_results(dir: &Path, results: &WatchResults) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(results).map_err(std::io::Error::other)?;
    text.push(b'\n');
    safe_output::write_whole(&dir.join(WATCH_JSON), |out| out.write_all(&text))
}

/// A watch directory read back: watch.json (when there is one) and samples.csv.
pub struct WatchDir {
    pub path: PathBuf,
    pub results: WatchResults,
    /// The readable rows of samples.csv.
    pub samples: Vec<WatchSample>,
    /// What is wrong with samples.csv (empty, cut, garbled lines), sentences naming the lines.
    pub samples_damage: Vec<String>,
}

impl WatchDir {
    /// Whether `dir` is a watch directory (has a watch.json naming no `run`, or a samples.csv with
    /// watch columns).
    pub fn is_watch_dir(dir: &Path) -> bool {
        dir.join(WATCH_JSON).is_file()
    }

    pub fn load(dir: &Path) -> std::io::Result<WatchDir> {
        let json = std::fs::read(dir.join(WATCH_JSON))?;
        let mut results: WatchResults = serde_json::from_slice(&json).map_err(|e| {
            std::io::Error::other(format!("{}: {e}", dir.join(WATCH_JSON).display()))
        })?;
        if results.schema_version > SCHEMA_VERSION {
            return Err(std::io::Error::other(format!(
                "{} has schema version {}, this alloclens reads up to {SCHEMA_VERSION}: use a newer alloclens",
                dir.join(WATCH_JSON).display(),
                results.schema_version
            )));
        }
        let expected = crate::samples_file::Expected {
            kept: results.ending.map(|_| results.samples_kept),
        };
        let read = crate::samples_file::read_samples_checked(&dir.join(SAMPLES_CSV), expected);
        let samples = read.samples;
        // A killed watch: the verdict from what samples.csv kept.
        if results.verdict.is_none() && !samples.is_empty() {
            results.verdict = Some(classify(&verdict_input(&results, &samples, &[])));
            results.samples_kept = samples.len() as u64;
            results.first = samples.first().cloned();
            results.last = samples.last().cloned();
            results.peak_rss = samples.iter().map(|s| s.rss).max().unwrap_or(0);
        }
        Ok(WatchDir {
            path: dir.to_path_buf(),
            results,
            samples,
            samples_damage: read.damage,
        })
    }
}

/// The series and facts the verdict is computed from; `missing`: why processes ran without the
/// agent (the engine's findings, one sentence each).
pub fn verdict_input(
    results: &WatchResults,
    samples: &[WatchSample],
    missing: &[String],
) -> VerdictInput {
    let series = |f: fn(&WatchSample) -> Option<u64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_s, v as f64)))
            .collect()
    };
    let mut input = VerdictInput {
        rss: series(|s| Some(s.rss)),
        heap: series(|s| Some(s.heap)),
        live: series(|s| s.live_bytes),
        live_blocks: series(|s| s.live_blocks),
        live_name: "live bytes".into(),
        free: series(|s| s.free_resident),
        rss_unmeasured: series(|s| s.rss_unmeasured),
        cpu: samples
            .iter()
            .filter_map(|s| s.cpu_s.map(|c| (s.t_s, c)))
            .collect(),
        command: results.command.clone(),
        allocator: results.allocator.clone(),
        residency: results.residency.clone(),
        ..Default::default()
    };
    // What the allocator held free at the window's last sample that has its figures (the
    // snapshot taken at exit describes the program after it freed everything, not the window).
    if let Some(last) = samples.iter().rev().find(|s| s.free_resident.is_some()) {
        let arenas = results
            .processes
            .iter()
            .filter_map(|p| p.snapshot.as_ref())
            .map(|s| s.allocator.arenas.len())
            .sum();
        input.held = Some(HeldFree {
            allocator: results
                .allocator
                .clone()
                .unwrap_or_else(|| "the allocator".into()),
            free: last.free_resident.unwrap_or(0),
            handed_out: last.handed_out,
            free_chunks: last.free_chunks,
            arenas,
        });
    }
    // An agent attached to a running process counts nothing: its live bytes are the allocator's
    // in-use bytes.
    if results
        .processes
        .iter()
        .any(|p| p.snapshot.as_ref().is_some_and(|s| s.attached))
    {
        input.live_blocks.clear();
        input.live_name = "in-use bytes (the allocator's statistics)".into();
    }
    // watch.json of an alloclens that read `--pid` through gdb: glibc's in-use and free bytes
    // from its readings.
    let readings: Vec<&GdbReading> = results.gdb.iter().filter(|g| g.stats.is_some()).collect();
    if input.live.is_empty() && !readings.is_empty() {
        input.live_blocks.clear();
        input.live_name = "in-use bytes (malloc_info)".into();
        input.live = readings
            .iter()
            .filter_map(|g| g.stats.as_ref()?.handed_out.map(|v| (g.t_s, v as f64)))
            .collect();
        input.free = readings
            .iter()
            .filter_map(|g| g.stats.as_ref()?.free_resident.map(|v| (g.t_s, v as f64)))
            .collect();
        if let Some(last) = readings.last().and_then(|g| g.stats.as_ref()) {
            input.held = last.free_resident.map(|free| HeldFree {
                allocator: allocators::GLIBC.into(),
                free,
                handed_out: last.handed_out,
                free_chunks: last.free_chunks,
                arenas: last.arenas.len(),
            });
        }
    }
    if input.live.len() == 1 {
        // One reading is no trend.
        input.live.clear();
        input.free.clear();
    }
    input.live_missing = Some(live_missing(results, missing));
    let rss_before: u64 = results.trim.iter().map(|t| t.rss_before).sum();
    let rss_after: u64 = results.trim.iter().map(|t| t.rss_after).sum();
    if !results.trim.is_empty() {
        input.trim = Some(TrimResult {
            call: trim_call_static(&results.trim[0].call),
            rss_before,
            rss_after,
        });
    } else if let Some(g) = results.gdb.iter().rev().find(|g| g.trim_returned.is_some()) {
        input.trim = Some(TrimResult {
            call: "malloc_trim(0)",
            rss_before: g.rss_before,
            rss_after: g.rss_after,
        });
    }
    input
}

/// Why live bytes may be missing, and how to measure them, from what the watch knows.
fn live_missing(results: &WatchResults, missing: &[String]) -> LiveMissing {
    let mut m = LiveMissing {
        why: missing.to_vec(),
        ..Default::default()
    };
    let cmd = if results.command.is_empty() {
        "CMD".to_string()
    } else {
        shell_line(&results.command)
    };
    if let Some(pid) = results.pid {
        match &results.attach {
            None => {
                m.why
                    .push("--no-attach: the agent was not loaded into the process".into());
                m.remedy.push(
                    "Load the agent into the running process (leave out --no-attach), or start the program under watch:".into(),
                );
                m.commands.push(format!("alloclens watch --pid {pid}"));
            }
            Some(a) => {
                m.why.extend(a.error.clone());
                m.remedy.push(
                    "Start the program under watch (the agent counts its live bytes), or trace it:"
                        .into(),
                );
                m.commands.push("alloclens watch -- CMD".into());
                m.commands
                    .push("alloclens record -o watch.alt -- CMD".into());
            }
        }
        return m;
    }
    if missing.is_empty() {
        m.why
            .push("the agent wrote no snapshot of the processes that grow".into());
    }
    let stat = missing.iter().any(|w| w.contains("statically linked"));
    if stat {
        m.remedy.push(
            "A static program loads neither the agent nor record's shim: link it dynamically to measure its live bytes with watch or record.".into(),
        );
    }
    if missing.iter().any(|w| !w.contains("statically linked")) || !stat {
        m.remedy.push(
            "Measure live bytes: let the agent load (keep LD_PRELOAD), load it into the running process (watch --pid), or trace it:".into(),
        );
        m.commands.push("alloclens watch --pid PID".into());
        m.commands
            .push(format!("alloclens record -o watch.alt -- {cmd}"));
    }
    m
}

fn trim_call_static(call: &str) -> &'static str {
    allocators::catalog::CATALOG
        .iter()
        .map(|a| crate::engine::trim_call(a.name))
        .find(|c| *c == call)
        .unwrap_or("the allocator's trim")
}

/// The results of a finished watch, its verdict computed.
pub fn assemble(
    mut base: WatchResults,
    outcome: WatchOutcome,
    installed: &[String],
    variant_allocator: Option<&str>,
) -> WatchResults {
    base.root_pid = Some(outcome.root_pid);
    base.started_unix_ms = outcome.started_unix_ms;
    base.ending = Some(outcome.ending);
    base.exit = outcome.exit;
    base.still_running = outcome.still_running;
    base.samples_taken = outcome.samples_taken;
    base.ticks_skipped = outcome.ticks_skipped;
    base.samples_kept = outcome.samples.len() as u64;
    base.first = outcome.samples.first().cloned();
    base.last = outcome.samples.last().cloned();
    base.peak_rss = outcome.samples.iter().map(|s| s.rss).max().unwrap_or(0);
    base.processes = outcome.processes;
    base.attach = outcome.attach;
    base.trim = outcome.trim;
    base.warnings.extend(outcome.warnings);
    base.incomplete_files = outcome.write_problems;
    base.cpu_s = outcome.cpu_s;
    base.residency = outcome.residency.map(|q| *q);
    if base.allocator.is_none() {
        base.allocator = base
            .processes
            .iter()
            .find_map(|p| p.snapshot.as_ref())
            .map(|s| s.allocator.name.clone());
    }
    // An allocator that is neither walked nor counts its free pages: said to be unknown.
    if let (None, Some(name)) = (&base.residency, &base.allocator) {
        if name != allocators::GLIBC {
            base.residency = Some(ResidencyQuote {
                allocator: name.clone(),
                ..Default::default()
            });
        }
    }
    // An allocator that does not report its free bytes (tbbmalloc, mimalloc's release build, an
    // unknown library): said once.
    let snaps: Vec<&agent::Snapshot> = base
        .processes
        .iter()
        .filter_map(|p| p.snapshot.as_ref())
        .collect();
    if let Some(s) = snaps
        .iter()
        .find(|s| s.allocator.handed_out.is_none() && s.allocator.free_resident.is_none())
    {
        base.warnings.push(format!(
            "{} does not report the bytes it holds free (docs/memory-metrics.md, \"Allocator statistics\"): the verdict rests on RSS, the smaps split and live bytes",
            s.allocator.name
        ));
    }
    let mut input = verdict_input(&base, &outcome.samples, &outcome.live_missing);
    input.installed = installed.to_vec();
    base.verdict = Some(classify(&input));
    // As `run` checks the library is mapped: the agent says which allocator really serves malloc.
    if let (Some(label), Some(expected), Some(serving)) =
        (&base.variant, variant_allocator, &base.allocator)
    {
        if serving != expected && serving != "unknown" {
            base.warnings.push(format!(
                "variant `{label}`: malloc is served by {serving}, not {expected} (a static or set-ID program, or one that resets LD_PRELOAD?): the figures are {serving}'s"
            ));
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::WatchEnding;

    fn outcome() -> WatchOutcome {
        WatchOutcome {
            root_pid: 1,
            started_unix_ms: 0,
            ending: WatchEnding::Exited,
            exit: None,
            still_running: false,
            samples: Vec::new(),
            samples_taken: 0,
            processes: Vec::new(),
            attach: None,
            trim: Vec::new(),
            warnings: Vec::new(),
            write_problems: Vec::new(),
            snapshots: Vec::new(),
            snapshots_taken: 0,
            cpu_s: 0.0,
            ticks_skipped: 0,
            live_missing: Vec::new(),
            residency: None,
        }
    }

    /// As `run` checks the library is mapped: a variant whose allocator does not serve malloc is
    /// said, naming both.
    #[test]
    fn the_allocator_serving_malloc_is_checked_against_the_variant() {
        let base = |serving: &str| WatchResults {
            variant: Some("jemalloc:narenas=1".into()),
            allocator: Some(serving.into()),
            ..Default::default()
        };
        let served_by =
            |r: &WatchResults| r.warnings.iter().any(|w| w.contains("malloc is served"));
        let results = assemble(base("glibc"), outcome(), &[], Some("jemalloc"));
        assert!(
            results.warnings.iter().any(|w| w.starts_with(
                "variant `jemalloc:narenas=1`: malloc is served by glibc, not jemalloc"
            )),
            "{:?}",
            results.warnings
        );
        assert!(!served_by(&assemble(
            base("jemalloc"),
            outcome(),
            &[],
            Some("jemalloc")
        )));
        assert!(!served_by(&assemble(
            base("unknown"),
            outcome(),
            &[],
            Some("jemalloc")
        )));
        assert!(!served_by(&assemble(base("glibc"), outcome(), &[], None)));
    }
}
