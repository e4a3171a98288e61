//! An event's size and addresses from its op byte and the event columns: released blocks
//! (frees, realloc's argument) and new blocks (allocations, realloc's result), with and without
//! heap addresses.
use super::columns::{read_address, SplitCursor};
use super::decode::{bad, ends_early, DecodeError};
use super::layout::*;
use super::predictor::{size_class, Predictor};
use crate::varint::{self, Cursor};

#[inline(always)]
fn decode_old(
    mode: u8,
    producers: &[(u64, u32)],
    refs: &mut SplitCursor<'_>,
    addrs: &mut Cursor<'_>,
    base: &mut u64,
    predictor: &mut Predictor,
) -> Result<u64, DecodeError> {
    let addr = match mode {
        OLD_NULL => return Ok(0),
        OLD_BACKREF => {
            let d = refs
                .value()
                .ok_or_else(|| bad("reference column ends early"))?;
            let (addr, class) = usize::try_from(d)
                .ok()
                .filter(|&d| d > 0)
                .and_then(|d| producers.len().checked_sub(d))
                .map(|j| producers[j])
                .ok_or_else(|| bad("reference before the chunk"))?;
            predictor.freed_in_class(addr, class as usize);
            addr
        }
        OLD_EXPLICIT => read_address(addrs, *base)?,
        _ => return Err(bad("unknown address mode")),
    };
    *base = addr;
    Ok(addr)
}

/// `decode_old` in a chunk without addresses (`ChunkEncoder::without_addresses`): the columns and
/// bases it reads and moves.
struct OldSynthetic<'a, 'b> {
    pub(super) refs: &'a mut SplitCursor<'b>,
    pub(super) addrs: &'a mut Cursor<'b>,
    pub(super) base: &'a mut u64,
    pub(super) last_synthetic: &'a mut u64,
}

impl OldSynthetic<'_, '_> {
    #[inline(always)]
    pub(super) fn decode(
        &mut self,
        mode: u8,
        producers: &[(u64, u32)],
    ) -> Result<u64, DecodeError> {
        match mode {
            OLD_NULL => Ok(0),
            OLD_BACKREF => {
                let d = self
                    .refs
                    .value()
                    .ok_or_else(|| bad("reference column ends early"))?;
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d > 0)
                    .and_then(|d| producers.len().checked_sub(d))
                    .map(|j| producers[j].0)
                    .ok_or_else(|| bad("reference before the chunk"))
            }
            OLD_SYNTHETIC => {
                let z = self
                    .addrs
                    .varint()
                    .ok_or_else(|| bad("address column ends early"))?;
                let seq = self.last_synthetic.wrapping_add(varint::unzigzag(z) as u64);
                if seq & SYNTHETIC_BIT != 0 {
                    return Err(bad("synthetic reference out of range"));
                }
                *self.last_synthetic = seq;
                Ok(synthetic_address(seq))
            }
            _ => {
                let addr = read_address(self.addrs, *self.base)?;
                *self.base = addr;
                Ok(addr)
            }
        }
    }
}

/// The size a free carries (`free_sized`, `free_aligned_sized`), 0 for a plain free.
#[inline(always)]
fn free_size(byte: u8, sizes: &mut SplitCursor<'_>) -> Result<u64, DecodeError> {
    if byte & FREE_HAS_SIZE == 0 {
        return Ok(0);
    }
    sizes.value().ok_or_else(|| bad("size column ends early"))
}

/// A new block's address in a chunk without addresses: the block id of its event.
#[inline(always)]
fn new_synthetic(mode: u8, seq: u64) -> Result<u64, DecodeError> {
    match mode {
        NEW_NULL => Ok(0),
        NEW_EXPLICIT => Ok(synthetic_address(seq)),
        _ => Err(bad("predicted address in a chunk without addresses")),
    }
}

/// What the decoder knows of a new block before its address.
struct NewBlock {
    pub(super) mode: u8,
    pub(super) deeper: bool,
    pub(super) size: u64,
    /// realloc's argument (0 otherwise).
    pub(super) old: u64,
}

