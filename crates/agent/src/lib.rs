//! The watch agent: `liballoclens_agent.so`, a light preload library (no trace) that counts the
//! program's heap calls per thread and, from its own thread, writes one snapshot file per process
//! every interval with those counters and the allocator's own statistics; and the Rust side that
//! embeds the library, composes the environment of the watched command, reads the snapshots and
//! normalises each allocator's figures into one table ([`AllocatorStats`], documented in
//! docs/memory-metrics.md).
//!
//! File protocol (all in the agent directory): `<pid>.snap` is replaced atomically (written as
//! `<pid>.snap.tmp`, then renamed) at each interval and once more at exit (`final`); a file
//! `<pid>.trim` asks that process to give free memory back (see [`request_trim`]). A process that
//! is already running gets the same agent through [`attach()`].

mod attach;
mod config;
mod error;
mod glibc;
mod library;
mod normalise;
mod snapshot;

pub use attach::{attach, attach_profiled, attach_waiting, AttachProfile, AttachedAgent};
pub use config::{AgentConfig, DEFAULT_PROFILE_BYTES, ENV_DIR, ENV_INTERVAL_MS, ENV_PROFILE_BYTES};
pub use error::AgentError;
pub use glibc::{glibc_stats, parse_malloc_info, ArenaStats, FreeSizes, GlibcHeap, Mallinfo2};
pub use library::{library_path, ENV_AGENT_OVERRIDE};
pub use normalise::{normalise, AllocatorStats};
pub use snapshot::{read_snapshot, read_snapshots, request_trim, Counters, Snapshot, TrimOutcome};
