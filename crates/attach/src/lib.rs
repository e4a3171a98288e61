//! Loads a library of alloclens into a process that is already running, without a debugger.
//!
//! alloclens attaches with ptrace (`PTRACE_SEIZE`), waits for a thread to reach a point where it
//! holds no allocator lock, makes that thread call `dlopen` on the library and then one entry
//! function of it, puts every register back and detaches. Only general registers are read and
//! written: no extended (vector) state is ever touched, which is what makes gdb's inferior calls
//! fail on CPUs with AMX ("Couldn't write extended state status"). Why the safe points are safe, and
//! what a thread inside the allocator at that moment sees: docs/attach.md.
//!
//! The crate knows nothing of what the library does: `agent::attach` gives it the watch agent and
//! the agent's entry; `record --pid` and `live --pid` are meant to share the same mechanism.
mod elf;
mod error;
#[cfg(target_arch = "x86_64")]
mod inject;
mod permission;
mod process;
mod stage;

pub use error::AttachError;
pub use process::{check, seen_from_here, Target};
pub use stage::{remove_scratch, scratch_directory, session_lock, stage, SessionLock, Staged};

use std::path::Path;
use std::time::Duration;

/// Where the chosen thread was when it was borrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SafePoint {
    /// At the first instruction of the allocator's `malloc` or `free` (a hardware breakpoint).
    AllocatorEntry { tid: u32, function: String },
    /// Blocked in a system call made through the C library (read, poll, nanosleep, ...).
    Syscall { tid: u32, number: i64 },
}

impl std::fmt::Display for SafePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SafePoint::AllocatorEntry { tid, function } => write!(f, "{function} in thread {tid}"),
            SafePoint::Syscall { tid, number } => write!(f, "system call {number} in thread {tid}"),
        }
    }
}

/// What one injection did.
#[derive(Debug, Clone)]
pub struct Injection {
    pub safe_point: SafePoint,
    /// How long the borrowed thread ran alloclens's calls instead of its own code.
    pub borrowed: Duration,
    /// From the seize to the detach of the last thread.
    pub total: Duration,
    /// What the entry function returned.
    pub entry_returned: i64,
}

/// A call into the library, once it is loaded: the function's name and up to six integer or
/// string arguments (the ones passed in registers; strings are copied onto the borrowed thread's
/// stack).
#[derive(Debug, Clone)]
pub struct EntryCall<'a> {
    pub function: &'a str,
    pub arguments: Vec<Argument<'a>>,
}

#[derive(Debug, Clone)]
pub enum Argument<'a> {
    Int(u64),
    Str(&'a str),
}

/// Loads `library` (a path as the target sees it; its bytes are `image`, for the entry's address)
/// into process `target.pid` and calls `entry` in it. `wait` bounds the wait for a safe point.
pub fn inject(
    target: &Target,
    library: &Path,
    image: &[u8],
    entry: &EntryCall,
    wait: Duration,
) -> Result<Injection, AttachError> {
    #[cfg(target_arch = "x86_64")]
    {
        inject::inject(target, library, image, entry, wait)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (target, library, image, entry, wait);
        Err(AttachError::Unsupported(std::env::consts::ARCH.into()))
    }
}
