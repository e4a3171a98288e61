//! A [`LiveTable`] split in shards by the hash's top bits, each growing on its own: when a
//! shard grows, it and its successor are held at once, a sixteenth of the table, where a whole
//! table doubling held the old table and the new one (three times the old size) at its peak.
//! The analysis's live set of a python3 trace with addresses (4.5 M blocks): the doubling from
//! 4 Mi to 8 Mi slots of 24 bytes held 288 MiB at once (bench/HISTORY.md).

use crate::hash::fold;
use crate::live_table::LiveTable;

/// Shards: a power of two. Their homes use the hash's low bits, the shard its top ones.
const SHARDS: usize = 16;
const SHARD_SHIFT: u32 = 64 - SHARDS.trailing_zeros();

pub struct ShardedTable<V> {
    shards: [LiveTable<V>; SHARDS],
}

impl<V: Copy + Default> ShardedTable<V> {
    /// Room for about `capacity` entries in all, each shard doubling past `num / den` full
    /// (`LiveTable::with_max_load`).
    pub fn with_max_load(capacity: usize, load: (usize, usize)) -> Self {
        ShardedTable {
            shards: std::array::from_fn(|_| {
                LiveTable::with_max_load(capacity.div_ceil(SHARDS), load)
            }),
        }
    }

    #[inline(always)]
    fn shard(&self, key: u64) -> &LiveTable<V> {
        &self.shards[(fold(key) >> SHARD_SHIFT) as usize]
    }

    #[inline(always)]
    fn shard_mut(&mut self, key: u64) -> &mut LiveTable<V> {
        &mut self.shards[(fold(key) >> SHARD_SHIFT) as usize]
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(LiveTable::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(LiveTable::is_empty)
    }

    /// Insertions refused for want of memory, in all shards (`LiveTable::lost`).
    pub fn lost(&self) -> u64 {
        self.shards.iter().map(LiveTable::lost).sum()
    }

    /// Slots of all shards (the memory is that many entries).
    pub fn slots(&self) -> usize {
        self.shards.iter().map(LiveTable::slots).sum()
    }

    /// Hint that `key` will be looked up soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.shard(key).prefetch(key);
    }

    /// Insert or replace; returns the value that was there. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        self.shard_mut(key).insert(key, value)
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        self.shard_mut(key).remove(key)
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.shards.iter().flat_map(LiveTable::values)
    }

    /// Every (key, value), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.shards.iter().flat_map(LiveTable::iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_while_its_shards_grow() {
        let mut t: ShardedTable<u64> = ShardedTable::with_max_load(4, (3, 4));
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..300_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Keys enough for every shard to double several times, 16-byte aligned, never 0.
            let key = 16 * (1 + rng % 50_000);
            if rng >> 61 < 5 {
                assert_eq!(t.insert(key, i), m.insert(key, i), "insert {key}");
            } else {
                assert_eq!(t.remove(key), m.remove(&key), "remove {key}");
            }
            assert_eq!(t.len(), m.len());
        }
        assert!(
            t.shards.iter().all(|s| s.len() > 500),
            "every shard is used"
        );
        let mut a: Vec<u64> = t.values().copied().collect();
        let mut b: Vec<u64> = m.values().copied().collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert_eq!((t.lost(), t.remove(0)), (0, None));
        for k in m.keys() {
            assert!(t.remove(*k).is_some());
        }
        assert!(t.is_empty());
    }

    /// Growing by steps of 1.5 and 4/3, the shards hold at most 1.5 times the slots their load
    /// needs (doubling: twice, 8 Mi slots for 4.5 M blocks where 6 Mi suffice).
    #[test]
    fn the_slots_follow_the_entries_within_half_again() {
        let mut t: ShardedTable<u64> = ShardedTable::with_max_load(4, (3, 4));
        let mut worst = 0f64;
        for i in 1..=400_000u64 {
            t.insert(16 * i, i);
            if i >= 10_000 {
                let needed = i as f64 * 4.0 / 3.0;
                worst = worst.max(t.slots() as f64 / needed);
            }
        }
        assert!(worst < 1.55, "{worst:.3} times the slots needed");
        assert!(worst > 1.3, "{worst:.3}: the shards grew");
    }
}
