//! What encoder and decoder agree on byte for byte: the op byte's tag and address-mode bits, the
//! chunk flags, and the synthetic addresses of chunks without addresses.
use crate::event::Op;

/// Op-byte tag of a marker (event ops use their `Op` tag, 1..=15).
pub(super) const TAG_MARKER: u8 = 0;
pub(super) const TAG_MASK: u8 = 0x0f;

// Address modes of a new block (allocations, realloc's result): bits 4-5.
pub(super) const NEW_EXPLICIT: u8 = 0;
pub(super) const NEW_NULL: u8 = 1;
pub(super) const NEW_PREDICTED: u8 = 2;
pub(super) const NEW_SAME_AS_OLD: u8 = 3;
// Address modes of a released block (frees, realloc's argument): bits 4-5 for frees, 6-7 for realloc.
pub(super) const OLD_EXPLICIT: u8 = 0;
pub(super) const OLD_NULL: u8 = 1;
pub(super) const OLD_BACKREF: u8 = 2;
/// Only in chunks without addresses: a block allocated in an earlier chunk, by the seq of its
/// allocation (a delta from the previous one in the chunk, in the addrs column).
pub(super) const OLD_SYNTHETIC: u8 = 3;
// Frees: bit 6 set when a size was given (free_sized and the like).
pub(super) const FREE_HAS_SIZE: u8 = 0x40;
// Allocations (not realloc): bit 6 set when a predicted address is below the top of its class
// stack; its depth is in the depths column.
pub(super) const ALLOC_DEEPER: u8 = 0x40;

/// Chunk flags (header): the chunk stores no heap addresses (`ChunkEncoder::without_addresses`).
pub(super) const FLAG_SYNTHETIC: u64 = 1;
/// Chunk flags: allocations and reallocs carry a stack id (the `stacks` column follows `labels`).
pub(super) const FLAG_STACKS: u64 = 2;
/// Chunk flags: frees carry a stack id too (only with `FLAG_STACKS`).
pub(super) const FLAG_FREE_STACKS: u64 = 4;
/// Chunk flags: sampled stacks (only with `FLAG_STACKS`, never with `FLAG_FREE_STACKS`): the
/// `stacks` column is replaced by `sample_gaps` and `stack_ids` (`SampledStackCoder`), which
/// store only the sampled allocations instead of a 0 for each of the others.
pub(super) const FLAG_SAMPLED_STACKS: u64 = 8;

/// The top bit of a synthetic address: user-space pointers never have it.
pub const SYNTHETIC_BIT: u64 = 1 << 63;

/// The address a trace without addresses gives the block allocated by the event `seq`: a block
/// id, unique in its process image, that no real pointer can equal.
#[inline]
pub fn synthetic_address(seq: u64) -> u64 {
    SYNTHETIC_BIT | seq
}

/// What kind of address fields an op has.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Alloc,
    Free,
    Realloc,
}

/// The shape of each op, by tag: one load where `Op::is_free` and `Op::is_realloc` were two
/// tests of the tag against a set.
const SHAPES: [Shape; 16] = {
    let mut shapes = [Shape::Alloc; 16];
    let mut i = 0;
    while i < Op::ALL.len() {
        let op = Op::ALL[i];
        shapes[op as usize] = if op.is_free() {
            Shape::Free
        } else if op.is_realloc() {
            Shape::Realloc
        } else {
            Shape::Alloc
        };
        i += 1;
    }
    shapes
};

#[inline(always)]
pub(super) fn shape(op: Op) -> Shape {
    SHAPES[op as usize & 15]
}
