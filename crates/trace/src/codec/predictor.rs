//! The address predictor both sides run over the same events: a predicted allocation costs no
//! address bytes.

const PREDICT_DEPTH: usize = 16;
const CLASSES: usize = 140;

/// glibc-like size classes: 16-byte steps up to 1 KiB, then powers of two.
#[inline]
pub(super) fn size_class(size: u64) -> usize {
    if size <= 1032 {
        (size + 8).div_ceil(16) as usize
    } else {
        66 + (64 - size.leading_zeros()) as usize
    }
}

/// Guesses the address of the next allocation of a size class: allocators hand back the most
/// recently freed block of the class first (glibc's tcache, most free lists). Encoder and decoder
/// run the same predictor over the same events, so a hit costs no bytes.
pub(super) struct Predictor {
    classes: Vec<ClassStack>,
}

/// One class's stack of freed addresses, kept in a ring so that pushing onto a full stack (the
/// oldest drops out) moves nothing.
#[derive(Clone, Copy)]
struct ClassStack {
    slots: [u64; PREDICT_DEPTH],
    /// Slot of the top (valid when `depth > 0`).
    top: u8,
    depth: u8,
}

const _: () = assert!(PREDICT_DEPTH.is_power_of_two() && PREDICT_DEPTH <= 128);

impl ClassStack {
    /// Slot of the entry `k` places below the top.
    #[inline]
    fn slot(&self, k: usize) -> usize {
        (self.top as usize).wrapping_sub(k) & (PREDICT_DEPTH - 1)
    }
}

impl Predictor {
    pub(super) fn new() -> Self {
        Predictor {
            classes: vec![
                ClassStack {
                    slots: [0; PREDICT_DEPTH],
                    top: 0,
                    depth: 0,
                };
                CLASSES
            ],
        }
    }

    pub(super) fn reset(&mut self) {
        self.classes.iter_mut().for_each(|c| c.depth = 0);
    }

    #[inline]
    pub(super) fn freed_in_class(&mut self, addr: u64, c: usize) {
        let s = &mut self.classes[c];
        s.top = ((s.top as usize + 1) & (PREDICT_DEPTH - 1)) as u8;
        s.slots[s.top as usize] = addr;
        s.depth = (s.depth + 1).min(PREDICT_DEPTH as u8);
    }

    /// The address `k` places below the top of class `c`'s stack (0: the top), if any.
    #[inline]
    pub(super) fn guess(&self, c: usize, k: usize) -> Option<u64> {
        let s = &self.classes[c];
        (k < s.depth as usize).then(|| s.slots[s.slot(k)])
    }

    /// After an allocation of class `c` at `addr`: takes `addr` out of the class's stack and
    /// returns how far below the top it was (0: the top), or `None` when it was not there.
    /// Allocators mostly hand back the top; the rest is often a few places down (glibc's tcache
    /// keeps 7 blocks per size, the rest wait in other lists).
    #[inline]
    pub(super) fn allocated(&mut self, addr: u64, c: usize) -> Option<usize> {
        let s = &self.classes[c];
        let k = (0..s.depth as usize).find(|&k| s.slots[s.slot(k)] == addr)?;
        self.take(c, k);
        Some(k)
    }

    /// Takes out the entry `k` places below the top of class `c` (which exists): what
    /// `allocated` does once it found the address there. The decoder of a predicted address
    /// knows `k` already and skips the search.
    #[inline]
    pub(super) fn take(&mut self, c: usize, k: usize) {
        let s = &mut self.classes[c];
        // The entries above it move one place down; the top slot is given up.
        for j in (1..=k).rev() {
            s.slots[s.slot(j)] = s.slots[s.slot(j - 1)];
        }
        s.top = s.slot(1) as u8;
        s.depth -= 1;
    }
}
