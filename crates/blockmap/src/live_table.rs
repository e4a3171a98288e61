//! The live set: an open-addressing table from address to what the recorder (`BlockIds`) or the
//! analysis keeps of the block living there.
//!
//! Linear probing over one array of (key, value) entries, and backward-shift deletion (no
//! tombstones, so a long trace of frees and mallocs never degrades it). A lookup that hits its
//! home slot (most do: the recorder's table is at most half full, the analysis's 3/4, any 7/8
//! when memory for a larger one cannot be had) touches one cache line, where parallel key and value arrays cost two. Unlike a
//! general-purpose map it can `prefetch` the slot of an address, which lets the pass hide the
//! cache miss of an event behind the work of the events before it: with a live set larger than
//! the caches (millions of blocks) that halves the time of the pass.
//! The home slot scales the hash by a multiply, so a table may have any number of slots: the
//! recorder's doubles, the analysis's grows by 1.5 and 4/3 (`Growth`).
//! Address 0 is never live (a NULL result is a failure), so 0 marks an empty slot.

use crate::hash::fold;
use crate::huge_pages::{try_vec_filled, vec_filled};

#[derive(Clone, Copy, Default)]
struct Entry<V> {
    key: u64,
    value: V,
}

pub struct LiveTable<V> {
    /// Slots: any number (see `Growth`), at least 16 and below 2^32.
    entries: Vec<Entry<V>>,
    len: usize,
    /// Grows past this many entries: `max_load` of the slots, or 7/8 once a larger table could
    /// not be had.
    grow_at: usize,
    /// How full the table may get before it grows: (numerator, denominator), a power of two.
    max_load: (usize, usize),
    /// Entries refused since the table could grow no more (see `lost`).
    lost: u64,
    /// Largest table tried (slots); lower only in tests, which cannot make an allocation fail.
    max_slots: usize,
    growth: Growth,
}

/// How a table grows when it is too full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Growth {
    /// Powers of two: the fewest rehashes (the recorder's table, on the traced program's path).
    Double,
    /// 2^k, 3 * 2^(k-1), 2^(k+1): steps of 1.5 and 4/3, so that a table is at most 1.5 times the
    /// slots its load needs instead of 2 (the analysis's live set: with 4.5 M blocks, doubling
    /// made 8 Mi slots where 6 Mi suffice, 192 MiB against 144 with 24-byte entries).
    ByHalves,
}

impl Growth {
    /// The smallest size of this growth's sequence that is at least `slots` (and 16).
    fn at_least(self, slots: usize) -> usize {
        let pow2 = slots.max(16).next_power_of_two();
        let between = pow2 / 4 * 3;
        match self {
            Growth::ByHalves if between >= slots.max(16) => between,
            _ => pow2,
        }
    }

    /// The size after `slots`.
    fn after(self, slots: usize) -> usize {
        match self {
            Growth::ByHalves if slots.is_power_of_two() => slots / 2 * 3,
            Growth::ByHalves => slots / 3 * 4,
            Growth::Double => slots * 2,
        }
    }
}

/// How full the table may get when memory for a larger one cannot be had: probes get longer, the
/// figures stay exact.
const DENSE_NUM: usize = 7;
const DENSE_DEN: usize = 8;

/// Slots at most: `home` scales a 32-bit hash.
const MAX_SLOTS: usize = (u32::MAX as usize).saturating_add(1);

