//! One heap's chunks, end to end: each header validated, each chunk marked on the pages it lies
//! on.

use crate::pages::PageMarks;
use reachability::Memory;

/// Bytes read at once: a window starts at the header it is needed for.
const WINDOW: u64 = 256 << 10;
/// A chunk header: `prev_size` and `size`, 8 bytes each.
const HEADER: u64 = 16;
/// The smallest chunk glibc makes (and the alignment of every chunk).
const MIN_CHUNK: u64 = 32;
const ALIGN: u64 = 16;
/// The part of a free chunk glibc writes (header, list links): malloc_trim leaves its page.
const FREE_CHUNK_HEAD: u64 = 48;
const PREV_INUSE: u64 = 1;
const IS_MMAPPED: u64 = 2;
const NON_MAIN_ARENA: u64 = 4;

/// Chunks counted by a walk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkCounts {
    /// In use to malloc's flags (tcache and fastbin chunks included).
    pub in_use: u64,
    pub in_use_bytes: u64,
    /// Free (in a bin), top chunks included.
    pub free: u64,
    pub free_bytes: u64,
}

/// How a heap's chain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainEnd {
    /// At the arena's top chunk, which starts here.
    Top(u64),
    /// At a fencepost: the arena went on in another heap.
    Fencepost,
}

/// What is walked: `[first, end)`, and the rules of its arena.
pub(crate) struct Chain {
    pub first: u64,
    pub end: u64,
    pub main_arena: bool,
}

/// Reads headers through windows of [`WINDOW`] bytes.
struct Window<'m, M: Memory> {
    memory: &'m mut M,
    base: u64,
    data: Vec<u8>,
}

impl<M: Memory> Window<'_, M> {
    /// `prev_size` and `size` of the chunk at `at`, below `end`.
    fn header(&mut self, at: u64, end: u64) -> Result<(u64, u64), String> {
        if at + HEADER > end {
            return Err(format!(
                "a header at {at:#x} would cross the heap's end {end:#x}"
            ));
        }
        if at < self.base || at + HEADER > self.base + self.data.len() as u64 {
            self.data.resize(WINDOW.min(end - at) as usize, 0);
            let read = self.memory.read(at, &mut self.data);
            self.data.truncate(read);
            self.base = at;
            if (read as u64) < HEADER {
                return Err(format!("{at:#x} is not readable"));
            }
        }
        let i = (at - self.base) as usize;
        let word = |i: usize| u64::from_le_bytes(self.data[i..i + 8].try_into().expect("8 bytes"));
        Ok((word(i), word(i + 8)))
    }
}

impl Chain {
    /// Walks the chunks from `first`, marking each on `marks` and counting it in `counts`.
    pub(crate) fn walk<M: Memory>(
        &self,
        memory: &mut M,
        marks: &mut PageMarks,
        counts: &mut ChunkCounts,
    ) -> Result<ChainEnd, String> {
        let mut window = Window {
            memory,
            base: 0,
            data: Vec::new(),
        };
        let end = self.end;
        let mut pos = self.first;
        // The chunk before `pos`: its address, size and flags; whether it is in use is told by
        // `pos`'s PREV_INUSE.
        let mut prev: Option<(u64, u64, u64)> = None;
        loop {
            let (prev_size, raw) = window.header(pos, end)?;
            let size = raw & !7;
            if let Some((at, psize, praw)) = prev {
                self.settle(at, psize, praw, raw, prev_size, marks, counts)?;
            } else if raw & PREV_INUSE == 0 {
                return Err(format!(
                    "the first chunk at {pos:#x} says a chunk lies before it"
                ));
            }
            if size == HEADER && !self.main_arena {
                // A fencepost: a 16-byte chunk, then a header of size 0, at the heap's end.
                let (_, next) = window.header(pos + HEADER, end)?;
                if next & !7 != 0 || end - pos > 64 {
                    return Err(format!("a 16-byte chunk at {pos:#x} is not a fencepost"));
                }
                return Ok(ChainEnd::Fencepost);
            }
            if size < MIN_CHUNK || size % ALIGN != 0 || pos + size > end {
                return Err(format!(
                    "bad chunk size {size:#x} at {pos:#x} (heap ends at {end:#x})"
                ));
            }
            if raw & IS_MMAPPED != 0 || (self.main_arena && raw & NON_MAIN_ARENA != 0) {
                return Err(format!(
                    "wrong flags {:#x} for the chunk at {pos:#x}",
                    raw & 7
                ));
            }
            // The top chunk ends the heap (in the brk heap, at the break: glibc moves it by whole
            // pages, so the mapping ends there too).
            if pos + size == end {
                marks.free_chunk(pos, size, FREE_CHUNK_HEAD);
                counts.free += 1;
                counts.free_bytes += size;
                return Ok(ChainEnd::Top(pos));
            }
            prev = Some((pos, size, raw));
            pos += size;
        }
    }

    /// Marks and counts the chunk at `at`, now that the next header (`next_raw`, `next_prev_size`)
    /// says whether it is in use.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        at: u64,
        size: u64,
        raw: u64,
        next_raw: u64,
        next_prev_size: u64,
        marks: &mut PageMarks,
        counts: &mut ChunkCounts,
    ) -> Result<(), String> {
        if next_raw & PREV_INUSE != 0 {
            // Other arenas flag their chunks (free() finds the arena by it).
            if !self.main_arena && raw & NON_MAIN_ARENA == 0 {
                return Err(format!("the in-use chunk at {at:#x} lacks NON_MAIN_ARENA"));
            }
            marks.in_use_chunk(at, size, HEADER);
            counts.in_use += 1;
            counts.in_use_bytes += size;
        } else {
            // A free chunk's size is repeated at its end (the next chunk's prev_size).
            if next_prev_size != size {
                return Err(format!(
                    "the free chunk at {at:#x} has size {size:#x}, its foot says {next_prev_size:#x}"
                ));
            }
            marks.free_chunk(at, size, FREE_CHUNK_HEAD);
            counts.free += 1;
            counts.free_bytes += size;
        }
        Ok(())
    }
}
