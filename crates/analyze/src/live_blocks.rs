//! What the pass keeps of each live block, in 16 bytes: the live set's memory is the largest
//! the analysis has (millions of blocks), and the 32 bytes a block took before, in a table at
//! most half full, made most of python3's 215 bytes per live block.
//!
//! A block whose figures do not fit the packed form (a size of 16 MiB or more, a start past
//! 78 hours or 2^40 calls, a (thread, phase) cell past 65,534) is kept whole in a side map, its
//! packed slot saying so: rare blocks, the same figures.
//!
//! Beside each block, a tag of the pass that follows the blocks the live set matched
//! (`crate::block_observer`): the call sites' pass keeps the block's stack there, so that its
//! frees are matched once, by this set. Without such a pass the tag is `()` and takes no room.

use crate::hash::FastMap;
use crate::live_set::LiveSet;

/// A live block: a realloc chain keeps its start across moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    pub start_seq: u64,
    pub start_ns: u64,
    pub size: u64,
    /// The (thread, phase) cell where the chain started.
    pub cell: u32,
}

const NS_BITS: u32 = 48;
const SEQ_BITS: u32 = 40;
const SIZE_BITS: u32 = 24;
/// The cell of a packed slot whose block is in the side map.
const WIDE: u64 = 0xFFFF;

/// `a`: start_ns (48 bits) | cell << 48; `b`: start_seq (40 bits) | size << 40.
#[derive(Debug, Clone, Copy, Default)]
pub struct Packed {
    a: u64,
    b: u64,
}

impl Packed {
    const WIDE: Packed = Packed {
        a: WIDE << NS_BITS,
        b: 0,
    };

    #[inline(always)]
    fn pack(l: &Live) -> Option<Packed> {
        let fits = l.start_ns >> NS_BITS == 0
            && l.start_seq >> SEQ_BITS == 0
            && l.size >> SIZE_BITS == 0
            && u64::from(l.cell) < WIDE;
        fits.then_some(Packed {
            a: l.start_ns | u64::from(l.cell) << NS_BITS,
            b: l.start_seq | l.size << SEQ_BITS,
        })
    }

    #[inline(always)]
    fn is_wide(&self) -> bool {
        self.a >> NS_BITS == WIDE
    }

    #[inline(always)]
    fn unpack(&self) -> Live {
        Live {
            start_seq: self.b & ((1 << SEQ_BITS) - 1),
            start_ns: self.a & ((1 << NS_BITS) - 1),
            size: self.b >> SEQ_BITS,
            cell: (self.a >> NS_BITS) as u32,
        }
    }
}

/// A block in the set: its packed figures and its tag.
#[derive(Debug, Clone, Copy, Default)]
struct Slot<T> {
    packed: Packed,
    tag: T,
}

/// The live blocks by address (or block id): a map from key to `Live` and a tag `T`.
pub struct LiveBlocks<T: Copy + Default = ()> {
    set: LiveSet<Slot<T>>,
    /// The wide blocks, with their tags (their slots hold `Packed::WIDE`).
    wide: FastMap<u64, (Live, T)>,
}

impl<T: Copy + Default> LiveBlocks<T> {
    pub fn with_capacity(capacity: usize) -> Self {
        LiveBlocks {
            set: LiveSet::with_capacity(capacity),
            wide: FastMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// See `LiveSet::lost`.
    pub fn lost(&self) -> u64 {
        self.set.lost()
    }

    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.set.prefetch(key);
    }

    #[inline(always)]
    fn open(&mut self, key: u64, old: Option<Slot<T>>) -> Option<(Live, T)> {
        let old = old?;
        if old.packed.is_wide() {
            self.wide.remove(&key)
        } else {
            Some((old.packed.unpack(), old.tag))
        }
    }

    /// Insert or replace; returns the block that was there, with its tag. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, live: Live, tag: T) -> Option<(Live, T)> {
        let old = match Packed::pack(&live) {
            Some(packed) => self.set.insert(key, Slot { packed, tag }),
            None => {
                let wide = Slot {
                    packed: Packed::WIDE,
                    tag,
                };
                let old = self.set.insert(key, wide);
                // The side map's entry for `key`, if any, is the old block: taken first.
                let old = self.open(key, old);
                self.wide.insert(key, (live, tag));
                return old;
            }
        };
        self.open(key, old)
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<(Live, T)> {
        let old = self.set.remove(key);
        self.open(key, old)
    }

    /// Every live block with its key and tag, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Live, T)> + '_ {
        let packed = self
            .set
            .iter()
            .filter(|(_, slot)| !slot.packed.is_wide())
            .map(|(key, slot)| (key, slot.packed.unpack(), slot.tag));
        packed.chain(self.wide.iter().map(|(&key, &(l, tag))| (key, l, tag)))
    }

    /// Every live block with its tag, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = (Live, T)> + '_ {
        let packed = self
            .set
            .values()
            .filter(|slot| !slot.packed.is_wide())
            .map(|slot| (slot.packed.unpack(), slot.tag));
        packed.chain(self.wide.values().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use trace::SYNTHETIC_BIT;

    /// Blocks that fit and blocks that do not (huge sizes, late starts, high cells), replaced
    /// by either kind: the same map.
    #[test]
    fn wide_and_packed_blocks_answer_like_a_map() {
        let mut s = LiveBlocks::with_capacity(4);
        let mut m: HashMap<u64, (Live, u32)> = HashMap::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let key = if rng.is_multiple_of(2) {
                16 * (1 + (rng >> 8) % 3000)
            } else {
                SYNTHETIC_BIT | ((rng >> 8) % 20_000)
            };
            let wide = (rng >> 32) % 8;
            let live = Live {
                start_seq: if wide == 0 { i << 40 } else { i },
                start_ns: if wide == 1 { (i + 1) << 48 } else { i * 3 },
                size: if wide == 2 {
                    16 << 20
                } else {
                    (rng >> 40) % (16 << 20)
                },
                cell: if wide == 3 {
                    0xFFFF + (i as u32 % 3)
                } else {
                    i as u32 % 0xFFFF
                },
            };
            // The tag follows its block, packed or wide.
            let tag = i as u32;
            if !(rng >> 20).is_multiple_of(3) {
                assert_eq!(s.insert(key, live, tag), m.insert(key, (live, tag)));
            } else {
                assert_eq!(s.remove(key), m.remove(&key));
            }
            assert_eq!(s.len(), m.len());
        }
        let mut a: Vec<(u64, u64, u32)> =
            s.values().map(|(l, t)| (l.start_seq, l.size, t)).collect();
        let mut b: Vec<(u64, u64, u32)> =
            m.values().map(|(l, t)| (l.start_seq, l.size, *t)).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        let wide = m
            .values()
            .filter(|(l, _)| Packed::pack(l).is_none())
            .count();
        assert!(wide > 0);
        assert_eq!(
            s.wide.len(),
            wide,
            "the side map holds the live wide blocks alone"
        );
    }
}