impl<V: Copy + Default> LiveTable<V> {
    /// A table with room for about `capacity` entries before it grows, at most half full, that
    /// doubles.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(capacity, (1, 2), Growth::Double)
    }

    /// A table that grows once more than `num / den` of its slots are taken (`den` a power of
    /// two up to 16, the load at most 7/8). Half full, most lookups hit their home slot; fuller
    /// tables take less memory per entry (the analysis's live set, 3/4: 32-48 bytes per block
    /// with 24-byte entries) for longer probes. It grows by steps of 1.5 and 4/3 (`Growth`).
    pub fn with_max_load(capacity: usize, load: (usize, usize)) -> Self {
        Self::new(capacity, load, Growth::ByHalves)
    }

    fn new(capacity: usize, (num, den): (usize, usize), growth: Growth) -> Self {
        assert!(den.is_power_of_two() && den <= 16 && num * DENSE_DEN <= den * DENSE_NUM);
        let slots = growth.at_least(capacity * den / num + 1);
        LiveTable {
            entries: vec_filled(Entry::default(), slots),
            len: 0,
            grow_at: slots * num / den,
            max_load: (num, den),
            lost: 0,
            max_slots: MAX_SLOTS,
            growth,
        }
    }

    /// Slots of the table (its memory is that many entries).
    pub fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Insertions refused because the table was full and no memory could be had for a larger
    /// one (an address-space limit such as `ulimit -v`, or strict overcommit): those keys are
    /// missing, so a caller that sees a non-zero count must not trust what the table says.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key's home slot: the low 32 bits of its hash scaled to the slots (a multiply, where a
    /// mask would need a power of two; a sharded table picks shards with the top bits).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        ((u64::from(fold(key) as u32) * self.entries.len() as u64) >> 32) as usize
    }

    /// The slot after `i`, wrapping at the end.
    #[inline(always)]
    fn next(&self, i: usize) -> usize {
        let i = i + 1;
        if i == self.entries.len() {
            0
        } else {
            i
        }
    }

    /// How far slot `j` is after slot `from`, going round the end.
    #[inline(always)]
    fn distance(&self, from: usize, j: usize) -> usize {
        if j >= from {
            j - from
        } else {
            j + self.entries.len() - from
        }
    }

    /// Hint that `key` will be looked up soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        let entry = self.entries.as_ptr().wrapping_add(self.home(key));
        // A hint needs no bounds check: `prefetch_ptr` never dereferences (and the slot is in
        // bounds). Both ends: an entry whose size does not divide 64 bytes may straddle two
        // cache lines (the analysis's 24-byte entries: a quarter of them).
        prefetch_ptr(entry);
        prefetch_ptr(entry.cast::<u8>().wrapping_add(size_of::<Entry<V>>() - 1));
    }

    // The slot accessors below skip bounds checks on the probe path. SAFETY (all of them):
    // every index comes from `home` (below `entries.len()`, which is below 2^32: the product
    // with a 32-bit hash shifted by 32), from `next` (wraps at `entries.len()`) or from `find`
    // (one of those), and `entries` only changes in `grow`, which recomputes them.
    // `behaves_like_a_map_through_growth_and_deletions` exercises every path.

    /// The entry in slot `i`.
    #[inline(always)]
    fn at(&self, i: usize) -> &Entry<V> {
        debug_assert!(i < self.entries.len());
        // SAFETY: see above.
        unsafe { self.entries.get_unchecked(i) }
    }

    /// The entry in slot `i`, to write.
    #[inline(always)]
    fn at_mut(&mut self, i: usize) -> &mut Entry<V> {
        debug_assert!(i < self.entries.len());
        // SAFETY: see above.
        unsafe { self.entries.get_unchecked_mut(i) }
    }

    /// Slot holding `key`, or the empty slot where its probe ends.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let k = self.at(i).key;
            if k == key {
                return (i, true);
            }
            if k == 0 {
                return (i, false);
            }
            i = self.next(i);
        }
    }

    /// Insert or replace; returns the value that was there. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        debug_assert_ne!(key, 0);
        let (i, found) = self.find(key);
        let old = found.then(|| self.at(i).value);
        *self.at_mut(i) = Entry { key, value };
        if !found {
            self.len += 1;
            if self.len > self.grow_at {
                self.grow(i);
            }
        }
        old
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
        let value = self.at(hole).value;
        self.len -= 1;
        // Backward shift: move up each later entry of the run whose home is not in (hole, j].
        let mut j = hole;
        loop {
            j = self.next(j);
            let entry = *self.at(j);
            if entry.key == 0 {
                break;
            }
            let home = self.home(entry.key);
            if self.distance(home, j) >= self.distance(hole, j) {
                *self.at_mut(hole) = entry;
                hole = j;
            }
        }
        // Emptied (its stale value is never read).
        self.at_mut(hole).key = 0;
        Some(value)
    }

    /// Doubles the table, `just_placed` being the slot of the entry that made it too full. When
    /// the memory cannot be had, the table fills further (up to 7/8), then refuses that entry:
    /// its slot was empty before, so emptying it again undoes the insertion exactly.
    #[cold]
    fn grow(&mut self, just_placed: usize) {
        let slots = self.growth.after(self.entries.len());
        // Once an entry was refused, no more tries: each costs a system call.
        let bigger = (self.lost == 0 && slots <= self.max_slots)
            .then(|| try_vec_filled(Entry::default(), slots))
            .flatten();
        let Some(bigger) = bigger else {
            let dense = self.entries.len() * DENSE_NUM / DENSE_DEN;
            if self.grow_at < dense {
                self.grow_at = dense;
            } else {
                self.at_mut(just_placed).key = 0;
                self.len -= 1;
                self.lost += 1;
            }
            return;
        };
        self.grow_at = slots * self.max_load.0 / self.max_load.1;
        let old = std::mem::replace(&mut self.entries, bigger);
        for entry in old {
            if entry.key != 0 {
                let (i, _) = self.find(entry.key);
                self.entries[i] = entry;
            }
        }
    }

    /// Every (key, value), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.key != 0)
            .map(|e| (e.key, &e.value))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.entries.iter().filter(|e| e.key != 0).map(|e| &e.value)
    }
}

/// Ask the CPU to bring the cache line at `p` in. A hint: `p` is never dereferenced, a prefetch
/// of any address (even invalid) never faults, and nothing but the caches changes.
#[inline(always)]
pub fn prefetch_ptr<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no effect besides the cache, whatever the address.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_through_growth_and_deletions() {
        for load in [(1, 2), (3, 4), (7, 8)] {
            behaves_like_a_map_at(LiveTable::with_max_load(4, load));
        }
    }

    fn behaves_like_a_map_at(mut t: LiveTable<u64>) {
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

    #[test]
    fn without_memory_for_a_larger_table_it_fills_to_seven_eighths_then_refuses() {
        let mut t: LiveTable<u64> = LiveTable::with_capacity(4);
        t.max_slots = 64;
        let mut m: HashMap<u64, u64> = HashMap::new();
        for i in 1..=100u64 {
            let refused = t.lost();
            let old = t.insert(16 * i, i);
            if t.lost() == refused {
                assert_eq!(old, m.insert(16 * i, i));
            }
        }
        // 64 slots: 32 entries at half load, 56 at seven eighths, the other 44 refused.
        assert_eq!((t.len(), t.lost()), (56, 44));
        // The table answers like a map of what it accepted, removals and re-insertions too.
        for i in 1..=100u64 {
            let accepted = m.contains_key(&(16 * i));
            assert_eq!(t.remove(16 * i), m.remove(&(16 * i)), "remove {i}");
            assert_eq!(accepted, i <= 56);
        }
        assert!(t.is_empty());
        assert_eq!(t.insert(16, 1), None);
        assert_eq!(t.remove(16), Some(1));
    }
}
