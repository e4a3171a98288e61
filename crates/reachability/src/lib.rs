//! Which heap blocks a stopped process can still reach, read from outside the process.
//!
//! The caller (the recorder, which stopped the process at its exit) gives the live blocks
//! (address and requested size) and the threads' registers; this crate finds the roots in
//! `/proc/PID/maps` (the writable data of every module, each thread's stack from its stack
//! pointer, the static TLS around each thread pointer, the registers themselves), reads the
//! memory with `process_vm_readv`, and classifies every block as memcheck does
//! (`mc_leakcheck.c`): still reachable (a chain of start pointers from a root), possibly lost
//! (reached only through an interior pointer somewhere in the chain), indirectly lost (reached
//! only from lost blocks) and definitely lost (no pointer at all). Each reachable block keeps the
//! root that first reached it. docs/leaks.md explains the choices.
mod classify;
mod heuristics;
mod memory;
mod roots;
mod threads;

pub use classify::{classify, Kind, Verdict};
pub use memory::{CachedMemory, Memory, ProcessMemory};
pub use roots::{find_roots, Root, RootRegion, Roots};
pub use threads::{read_thread, Thread};
