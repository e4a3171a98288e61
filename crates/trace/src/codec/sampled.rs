//! The stack ids of a chunk with sampled stacks (`FLAG_SAMPLED_STACKS`; docs/trace-format.md,
//! "Sampled stacks in events chunks"). At the default rate one allocation in 30 to 250 carries a
//! stack, so a varint per allocation (0 for most) stored mostly zeros: 26 % of a cc1 trace, 67 %
//! of a sqlite3 one. Instead `sample_gaps` says where the samples are (the unsampled allocations
//! before each) and `stack_ids` which stack each has, coded against what the chunk showed
//! before: the stack last sampled on the same thread for the same size (most repeat it), a stack
//! new to the trace (ids are given in order of first use, so it is the largest so far plus a
//! little), or the id itself. crates/trace/examples/stack_column.rs measured the alternatives.
use std::collections::HashMap;

use super::decode::{bad, ends_early, DecodeError};
use crate::varint::{self, Cursor};

/// `stack_ids` code: the stack last sampled in the chunk on this thread for this size.
const PREDICTED: u64 = 0;
/// `stack_ids` code: a larger id than any before in the chunk; `id - largest - 1` follows.
const LARGER: u64 = 1;
/// `stack_ids` codes from here on: `id + EXPLICIT - 1` (ids start at 1).
const EXPLICIT: u64 = 2;

/// What encoder and decoder know of the chunk's sampled stacks so far.
#[derive(Default)]
pub(super) struct StackPredictor {
    /// (thread, size) -> the stack last sampled with them.
    last: HashMap<(u32, u64), u32>,
    /// The largest id so far.
    largest: u32,
}

impl StackPredictor {
    pub(super) fn clear(&mut self) {
        self.last.clear();
        self.largest = 0;
    }

    fn learn(&mut self, tid: u32, size: u64, id: u32) {
        self.last.insert((tid, size), id);
        self.largest = self.largest.max(id);
    }
}

/// Lays a chunk's allocations' stack ids into `sample_gaps` and `stack_ids`.
#[derive(Default)]
pub(super) struct SampledStackEncoder {
    predictor: StackPredictor,
    /// Allocations without a stack since the last sampled one.
    unsampled: u64,
}

impl SampledStackEncoder {
    /// The next allocation (or realloc) of the chunk, with its stack id (0: not sampled).
    #[inline(always)]
    pub(super) fn push(
        &mut self,
        gaps: &mut Vec<u8>,
        ids: &mut Vec<u8>,
        tid: u32,
        size: u64,
        stack: u32,
    ) {
        if stack == 0 {
            self.unsampled += 1;
        } else {
            self.sampled(gaps, ids, tid, size, stack);
        }
    }

    fn sampled(&mut self, gaps: &mut Vec<u8>, ids: &mut Vec<u8>, tid: u32, size: u64, id: u32) {
        varint::put(gaps, self.unsampled);
        self.unsampled = 0;
        let p = &self.predictor;
        if p.last.get(&(tid, size)) == Some(&id) {
            varint::put(ids, PREDICTED);
        } else if id > p.largest {
            varint::put(ids, LARGER);
            varint::put(ids, u64::from(id - p.largest - 1));
        } else {
            varint::put(ids, u64::from(id) + EXPLICIT - 1);
        }
        self.predictor.learn(tid, size, id);
    }

    /// For the next chunk.
    pub(super) fn clear(&mut self) {
        self.predictor.clear();
        self.unsampled = 0;
    }
}

/// Reads `sample_gaps` and `stack_ids` back: the stack id of each allocation in turn.
pub(super) struct SampledStackCursor<'a> {
    gaps: Cursor<'a>,
    ids: Cursor<'a>,
    /// Allocations before the next sampled one (`u64::MAX`: no more samples in the chunk).
    left: u64,
}

impl<'a> SampledStackCursor<'a> {
    pub(super) fn new(gaps: Cursor<'a>, ids: Cursor<'a>) -> Self {
        let mut c = SampledStackCursor { gaps, ids, left: 0 };
        c.next_gap();
        c
    }

    fn next_gap(&mut self) {
        self.left = if self.gaps.remaining() == 0 {
            u64::MAX
        } else {
            // A cut-short varint leaves the gaps unreadable: no more samples, and `finish` says so.
            self.gaps.varint().unwrap_or(u64::MAX - 1)
        };
    }

    /// The stack id of the next allocation (or realloc) of the chunk: 0 when not sampled.
    #[inline(always)]
    pub(super) fn next(
        &mut self,
        tid: u32,
        size: u64,
        predictor: &mut StackPredictor,
    ) -> Result<u32, DecodeError> {
        if self.left != 0 {
            if self.left != u64::MAX {
                self.left -= 1;
            }
            return Ok(0);
        }
        self.sampled(tid, size, predictor)
    }

    fn sampled(
        &mut self,
        tid: u32,
        size: u64,
        predictor: &mut StackPredictor,
    ) -> Result<u32, DecodeError> {
        let code = self.ids.varint().ok_or_else(|| ends_early("stack id"))?;
        let id = match code {
            PREDICTED => *predictor
                .last
                .get(&(tid, size))
                .ok_or_else(|| bad("predicted stack id without an earlier one"))?,
            LARGER => {
                let d = self.ids.varint().ok_or_else(|| ends_early("stack id"))?;
                u64::from(predictor.largest)
                    .checked_add(d.saturating_add(1))
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| bad("stack id too large"))?
            }
            _ => u32::try_from(code - (EXPLICIT - 1)).map_err(|_| bad("stack id too large"))?,
        };
        predictor.learn(tid, size, id);
        self.next_gap();
        Ok(id)
    }

    /// After the chunk's last allocation: every sample was placed on one.
    pub(super) fn finish(&self) -> Result<(), DecodeError> {
        if self.left == u64::MAX && self.ids.remaining() == 0 {
            Ok(())
        } else {
            Err(bad("sampled stacks beyond the chunk's allocations"))
        }
    }
}
