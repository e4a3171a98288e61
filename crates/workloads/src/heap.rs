//! Direct calls to the C allocator, with the bookkeeping every workload needs: a checksum of the call
//! sequence (same seed => same checksum), the number of calls, and the live bytes for error messages.
//!
//! The workloads call libc's malloc family, not Rust collections, so that the pattern an allocator sees
//! is exactly the one docs/workloads.md describes (and the one an LD_PRELOADed allocator replaces).

use std::ptr::NonNull;

use crate::rng::mix;
use crate::WorkloadError;

/// One live allocation. Deliberately not `Clone` and without `Drop`: it is freed through `Heap::free`,
/// exactly once, so the allocator sees the calls we document and nothing else.
#[derive(Debug)]
pub struct Block {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a malloc'ed block is not tied to the thread that allocated it; handing it to another thread
// to free is the cross-thread pattern `xthread` exists to produce. Ownership moves with the value.
unsafe impl Send for Block {}

impl Block {
    pub fn size(&self) -> usize {
        self.size
    }

    /// Writes `byte` over the whole block so its pages are really resident.
    pub fn fill(&mut self, byte: u8) {
        self.fill_range(0, self.size, byte);
    }

    /// Writes `byte` over `from..to` (clamped to the block).
    pub fn fill_range(&mut self, from: usize, to: usize, byte: u8) {
        let to = to.min(self.size);
        if from < to {
            // SAFETY: from..to lies inside the block we own.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(from), byte, to - from) };
        }
    }

    /// Writes 8-byte words that depend only on `seed` and their offset in the block: two blocks of
    /// the same size filled with the same seed are byte for byte identical, and no two pages of one
    /// block are (what KSM can merge across processes but not within one).
    pub fn fill_pattern(&mut self, seed: u64) {
        for (i, offset) in (0..self.size / 8).map(|i| (i, i * 8)) {
            let word = crate::rng::mix(seed ^ i as u64);
            // SAFETY: offset + 8 <= size; unaligned because the block's alignment is the allocator's.
            unsafe { std::ptr::write_unaligned(self.ptr.as_ptr().add(offset).cast::<u64>(), word) };
        }
    }

    /// Writes `value` at every `stride` bytes (one word per page with a page-sized stride): dirties
    /// each page cheaply.
    pub fn stamp(&mut self, stride: usize, value: u64) {
        let stride = stride.max(8);
        let mut offset = 0;
        while offset + 8 <= self.size {
            // SAFETY: offset + 8 <= size; volatile so the writes happen every time.
            unsafe {
                std::ptr::write_volatile(
                    self.ptr.as_ptr().add(offset).cast::<[u8; 8]>(),
                    value.to_le_bytes(),
                )
            };
            offset += stride;
        }
    }

    /// Reads one byte every `stride` bytes and folds them: reading shared data without writing it keeps
    /// copy-on-write pages shared.
    pub fn read_sum(&self, stride: usize) -> u64 {
        let stride = stride.max(1);
        let mut sum = 0u64;
        let mut i = 0;
        while i < self.size {
            // SAFETY: i < size; volatile so the reads are not optimised away.
            sum = sum.wrapping_add(u64::from(unsafe {
                std::ptr::read_volatile(self.ptr.as_ptr().add(i))
            }));
            i += stride;
        }
        sum
    }
}

/// Counts and checksums the calls one thread (or process) makes.
#[derive(Debug, Default)]
pub struct Heap {
    calls: u64,
    checksum: u64,
    live: u64,
}

const TAG_MALLOC: u64 = 1;
const TAG_CALLOC: u64 = 2;
const TAG_REALLOC: u64 = 3;
const TAG_FREE: u64 = 4;

impl Heap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocator calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Bytes requested by the live blocks this Heap made (what the workload itself counts).
    pub fn live_bytes(&self) -> u64 {
        self.live
    }

