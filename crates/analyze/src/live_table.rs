//! The live set: an open-addressing table from address to the allocation living there.
//!
//! Linear probing over a dense array of keys (8 per cache line) with the values in a parallel
//! array, and backward-shift deletion (no tombstones, so a long trace of frees and mallocs never
//! degrades it). Unlike a general-purpose map it can `prefetch` the slot of an address, which lets
//! the pass hide the cache miss of an event behind the work of the events before it: with a live
//! set larger than the caches (millions of blocks) that halves the time of the pass.
//! Address 0 is never live (a NULL result is a failure), so 0 marks an empty slot.

use crate::hash::fold;

pub struct LiveTable<V> {
    keys: Vec<u64>,
    values: Vec<V>,
    mask: usize,
    len: usize,
}

impl<V: Copy + Default> LiveTable<V> {
    /// A table with room for about `capacity` entries before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        let slots = (capacity * 2 + 1).next_power_of_two().max(16);
        LiveTable {
            keys: vec![0; slots],
            values: vec![V::default(); slots],
            mask: slots - 1,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        fold(key) as usize & self.mask
    }

    /// Hint that `key` will be looked up soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        let i = self.home(key);
        // `i` is in bounds of both arrays (mask = len - 1).
        prefetch_ptr(&self.keys[i]);
        prefetch_ptr(&self.values[i]);
    }

    /// The key in slot `i & mask`, without a bounds check on the probe path.
    #[inline(always)]
    fn key_at(&self, i: usize) -> u64 {
        let i = i & self.mask;
        debug_assert!(i < self.keys.len());
        // SAFETY: `keys.len()` is a power of two (at least 16) and `mask` is `keys.len() - 1`
        // (both set together in `with_capacity` and `grow`), so `i & mask` is in bounds.
        unsafe { *self.keys.get_unchecked(i) }
    }

    /// Slot holding `key`, or the empty slot where its probe ends.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let k = self.key_at(i);
            if k == key {
                return (i, true);
            }
            if k == 0 {
                return (i, false);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert or replace; returns the value that was there. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        debug_assert_ne!(key, 0);
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.values[i], value));
        }
        self.keys[i] = key;
        self.values[i] = value;
        self.len += 1;
        if self.len * 2 > self.keys.len() {
            self.grow();
        }
        None
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == 0 {
            return None;
        }
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let value = self.values[hole];
        self.len -= 1;
        // Backward shift: move up each later entry of the run whose home is not in (hole, j].
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let k = self.key_at(j);
            if k == 0 {
                break;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.keys[hole] = k;
                self.values[hole] = self.values[j];
                hole = j;
            }
        }
        self.keys[hole] = 0;
        Some(value)
    }

    #[cold]
    fn grow(&mut self) {
        let slots = self.keys.len() * 2;
        let keys = std::mem::replace(&mut self.keys, vec![0; slots]);
        let values = std::mem::replace(&mut self.values, vec![V::default(); slots]);
        self.mask = slots - 1;
        for (k, v) in keys.into_iter().zip(values) {
            if k != 0 {
                let (i, _) = self.find(k);
                self.keys[i] = k;
                self.values[i] = v;
            }
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.keys
            .iter()
            .zip(&self.values)
            .filter(|(k, _)| **k != 0)
            .map(|(_, v)| v)
    }
}

/// Ask the CPU to bring the cache line of `r` in (a hint: it never faults, nothing else changes).
#[inline(always)]
pub fn prefetch_ptr<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `r` is a valid reference, and a prefetch has no effect besides the cache.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_through_growth_and_deletions() {
        let mut t: LiveTable<u64> = LiveTable::with_capacity(4);
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Few distinct keys (many collisions and reuses), 16-byte aligned, never 0.
            let key = 16 * (1 + rng % 3000);
            if rng >> 60 < 7 {
                assert_eq!(t.insert(key, i), m.insert(key, i), "insert {key}");
            } else {
                assert_eq!(t.remove(key), m.remove(&key), "remove {key}");
            }
            assert_eq!(t.len(), m.len());
        }
        let mut a: Vec<u64> = t.values().copied().collect();
        let mut b: Vec<u64> = m.values().copied().collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        assert_eq!(t.remove(0), None);
        for k in m.keys() {
            assert!(t.remove(*k).is_some());
        }
        assert!(t.is_empty());
    }
}
