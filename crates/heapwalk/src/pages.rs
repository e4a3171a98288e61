//! The pages a walk found chunks on, and the split of the resident ones.

use serde::{Deserialize, Serialize};

use crate::chain::ChunkCounts;

const IN_USE: u8 = 1;
const HEAD: u8 = 2;

/// Per page of one heap: whether an in-use chunk's bytes lie on it, whether a chunk header does.
#[derive(Debug, Clone)]
pub(crate) struct PageMarks {
    start: u64,
    page: u64,
    flags: Vec<u8>,
}

impl PageMarks {
    pub(crate) fn new(start: u64, end: u64, page: u64) -> PageMarks {
        let start = start / page * page;
        PageMarks {
            start,
            page,
            flags: vec![0; end.saturating_sub(start).div_ceil(page) as usize],
        }
    }

    fn mark(&mut self, from: u64, to: u64, flag: u8) {
        if to <= from {
            return;
        }
        let first = ((from - self.start) / self.page) as usize;
        let last = ((to - 1 - self.start) / self.page) as usize;
        let last = last.min(self.flags.len() - 1);
        for f in &mut self.flags[first..=last] {
            *f |= flag;
        }
    }

    /// An in-use chunk: its user bytes (after its `header`) hold their pages.
    pub(crate) fn in_use_chunk(&mut self, at: u64, size: u64, header: u64) {
        self.mark(at, at + header, HEAD);
        self.mark(at + header, at + size, IN_USE);
    }

    /// A free chunk: only its first `head` bytes (header and list links) must stay.
    pub(crate) fn free_chunk(&mut self, at: u64, size: u64, head: u64) {
        self.mark(at, at + head.min(size), HEAD);
    }

    fn flags_at(&self, addr: u64) -> u8 {
        self.flags[((addr - self.start) / self.page) as usize]
    }

    fn end(&self) -> u64 {
        self.start + self.flags.len() as u64 * self.page
    }
}

/// The resident pages of a process's heap mappings, split by what glibc's arenas hold on them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageSplit {
    /// Resident bytes of the arenas' heaps (the brk heap and the other arenas' heaps).
    pub arena_resident: u64,
    /// Of those, the bytes of pages no in-use chunk lies on: resident for free memory only.
    pub free_only: u64,
    /// Of those, the pages no free chunk's header lies on either: what `MADV_DONTNEED` of them
    /// (as `malloc_trim` does) would return.
    pub reclaimable: u64,
    /// Resident bytes of the heap mappings outside the arenas: chunks glibc mmapped on their own
    /// (live, whole) and memory mapped outside malloc.
    pub outside: u64,
    /// Arenas and heaps walked.
    pub arenas: u32,
    pub heaps: u32,
    pub chunks: ChunkCounts,
}

impl PageSplit {
    /// The share of the arenas' resident pages that hold no in-use chunk, in %.
    pub fn free_only_percent(&self) -> Option<f64> {
        (self.arena_resident > 0)
            .then(|| 100.0 * self.free_only as f64 / self.arena_resident as f64)
    }
}

/// Splits the resident pages of `residency` by `marks` (one per heap, in address order).
pub(crate) fn split(marks: &[PageMarks], residency: &procmem::HeapResidency) -> PageSplit {
    let mut s = PageSplit::default();
    let page = residency.page_size.max(1);
    for (from, to) in residency
        .mappings
        .iter()
        .flat_map(|m| m.runs.iter().copied())
    {
        let mut at = from;
        while at < to {
            match marks.iter().find(|m| m.start <= at && at < m.end()) {
                Some(m) => {
                    s.arena_resident += page;
                    let flags = m.flags_at(at);
                    if flags & IN_USE == 0 {
                        s.free_only += page;
                        if flags & HEAD == 0 {
                            s.reclaimable += page;
                        }
                    }
                }
                None => s.outside += page,
            }
            at += page;
        }
    }
    s
}
