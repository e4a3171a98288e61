//! glibc malloc's heap of a running process, walked from outside: which of its resident pages
//! hold no in-use chunk (fragmentation and retention, page for page), without block addresses
//! from a trace and without stopping the process.
//!
//! **What is walked.** The main arena's chunks lie end to end in the `[heap]` (brk) mapping, from
//! its start to the top chunk, which ends at the break. Every other arena is a chain of heaps
//! aligned to 64 MiB, each beginning with a `heap_info` (the first of an arena followed by the
//! arena's `malloc_state`), its chunks end to end up to `heap_info.size`, ending at the arena's
//! top chunk or, in a heap the arena has outgrown, at a fencepost. A chunk's size is in its
//! header; whether it is in use, in the next chunk's `PREV_INUSE` bit. Chunks glibc mmapped on
//! their own, and anything else in anonymous mappings, are outside the arenas: the split leaves
//! them out ([`PageSplit::outside`]).
//!
//! **What it cannot tell.** Chunks in the tcache and the fastbins are free to malloc but flagged
//! in use: they count as live (they are small, and at most 7 per size per thread in the tcache).
//!
//! **A moving heap.** The process runs while it is read: the walk validates every header (each
//! size aligned, at least the minimum, inside its heap; a free chunk's size repeated in the next
//! chunk's `prev_size`; the main arena's flags; the chain ending exactly at the heap's end and
//! at the arena's top chunk) and a walk that fails is retried once, then reported as
//! [`WalkError::Inconsistent`]: never a figure from a half-changed heap.
//!
//! **Cost.** Headers are read in 256 KiB windows with `process_vm_readv` (a window starts at the
//! next header, so the inside of a large free chunk is skipped): a heap of small chunks is read
//! once, whole. Same access as /proc/PID/mem (ptrace read). x86-64 and other 64-bit Linux targets
//! of glibc 2.27 and later (the `malloc_state` layout); another layout fails the validation.

mod arenas;
mod chain;
mod pages;

pub use arenas::{anonymous_mappings, walk_heap, GlibcHeap, Mapping, Region, RegionKind};
pub use pages::PageSplit;
pub use reachability::{Memory, ProcessMemory};

/// Why the heap was not read at this sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    /// The chunks did not chain up (the program changed the heap under the walk twice, or this is
    /// not glibc's layout); the reason names the first bad header.
    Inconsistent(String),
    /// /proc/PID/maps could not be read (the process exited).
    Gone(String),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Inconsistent(why) => write!(f, "the heap changed under the walk: {why}"),
            WalkError::Gone(why) => write!(f, "the process is gone: {why}"),
        }
    }
}

impl std::error::Error for WalkError {}

/// Walks process `pid`'s glibc heap (retrying once when it moved under the walk) and splits its
/// resident pages, read from pagemap right after.
pub fn read_process(
    pid: u32,
    residency: &mut procmem::ResidencyReader,
) -> Result<PageSplit, WalkError> {
    let mut memory = ProcessMemory::new(pid);
    let mut last = None;
    for _ in 0..2 {
        let maps = anonymous_mappings(pid).map_err(WalkError::Gone)?;
        match walk_heap(&mut memory, &maps) {
            Ok(heap) => {
                let resident = residency
                    .read(pid)
                    .map_err(|e| WalkError::Gone(e.to_string()))?;
                return Ok(heap.split(&resident));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("two walks failed"))
}
