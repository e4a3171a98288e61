//! What the watch asks of the program beyond sampling it: the agent loaded into a `--pid` process
//! (crates/attach), and the trim probe at the end.
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use allocators::{GLIBC, JEMALLOC, MIMALLOC, TBBMALLOC, TCMALLOC};
use serde::{Deserialize, Serialize};

use crate::engine::{ProcessFigures, WatchEvent, WatchOptions, WatchOutcome};

/// How the agent was loaded into a `--pid` process, or why it was not.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AttachReading {
    /// Where the borrowed thread was: "malloc (libc.so.6) in thread 1234", "system call 7 in
    /// thread 1234".
    pub safe_point: String,
    /// How long that thread ran alloclens's calls instead of its own code, ms.
    pub borrowed_ms: f64,
    /// From the first ptrace stop to the detach of the last thread, ms.
    pub total_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One gdb reading of a `--pid` process, as alloclens made them before it attached without a
/// debugger: kept so that older watch.json files are still read and drawn.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GdbReading {
    pub t_s: f64,
    /// How long the process was stopped, ms (tracing stop seen in /proc).
    pub pause_ms: f64,
    pub gdb_ms: f64,
    pub stats: Option<agent::AllocatorStats>,
    /// malloc_trim(0)'s return value when the trim probe was made with this reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim_returned: Option<i32>,
    /// RSS before and after the reading (with the trim probe: what the trim gave back).
    pub rss_before: u64,
    pub rss_after: u64,
    /// Why it could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a trim probe measured, per process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrimProbe {
    pub pid: u32,
    /// The allocator's call: malloc_trim(0), arena purge, ...
    pub call: String,
    pub rss_before: u64,
    pub rss_after: u64,
    pub free_resident_before: Option<u64>,
    pub free_resident_after: Option<u64>,
}

/// Loads the agent into process `pid` (crates/attach), said as a note; a refusal or a failure is
/// a warning and the watch goes on with /proc figures alone.
pub(crate) fn attach_agent(
    pid: u32,
    interval: Duration,
    profile: Option<&agent::AttachProfile>,
    on_event: &mut dyn FnMut(WatchEvent),
) -> (Option<agent::AttachedAgent>, AttachReading) {
    // The agent writes at the watch's interval, at least every 100 ms.
    let interval = interval.max(Duration::from_millis(100));
    let attached = match profile {
        Some(p) => agent::attach_profiled(pid, interval, p),
        None => agent::attach(pid, interval),
    };
    match attached {
        Ok(a) => {
            if let Some(why) = &a.profile_refused {
                on_event(WatchEvent::Note(format!(
                    "the heap profile is not sampled: {why}"
                )));
            }
            let i = &a.injection;
            let safe_point = i.safe_point.to_string();
            let reading = AttachReading {
                safe_point,
                borrowed_ms: i.borrowed.as_secs_f64() * 1e3,
                total_ms: i.total.as_secs_f64() * 1e3,
                error: None,
            };
            on_event(WatchEvent::Note(format!(
                "attached to process {pid} without a debugger: its thread at {} loaded the agent in {:.1} ms",
                reading.safe_point, reading.borrowed_ms
            )));
            (Some(a), reading)
        }
        Err(e) => {
            let error = format!("the agent could not be loaded into process {pid}: {e}");
            on_event(WatchEvent::Note(error.clone()));
            (
                None,
                AttachReading {
                    error: Some(error),
                    ..Default::default()
                },
            )
        }
    }
}

pub(crate) fn trim_probe(
    dir: &Path,
    processes: &[ProcessFigures],
    options: &WatchOptions,
    outcome: &mut WatchOutcome,
    on_event: &mut dyn FnMut(WatchEvent),
) {
    let asked_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut waiting: Vec<u32> = Vec::new();
    for p in processes.iter().filter(|p| p.snapshot.is_some()) {
        match agent::request_trim(dir, p.pid) {
            Ok(()) => waiting.push(p.pid),
            Err(e) => outcome
                .warnings
                .push(format!("trim probe of process {}: {e}", p.pid)),
        }
    }
    if waiting.is_empty() {
        return;
    }
    on_event(WatchEvent::Note(format!(
        "trim probe: asked {} process(es) to give free memory back",
        waiting.len()
    )));
    // The agent acts at its next interval.
    let deadline = Instant::now() + (options.interval * 3).max(Duration::from_secs(3));
    while !waiting.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let Ok(snaps) = agent::read_snapshots(dir) else {
            continue;
        };
        waiting.retain(|pid| {
            let done = snaps.iter().find(|s| {
                s.pid == *pid && s.trim.as_ref().is_some_and(|t| t.at_unix_ns >= asked_ns)
            });
            match done.and_then(|s| s.trim.as_ref().map(|t| (s, t))) {
                Some((s, t)) => {
                    outcome.trim.push(TrimProbe {
                        pid: *pid,
                        call: trim_call(&s.allocator.name).into(),
                        rss_before: t.rss_before,
                        rss_after: t.rss_after,
                        free_resident_before: t.free_resident_before,
                        free_resident_after: t.free_resident_after,
                    });
                    false
                }
                None => true,
            }
        });
    }
    for pid in waiting {
        outcome.warnings.push(format!(
            "trim probe: process {pid} did not answer within {:.0} s",
            (options.interval * 3)
                .max(Duration::from_secs(3))
                .as_secs_f64()
        ));
    }
}

/// The call each allocator's trim is made with (shim/agent, docs/memory-metrics.md).
pub fn trim_call(allocator: &str) -> &'static str {
    match allocator {
        GLIBC => "malloc_trim(0)",
        JEMALLOC => "jemalloc's arena purge",
        TCMALLOC => "tcmalloc's ReleaseFreeMemory()",
        MIMALLOC => "mi_collect(true)",
        TBBMALLOC => "scalable_allocation_command(TBBMALLOC_CLEAN_ALL_BUFFERS)",
        _ => "the allocator's trim",
    }
}
