//! Which agent snapshots enter a sample, and why a process has none: the agent's side of the
//! watch loop (engine.rs).
use std::path::PathBuf;
use std::time::Duration;

use crate::engine::Target;

/// The agent library of a command's LD_PRELOAD (its first word), to tell why a process has no
/// snapshot.
pub(crate) fn preloaded_agent(target: &Target) -> Option<String> {
    match target {
        Target::Command {
            env,
            agent_dir: Some(_),
            ..
        } => env
            .iter()
            .find(|(k, _)| k == "LD_PRELOAD")
            .and_then(|(_, v)| v.to_str()?.split([' ', ':']).next().map(str::to_string)),
        _ => None,
    }
}

/// /proc/PID/exe, as the agent writes it in a snapshot (a newline is a '?' there).
pub(crate) fn exe_of(pid: u32) -> Option<String> {
    std::fs::read_link(procmem::process_dir(pid).join("exe"))
        .ok()
        .map(|p| p.to_string_lossy().replace('\n', "?"))
}

/// A snapshot describes the image now running under its pid: an exec keeps the pid, and the file
/// of the image before it stays until the new image's agent (if any) replaces it.
pub(crate) fn same_image(s: &agent::Snapshot, exe: Option<&str>) -> bool {
    exe.is_none_or(|e| e == s.exe)
}

/// Which snapshots may enter a sample, and what to say about those that may not.
pub(crate) struct AgentTracker {
    pub(crate) dir: Option<PathBuf>,
    pub(crate) library: Option<String>,
    /// Some process had a snapshot in a sample, or a final one at the end.
    pub(crate) seen: bool,
    /// Per pid: the image (exe) diagnosed, and why it has no agent (None: it should have one).
    /// Bounded: entries without a reason leave with their process, and at most
    /// [`MAX_REASONS`] reasons are kept.
    pub(crate) diagnosed: std::collections::BTreeMap<u32, (Option<String>, Option<String>)>,
    /// Per pid: (comm, when its snapshots stopped being renewed, s since the start).
    pub(crate) stopped: std::collections::BTreeMap<u32, (String, f64)>,
}

/// A snapshot older than this many agent intervals (and at least [`STALE_MIN`]) is not renewed:
/// the agent cannot write (a full disk) or its process is stopped. Its figures are left out.
const STALE_INTERVALS: u64 = 5;
const STALE_MIN: Duration = Duration::from_secs(1);
/// Processes named in the warnings about missing or stopped snapshots, at most.
const MAX_REASONS: usize = 16;

impl AgentTracker {
    pub(crate) fn new(dir: Option<PathBuf>, library: Option<String>) -> AgentTracker {
        AgentTracker {
            dir,
            library,
            seen: false,
            diagnosed: Default::default(),
            stopped: Default::default(),
        }
    }

    pub(crate) fn fresh(s: &agent::Snapshot, now_ns: u64) -> bool {
        let limit =
            Duration::from_millis(s.interval_ms.saturating_mul(STALE_INTERVALS)).max(STALE_MIN);
        now_ns.saturating_sub(s.taken_unix_ns) <= limit.as_nanos() as u64
    }

    /// The snapshot of process `pid` (image `exe`) for a sample taken now, if one describes it.
    pub(crate) fn pick(
        &mut self,
        snaps: &[agent::Snapshot],
        pid: u32,
        comm: &str,
        exe: Option<&str>,
        now_ns: u64,
        t_s: f64,
    ) -> Option<agent::Snapshot> {
        let s = snaps
            .iter()
            .find(|s| s.pid == pid && !s.is_final && same_image(s, exe));
        match s {
            Some(s) if Self::fresh(s, now_ns) => {
                self.seen = true;
                // Renewed again (a late agent thread on a loaded machine): only the gap's figures
                // were left out.
                self.stopped.remove(&pid);
                Some(s.clone())
            }
            Some(s) => {
                let last = t_s - now_ns.saturating_sub(s.taken_unix_ns) as f64 / 1e9;
                if self.stopped.len() < MAX_REASONS {
                    self.stopped
                        .entry(pid)
                        .or_insert_with(|| (comm.to_string(), last.max(0.0)));
                }
                None
            }
            None => {
                self.diagnose(pid, exe);
                None
            }
        }
    }

    /// Why process `pid` runs without the agent, found once per image from what does not change
    /// while it runs (how it is linked, its environment, its credentials).
    pub(crate) fn diagnose(&mut self, pid: u32, exe: Option<&str>) {
        // No exe: the process is exiting (its mappings are gone) or may not be read.
        if self.dir.is_none() || exe.is_none() {
            return;
        }
        if self
            .diagnosed
            .get(&pid)
            .is_some_and(|(e, _)| e.as_deref() == exe)
        {
            return;
        }
        let why = no_agent_reason(pid, self.library.as_deref());
        let reasons = self.diagnosed.values().filter(|(_, w)| w.is_some()).count();
        if why.is_none() || reasons < MAX_REASONS {
            self.diagnosed.insert(pid, (exe.map(str::to_string), why));
        }
    }

    /// Forgets the processes that are gone and had nothing to report (a program forking short
    /// workers for weeks must not grow this).
    pub(crate) fn prune(&mut self, alive: &[u32]) {
        self.diagnosed
            .retain(|pid, (_, why)| why.is_some() || alive.contains(pid));
    }

    pub(crate) fn stopped_warnings(&self) -> Vec<String> {
        self.stopped
            .iter()
            .map(|(pid, (comm, t))| {
                format!(
                    "the agent's snapshots of process {pid} ({comm}) were no longer renewed after {t:.1} s (a full disk, or the process stopped): its live bytes and allocator figures after that are not measured, not carried forward"
                )
            })
            .collect()
    }

    pub(crate) fn missing_reasons(&self) -> Vec<String> {
        self.diagnosed
            .iter()
            .filter_map(|(pid, (exe, why))| {
                let name = exe
                    .as_deref()
                    .and_then(|e| e.rsplit('/').next())
                    .unwrap_or("?");
                why.as_ref().map(|w| format!("process {pid} ({name}) {w}"))
            })
            .collect()
    }
}

/// Why the agent did not load into process `pid`, when it can be told from outside.
fn no_agent_reason(pid: u32, library: Option<&str>) -> Option<String> {
    let dir = procmem::process_dir(pid);
    let maps = std::fs::read_to_string(dir.join("maps")).ok()?;
    if maps.is_empty() {
        return None;
    }
    let mapped = |name: &str| maps.lines().any(|l| l.contains(name));
    if let Some(lib) = library {
        if mapped(lib) {
            return None;
        }
    }
    if !mapped("/ld-linux") && !mapped("/ld-musl") && !mapped("/ld.so") {
        return Some(
            "is statically linked (no dynamic loader preloads the agent: a static C or Go program)"
                .into(),
        );
    }
    let environ = std::fs::read(dir.join("environ")).ok()?;
    let preload = environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"LD_PRELOAD="))
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let has_agent = match (preload, library) {
        (Some(p), Some(lib)) => p.contains(lib),
        (Some(_), None) => true,
        (None, _) => false,
    };
    if !has_agent {
        return Some("runs without the agent in LD_PRELOAD (the program or its parent cleared or replaced it)".into());
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ids = |key: &str| -> Option<Vec<String>> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().map(str::to_string).collect())
    };
    let differs = |v: Option<Vec<String>>| v.is_some_and(|v| v.len() >= 2 && v[0] != v[1]);
    if differs(ids("Uid:")) || differs(ids("Gid:")) {
        return Some("is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD".into());
    }
    None
}
