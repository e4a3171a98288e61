//! One decoded call as the driver performs it: 16 bytes, so the calls of a process image sit in one
//! flat array of a shared mapping.

/// What the driver does for a call. Stored in a byte of [`Call`]; the numbers are internal (the
/// parent and the driver are the same binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    Malloc = 1,
    /// calloc(1, size): the allocator zeroes (or knows the memory is fresh).
    Calloc = 2,
    /// realloc(old, size) -> block; `old` is [`NO_BLOCK`] for realloc(NULL, size).
    Realloc = 3,
    Free = 4,
    /// free(NULL): a call the program made, performed as such.
    FreeNull = 5,
    PosixMemalign = 6,
    AlignedAlloc = 7,
    Memalign = 8,
    Valloc = 9,
    Pvalloc = 10,
}

/// `old` of a realloc(NULL, n).
pub const NO_BLOCK: u32 = u32::MAX;
/// Largest size a call can carry (48 bits); a recorded success above it cannot have happened.
pub const MAX_SIZE: u64 = (1 << 48) - 1;

/// One call: `word` = size (48 bits) | action << 48 | log2(alignment) << 56; `block` = the block the
/// call makes or frees (dense ids, one per allocation of the image); `old` = a realloc's old block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Call {
    word: u64,
    pub block: u32,
    pub old: u32,
}

const _: () = assert!(std::mem::size_of::<Call>() == 16);

impl Call {
    pub fn new(action: Action, size: u64, align_log2: u8, block: u32, old: u32) -> Call {
        Call {
            word: size.min(MAX_SIZE) | (action as u64) << 48 | u64::from(align_log2) << 56,
            block,
            old,
        }
    }

    #[inline]
    pub fn size(&self) -> usize {
        (self.word & MAX_SIZE) as usize
    }

    #[inline]
    pub fn action(&self) -> u8 {
        (self.word >> 48) as u8
    }

    #[inline]
    pub fn align(&self) -> usize {
        1usize << (self.word >> 56)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_keeps_its_fields() {
        let c = Call::new(Action::PosixMemalign, 12345, 6, 7, NO_BLOCK);
        assert_eq!(c.size(), 12345);
        assert_eq!(c.action(), Action::PosixMemalign as u8);
        assert_eq!(c.align(), 64);
        assert_eq!((c.block, c.old), (7, NO_BLOCK));
    }
}
