//! The agent loaded into a process that is already running (`watch --pid`), through the attach
//! crate: no LD_PRELOAD, no restart, no debugger. The attached agent writes the same snapshots as a
//! preloaded one, with the allocator's statistics as its figures (nothing interposes the heap
//! calls, so nothing is counted; [`crate::Snapshot::live_bytes`]).
use std::path::PathBuf;
use std::time::Duration;

use attach::{Argument, AttachError, EntryCall, Injection, SessionLock, Staged, Target};

/// The agent's entry (shim/agent/snapshot.c).
const ENTRY: &str = "alloclens_agent_attach";
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

/// Checks process `pid` from /proc, then loads the agent into it, writing a snapshot every
/// `interval`.
pub fn attach(pid: u32, interval: Duration) -> Result<AttachedAgent, AttachError> {
    attach_waiting(pid, interval, SAFE_POINT_WAIT)
}

/// [`attach`], waiting `safe_point_wait` for a thread at an allocator's entry before one blocked
/// in a system call is looked for.
pub fn attach_waiting(
    pid: u32,
    interval: Duration,
    safe_point_wait: Duration,
) -> Result<AttachedAgent, AttachError> {
    let target: Target = attach::check(pid)?;
    let lock = attach::session_lock(&target)?;
    let bytes = embedded::WATCH_AGENT.bytes;
    let library = attach::stage(&target, embedded::WATCH_AGENT.stem, bytes)?;
    let dir = attach::scratch_directory(&target, "watch")?;
    let theirs = dir.theirs.display().to_string();
    let injection = attach::inject(
        &target,
        &library.theirs,
        bytes,
        &EntryCall {
            function: ENTRY,
            arguments: vec![
                Argument::Str(&theirs),
                Argument::Int(interval.as_millis().max(1) as u64),
            ],
        },
        safe_point_wait,
    );
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
        scratch: dir,
        _lock: lock,
    })
}