#[inline(always)]
fn decode_new(
    new: NewBlock,
    addrs: &mut Cursor<'_>,
    depths: &mut Cursor<'_>,
    base: &mut u64,
    predictor: &mut Predictor,
) -> Result<u64, DecodeError> {
    let class = size_class(new.size);
    let addr = match new.mode {
        NEW_NULL => return Ok(0),
        NEW_SAME_AS_OLD if new.old != 0 => new.old,
        NEW_PREDICTED => {
            let k = if new.deeper {
                depths
                    .varint()
                    .and_then(|k| usize::try_from(k).ok())
                    .and_then(|k| k.checked_add(1))
                    .ok_or_else(|| bad("depth column ends early"))?
            } else {
                0
            };
            let addr = predictor
                .guess(class, k)
                .ok_or_else(|| bad("predicted address without a prediction"))?;
            // In a valid chunk the entry at `k` is the address's first occurrence from the top,
            // the one the encoder's search found: take it without searching.
            predictor.take(class, k);
            *base = addr;
            return Ok(addr);
        }
        NEW_EXPLICIT => read_address(addrs, *base)?,
        _ => return Err(bad("invalid address mode")),
    };
    predictor.allocated(addr, class);
    *base = addr;
    Ok(addr)
}

/// The bases of an event's address deltas: explicit new and released addresses are deltas from
/// the last of their kind (frees walk their own part of the heap, allocations theirs); a
/// synthetic reference is a delta from the last one.
pub(super) struct Bases {
    pub(super) new: u64,
    pub(super) old: u64,
    pub(super) last_synthetic: u64,
}

/// The columns an event's size and addresses are read from.
pub(super) struct EventColumns<'a> {
    pub(super) sizes: SplitCursor<'a>,
    pub(super) addrs: Cursor<'a>,
    pub(super) refs: SplitCursor<'a>,
    pub(super) depths: Cursor<'a>,
}

impl EventColumns<'_> {
    /// An event's `(addr, size, old_addr)` from its op byte, in a chunk with addresses.
    #[inline(always)]
    pub(super) fn with_addresses(
        &mut self,
        byte: u8,
        shape: Shape,
        bases: &mut Bases,
        producers: &[(u64, u32)],
        predictor: &mut Predictor,
    ) -> Result<(u64, u64, u64), DecodeError> {
        Ok(match shape {
            Shape::Alloc => {
                let size = self.sizes.value().ok_or_else(|| ends_early("size"))?;
                let new = NewBlock {
                    mode: (byte >> 4) & 3,
                    deeper: byte & ALLOC_DEEPER != 0,
                    size,
                    old: 0,
                };
                let addr = decode_new(
                    new,
                    &mut self.addrs,
                    &mut self.depths,
                    &mut bases.new,
                    predictor,
                )?;
                (addr, size, 0)
            }
            Shape::Free => {
                let addr = decode_old(
                    (byte >> 4) & 3,
                    producers,
                    &mut self.refs,
                    &mut self.addrs,
                    &mut bases.old,
                    predictor,
                )?;
                (addr, free_size(byte, &mut self.sizes)?, 0)
            }
            Shape::Realloc => {
                let size = self.sizes.value().ok_or_else(|| ends_early("size"))?;
                let old = decode_old(
                    byte >> 6,
                    producers,
                    &mut self.refs,
                    &mut self.addrs,
                    &mut bases.old,
                    predictor,
                )?;
                let new = NewBlock {
                    mode: (byte >> 4) & 3,
                    deeper: false,
                    size,
                    old,
                };
                let addr = decode_new(
                    new,
                    &mut self.addrs,
                    &mut self.depths,
                    &mut bases.new,
                    predictor,
                )?;
                (addr, size, old)
            }
        })
    }

    /// An event's `(addr, size, old_addr)` from its op byte, in a chunk without addresses
    /// (`ChunkEncoder::without_addresses`): new blocks are known by their event's seq.
    #[inline(always)]
    pub(super) fn without_addresses(
        &mut self,
        byte: u8,
        shape: Shape,
        seq: u64,
        bases: &mut Bases,
        producers: &[(u64, u32)],
    ) -> Result<(u64, u64, u64), DecodeError> {
        let mut released = OldSynthetic {
            refs: &mut self.refs,
            addrs: &mut self.addrs,
            base: &mut bases.old,
            last_synthetic: &mut bases.last_synthetic,
        };
        Ok(match shape {
            Shape::Alloc => {
                let size = self.sizes.value().ok_or_else(|| ends_early("size"))?;
                (new_synthetic((byte >> 4) & 3, seq)?, size, 0)
            }
            Shape::Free => {
                let addr = released.decode((byte >> 4) & 3, producers)?;
                (addr, free_size(byte, &mut self.sizes)?, 0)
            }
            Shape::Realloc => {
                let size = self.sizes.value().ok_or_else(|| ends_early("size"))?;
                let old = released.decode(byte >> 6, producers)?;
                (new_synthetic((byte >> 4) & 3, seq)?, size, old)
            }
        })
    }
}
