//! The agent loaded into a process that is already running (`watch --pid`), through the attach
//! crate: no LD_PRELOAD, no restart, no debugger. The attached agent writes the same snapshots as a
//! preloaded one, with the allocator's statistics as its figures (nothing interposes the heap
//! calls, so nothing is counted; [`crate::Snapshot::live_bytes`]). With a heap profile
//! ([`AttachProfile`]) the agent also patches the process's GOT so that its hooks sample the heap
//! calls into a profile table, until the attach ends (shim/agent/got_hooks.c).
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use attach::{Argument, AttachError, EntryCall, Injection, SessionLock, Staged, Target};

/// The agent's entries (shim/agent/snapshot.c).
const ENTRY: &str = "alloclens_agent_attach";
const ENTRY_PROFILE: &str = "alloclens_agent_attach_profile";
/// How long alloclens waits for a thread at a safe point before it looks for one blocked in a
/// system call.
const SAFE_POINT_WAIT: Duration = Duration::from_millis(1500);

/// An agent running in an attached process. [`AttachedAgent::detach`] (or drop) removes its
/// directory, and the agent's thread ends at its next interval; the library stays mapped (an
/// unload is what has crashed other tools' targets), and a later attach reuses it.
#[derive(Debug)]
pub struct AttachedAgent {
    /// The snapshot directory as alloclens reads it.
    pub dir: PathBuf,
    pub injection: Injection,
    /// Why the heap profile asked for was not started (the process cannot reach its table
    /// directory); None when it was, or none was asked for.
    pub profile_refused: Option<String>,
    /// The directory, held so that it is removed even once the process has exited.
    scratch: Staged,
    _lock: SessionLock,
}

impl AttachedAgent {
    pub fn detach(self) {}
}

impl Drop for AttachedAgent {
    fn drop(&mut self) {
        self.scratch.remove();
    }
}

/// The heap profile an attach starts (`watch --pid --profile`): the sampler of a preloaded agent
/// (`ALLOCLENS_PROFILE_BYTES`), for the allocations made after the attach.
#[derive(Debug, Clone)]
pub struct AttachProfile {
    /// Mean requested bytes between two samples.
    pub sample_bytes: u64,
    /// Where the agent makes its table (`PID-N.prof`): a directory of ours that outlives the
    /// attach, so that the table is read after it ended. The process must reach it at the same
    /// path (the same root directory) and may write in it: it is given to the process's user when
    /// that is another one.
    pub table_dir: PathBuf,
}

/// Checks process `pid` from /proc, then loads the agent into it, writing a snapshot every
/// `interval`.
pub fn attach(pid: u32, interval: Duration) -> Result<AttachedAgent, AttachError> {
    attach_waiting(pid, interval, SAFE_POINT_WAIT, None)
}

/// [`attach`] with a heap profile.
pub fn attach_profiled(
    pid: u32,
    interval: Duration,
    profile: &AttachProfile,
) -> Result<AttachedAgent, AttachError> {
    attach_waiting(pid, interval, SAFE_POINT_WAIT, Some(profile))
}

/// The table directory as the process reaches it (absolute: the process has its own working
/// directory), or why it cannot write its table there.
fn table_dir_for(target: &Target, dir: &Path) -> Result<PathBuf, String> {
    let dir =
        std::fs::canonicalize(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let ours =
        std::fs::metadata(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let theirs = std::fs::metadata(attach::seen_from_here(target, &dir));
    if !theirs.is_ok_and(|t| t.dev() == ours.dev() && t.ino() == ours.ino()) {
        return Err(format!(
            "process {} does not see {} (a container, or a /tmp of its own?): its table cannot be written there",
            target.pid,
            dir.display()
        ));
    }
    // SAFETY: geteuid has no preconditions.
    let us = unsafe { libc::geteuid() };
    if target.uid != us && ours.uid() == us {
        std::os::unix::fs::chown(&dir, Some(target.uid), Some(target.gid)).map_err(|e| {
            format!(
                "cannot give {} to the process's user {}: {e}",
                dir.display(),
                target.uid
            )
        })?;
    }
    Ok(dir)
}

/// [`attach`], waiting `safe_point_wait` for a thread at an allocator's entry before one blocked
/// in a system call is looked for; with a heap profile when `profile` is given.
pub fn attach_waiting(
    pid: u32,
    interval: Duration,
    safe_point_wait: Duration,
    profile: Option<&AttachProfile>,
) -> Result<AttachedAgent, AttachError> {
    let target: Target = attach::check(pid)?;
    let lock = attach::session_lock(&target)?;
    let bytes = embedded::WATCH_AGENT.bytes;
    let library = attach::stage(&target, embedded::WATCH_AGENT.stem, bytes)?;
    let dir = attach::scratch_directory(&target, "watch")?;
    let theirs = dir.theirs.display().to_string();
    let interval_ms = interval.as_millis().max(1) as u64;
    let table_dir = profile.map(|p| table_dir_for(&target, &p.table_dir));
    let profile_refused = table_dir.as_ref().and_then(|t| t.as_ref().err().cloned());
    let table_dir = table_dir
        .and_then(Result::ok)
        .map(|t| t.display().to_string());
    let call = match (profile, &table_dir) {
        (Some(p), Some(table_dir)) => EntryCall {
            function: ENTRY_PROFILE,
            arguments: vec![
                Argument::Str(&theirs),
                Argument::Int(interval_ms),
                Argument::Int(p.sample_bytes),
                Argument::Str(table_dir),
            ],
        },
        _ => EntryCall {
            function: ENTRY,
            arguments: vec![Argument::Str(&theirs), Argument::Int(interval_ms)],
        },
    };
    let injection = attach::inject(&target, &library.theirs, bytes, &call, safe_point_wait);
    let injection = match injection {
        Ok(i) if i.entry_returned == 0 => i,
        Ok(_) => {
            dir.remove();
            return Err(AttachError::LoadFailed {
                pid,
                library: library.theirs.display().to_string(),
                detail: "the agent is already preloaded in it (started under alloclens watch): that watch has its figures".into(),
            });
        }
        Err(e) => {
            dir.remove();
            return Err(e);
        }
    };
    Ok(AttachedAgent {
        dir: dir.ours.clone(),
        injection,
        profile_refused,
        scratch: dir,
        _lock: lock,
    })
}