    /// Order-dependent digest of (call, size) so far.
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    fn record(&mut self, tag: u64, size: usize) {
        self.calls += 1;
        self.checksum = mix(self.checksum ^ mix(tag << 56 ^ size as u64));
    }

    fn out_of_memory(&self, call: &'static str, size: usize) -> WorkloadError {
        WorkloadError::OutOfMemory {
            call,
            size,
            live_bytes: self.live,
        }
    }

    pub fn malloc(&mut self, size: usize) -> Result<Block, WorkloadError> {
        self.record(TAG_MALLOC, size);
        // SAFETY: plain malloc; NULL is handled.
        let ptr = unsafe { libc::malloc(size.max(1)) }.cast::<u8>();
        let ptr = NonNull::new(ptr).ok_or_else(|| self.out_of_memory("malloc", size))?;
        self.live += size as u64;
        Ok(Block { ptr, size })
    }

    /// calloc(1, size): the allocator zeroes (or knows the pages are fresh); the caller decides whether
    /// to touch.
    pub fn calloc(&mut self, size: usize) -> Result<Block, WorkloadError> {
        self.record(TAG_CALLOC, size);
        // SAFETY: plain calloc; NULL is handled.
        let ptr = unsafe { libc::calloc(1, size.max(1)) }.cast::<u8>();
        let ptr = NonNull::new(ptr).ok_or_else(|| self.out_of_memory("calloc", size))?;
        self.live += size as u64;
        Ok(Block { ptr, size })
    }

    /// Grows or shrinks `block` to `new_size`. On failure the old block is freed (the run is over
    /// anyway) and the error says how big the request was.
    pub fn realloc(&mut self, block: Block, new_size: usize) -> Result<Block, WorkloadError> {
        self.record(TAG_REALLOC, new_size);
        // SAFETY: block.ptr came from this allocator and is live; ownership is consumed here.
        let ptr = unsafe { libc::realloc(block.ptr.as_ptr().cast(), new_size.max(1)) }.cast::<u8>();
        match NonNull::new(ptr) {
            Some(ptr) => {
                self.live = self.live - block.size as u64 + new_size as u64;
                Ok(Block {
                    ptr,
                    size: new_size,
                })
            }
            None => {
                let err = self.out_of_memory("realloc", new_size);
                self.free(block);
                Err(err)
            }
        }
    }

    pub fn free(&mut self, block: Block) {
        self.record(TAG_FREE, block.size);
        self.live = self.live.saturating_sub(block.size as u64);
        // SAFETY: block.ptr came from malloc/calloc/realloc and is freed exactly once (Block is moved).
        unsafe { libc::free(block.ptr.as_ptr().cast()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_follows_the_call_sequence() {
        let run = |sizes: &[usize]| {
            let mut h = Heap::new();
            for &s in sizes {
                let mut b = h.malloc(s).unwrap();
                b.fill(1);
                let b = h.realloc(b, s * 2).unwrap();
                h.free(b);
            }
            (h.calls(), h.checksum())
        };
        assert_eq!(run(&[10, 20, 30]), run(&[10, 20, 30]));
        assert_ne!(run(&[10, 20, 30]).1, run(&[10, 30, 20]).1);
        assert_eq!(run(&[10, 20, 30]).0, 9);
    }

    #[test]
    fn realloc_keeps_the_contents_and_read_sum_sees_them() {
        let mut h = Heap::new();
        let mut b = h.calloc(100).unwrap();
        assert_eq!(b.read_sum(1), 0);
        b.fill(2);
        let mut b = h.realloc(b, 1000).unwrap();
        b.fill_range(100, 1000, 0);
        assert_eq!(b.read_sum(1), 200);
        h.free(b);
    }

    #[test]
    fn an_impossible_request_is_an_error_not_a_crash() {
        let mut h = Heap::new();
        let err = h.malloc(usize::MAX / 2).unwrap_err();
        assert!(err.to_string().contains("malloc"), "{err}");
    }
}
