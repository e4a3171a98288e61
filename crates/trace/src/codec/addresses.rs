//! An event's addresses from the mode bits of its op byte: released blocks (frees, realloc's
//! argument) and new blocks (allocations, realloc's result), with and without heap addresses.
use super::columns::{read_address, SplitCursor};
use super::decode::{bad, DecodeError};
use super::layout::*;
use super::predictor::{size_class, Predictor};
use crate::varint::{self, Cursor};

#[inline(always)]
pub(super) fn decode_old(
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
pub(super) struct OldSynthetic<'a, 'b> {
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
pub(super) fn free_size(byte: u8, sizes: &mut SplitCursor<'_>) -> Result<u64, DecodeError> {
    if byte & FREE_HAS_SIZE == 0 {
        return Ok(0);
    }
    sizes.value().ok_or_else(|| bad("size column ends early"))
}

/// A new block's address in a chunk without addresses: the block id of its event.
#[inline(always)]
pub(super) fn new_synthetic(mode: u8, seq: u64) -> Result<u64, DecodeError> {
    match mode {
        NEW_NULL => Ok(0),
        NEW_EXPLICIT => Ok(synthetic_address(seq)),
        _ => Err(bad("predicted address in a chunk without addresses")),
    }
}

/// What the decoder knows of a new block before its address.
pub(super) struct NewBlock {
    pub(super) mode: u8,
    pub(super) deeper: bool,
    pub(super) size: u64,
    /// realloc's argument (0 otherwise).
    pub(super) old: u64,
}

#[inline(always)]
pub(super) fn decode_new(
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
