//! The live set of the pass: the open-addressing `LiveTable`, with a nursery in front of it for
//! the block ids of traces recorded without addresses.
//!
//! A real address comes back again and again (allocators reuse the block just freed), so its
//! table slot stays in the cache. A block id (`2^63 | seq`) is never reused: each allocation
//! would touch a new random slot, and the pass ran 60 % slower per live-set operation on a cc1
//! trace without addresses than with them. But most blocks die young, and ids arrive in seq
//! order: the nursery is a ring indexed by `seq mod len`, written sequentially, where a young
//! block is found without hashing. A block still live when the ring comes round to its slot
//! again moves to the table.
//!
//! The ring starts small (64 Ki slots, in the caches) and doubles while the table holds more
//! than a sixteenth as many blocks as the ring has slots, up to 16 Mi slots: a program whose
//! blocks outlive the ring in large numbers (python3 frees a whole generation of objects
//! millions of allocations after creating it, in creation order) then finds them in the ring,
//! read in order, instead of at random table slots. A block that moves costs a random table
//! insert and a random table remove; the ring's growth is what keeps moves rare. `analyze` of a
//! python3 trace: 1.35 to 1.05 s (`perf stat -r 6`) with the ring growing to 4 Mi slots while the
//! table held more than a quarter of its slots (2.43 M of 13.6 M blocks moved); 0.61-0.67 to
//! 0.40-0.41 s (0.86 to 0.60-0.63 s of CPU) with a sixteenth (the ring grew to 8 Mi slots, 0.26 M
//! blocks moved, 367 to 492 MiB peak). A cc1 trace's ring grows to 1 Mi (256 Ki before). The
//! ring stays under sixteen times the blocks in the table, so memory stays bounded by the live
//! set.
//!
//! Same semantics as a map, also for ids out of order or repeated (damaged or crafted traces): an
//! id is in the table only if it was moved there, so an id above the largest one ever moved is
//! looked for in its nursery slot alone.
use std::mem::MaybeUninit;

use blockmap::huge_pages;
use blockmap::live_table::{prefetch_ptr, LiveTable};
use trace::SYNTHETIC_BIT;

/// Slots of the nursery at first: the youngest 64 Ki block ids (a cc1 trace: 1 % of its blocks
/// outlive that window).
const NURSERY_MIN: usize = 1 << 16;
/// Its largest size (640 MiB with 32-byte values; reserved address space, faulted in as the ring
/// reaches it). python3's service script in bench/: 1.8 M blocks live at the peak; its ring grows
/// to 8 Mi slots.
const NURSERY_MAX: usize = 1 << 24;

pub struct LiveSet<V> {
    table: LiveTable<V>,
    /// Allocated on the first block id (traces with addresses never use it); 0 = empty slot.
    nursery_keys: Vec<u64>,
    /// Written before their key is set, read only where the key is not 0 (uninitialised
    /// otherwise: a new ring is not written through, its pages are faulted in as it fills).
    nursery_values: Vec<MaybeUninit<V>>,
    /// `nursery_keys.len() - 1` (0 before the first block id).
    nursery_mask: usize,
    /// The slots the ring may grow to: `NURSERY_MAX`, or what could be reserved under an
    /// address-space limit (0 before the first block id).
    nursery_cap: usize,
    in_nursery: usize,
    /// The largest block id ever moved to the table (0: none).
    max_moved: u64,
}

impl<V: Copy + Default> LiveSet<V> {
    pub fn with_capacity(capacity: usize) -> Self {
        LiveSet {
            table: LiveTable::with_capacity(capacity),
            nursery_keys: Vec::new(),
            nursery_values: Vec::new(),
            nursery_mask: 0,
            nursery_cap: 0,
            in_nursery: 0,
            max_moved: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.table.len() + self.in_nursery
    }

    /// Blocks refused for want of memory (`LiveTable::lost`): not 0 means the set is incomplete.
    pub fn lost(&self) -> u64 {
        self.table.lost()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        key as usize & self.nursery_mask
    }

    // Slot accessors without bounds checks on the pass's hot path. SAFETY (all four): they are
    // called with `i = self.slot(key)` once the ring exists, and `resize_nursery` sets both
    // vectors to `nursery_mask + 1` slots together, so `i` is in bounds of both.

    #[inline(always)]
    fn key_at(&self, i: usize) -> u64 {
        debug_assert!(i < self.nursery_keys.len());
        // SAFETY: see above.
        unsafe { *self.nursery_keys.get_unchecked(i) }
    }

    #[inline(always)]
    fn set_key(&mut self, i: usize, key: u64) {
        debug_assert!(i < self.nursery_keys.len());
        // SAFETY: see above.
        unsafe { *self.nursery_keys.get_unchecked_mut(i) = key }
    }

    /// The value of an occupied slot (its key is not 0).
    #[inline(always)]
    fn value_at(&self, i: usize) -> V {
        debug_assert!(i < self.nursery_values.len() && self.key_at(i) != 0);
        // SAFETY: see above; a slot with a key holds its value.
        unsafe { self.nursery_values.get_unchecked(i).assume_init() }
    }

    #[inline(always)]
    fn set_value(&mut self, i: usize, value: V) {
        debug_assert!(i < self.nursery_values.len());
        // SAFETY: see above.
        unsafe { *self.nursery_values.get_unchecked_mut(i) = MaybeUninit::new(value) }
    }

    /// Grows the ring to `len` slots (twice its length, or `NURSERY_MIN` at first) in place:
    /// the buffers are reserved at `NURSERY_MAX` slots on the first block id (address space
    /// only: a page is faulted in when the ring first reaches it), so a doubling touches only
    /// the new half and moves only the residents that change slot. Allocating each larger ring
    /// afresh faulted in and zeroed about twice the final ring (python3: 320 of 160 MiB), 8 % of
    /// the analysis's samples, and held both rings at once while copying.
    #[cold]
    fn resize_nursery(&mut self, len: usize) {
        let old = self.nursery_keys.len();
        debug_assert!(len.is_power_of_two() && (old == 0 || len == 2 * old));
        if old == 0 {
            self.reserve_nursery();
        }
        debug_assert!(len <= self.nursery_cap);
        self.nursery_keys.resize(len, 0);
        // SAFETY: `MaybeUninit` needs no initialisation; the capacity is `nursery_cap` >= `len`.
        unsafe { self.nursery_values.set_len(len) };
        self.nursery_mask = len - 1;
        // A resident of slot `i` (its residue modulo `old`) stays there or moves to `i + old`,
        // which is empty: residents have distinct residues modulo `old`.
        for i in 0..old {
            let k = self.nursery_keys[i];
            if k != 0 && self.slot(k) != i {
                let v = self.nursery_values[i];
                self.nursery_keys[i + old] = k;
                self.nursery_values[i + old] = v;
                self.nursery_keys[i] = 0;
            }
        }
    }

    /// Reserves the ring's buffers at their largest size, or at the largest power of two that
    /// can be had (down to `NURSERY_MIN`): under an address-space limit (`ulimit -v`, common on
    /// batch systems) the 640 MiB of `NURSERY_MAX` may be refused while the live set itself fits.
    /// A smaller ring moves more blocks to the table; the figures are the same.
    fn reserve_nursery(&mut self) {
        // Under a limit, a quarter of what is left: the table, the decoded chunks and the other
        // threads need the rest.
        let slot_bytes = std::mem::size_of::<u64>() + std::mem::size_of::<V>();
        let budget = huge_pages::address_space_left().map_or(usize::MAX, |left| left / 4);
        let mut cap = NURSERY_MAX;
        while cap > NURSERY_MIN && cap * slot_bytes > budget {
            cap /= 2;
        }
        loop {
            let keys = huge_pages::try_vec_with_capacity(cap);
            let values = keys
                .as_ref()
                .and_then(|_| huge_pages::try_vec_with_capacity(cap));
            if let (Some(keys), Some(values)) = (keys, values) {
                self.nursery_keys = keys;
                self.nursery_values = values;
                self.nursery_cap = cap;
                return;
            }
            if cap == NURSERY_MIN {
                // Not even that: the ring's smallest size, allocated as any other buffer.
                self.nursery_keys = Vec::with_capacity(cap);
                self.nursery_values = Vec::with_capacity(cap);
                self.nursery_cap = cap;
                return;
            }
            cap /= 2;
        }
    }

    /// Hint that `key` will be looked up soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        if key & SYNTHETIC_BIT == 0 {
            self.table.prefetch(key);
        } else if !self.nursery_keys.is_empty() {
            let i = self.slot(key);
            prefetch_ptr(self.nursery_values.as_ptr().wrapping_add(i));
            // The nursery's keys are read in seq order (a cached line): the resident of the
            // slot tells what the event will touch in the table. An allocation moves it there
            // (python3: 5 M of 13.6 M blocks), an end of an older block looks the key up.
            let resident = self.key_at(i);
            if resident != 0 && resident != key {
                self.table.prefetch(resident);
            }
            if key <= self.max_moved {
                self.table.prefetch(key);
            }
        }
    }

    /// Insert or replace; returns the value that was there. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if key & SYNTHETIC_BIT == 0 {
            return self.table.insert(key, value);
        }
        if self.nursery_keys.is_empty() {
            self.resize_nursery(NURSERY_MIN);
        }
        let i = self.slot(key);
        let resident = self.key_at(i);
        if resident == key {
            let old = self.value_at(i);
            self.set_value(i, value);
            return Some(old);
        }
        let replaced = if key <= self.max_moved {
            self.table.remove(key)
        } else {
            None
        };
        if resident != 0 {
            // Still live a whole ring later: old enough for the table.
            self.table.insert(resident, self.value_at(i));
            self.max_moved = self.max_moved.max(resident);
        } else {
            self.in_nursery += 1;
        }
        self.set_key(i, key);
        self.set_value(i, value);
        let len = self.nursery_keys.len();
        // See the module doc: a sixteenth moved 9 times fewer python3 blocks than a quarter.
        if resident != 0 && self.table.len() > len / 16 && len < self.nursery_cap {
            self.resize_nursery(2 * len);
        }
        replaced
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key & SYNTHETIC_BIT == 0 {
            return self.table.remove(key);
        }
        if !self.nursery_keys.is_empty() {
            let i = self.slot(key);
            if self.key_at(i) == key {
                let value = self.value_at(i);
                self.set_key(i, 0);
                self.in_nursery -= 1;
                return Some(value);
            }
        }
        if key <= self.max_moved {
            self.table.remove(key)
        } else {
            None
        }
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        let nursery = self
            .nursery_keys
            .iter()
            .zip(&self.nursery_values)
            .filter(|(k, _)| **k != 0)
            // SAFETY: a slot with a key holds its value.
            .map(|(_, v)| unsafe { v.assume_init_ref() });
        self.table.values().chain(nursery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Block ids mostly in seq order, some repeated or out of order (as a damaged trace may
    /// have them), real addresses mixed in: the set answers like a map, through many moves.
    #[test]
    fn behaves_like_a_map_with_block_ids_and_addresses() {
        let mut s: LiveSet<u64> = LiveSet::with_capacity(4);
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut live_ids: Vec<u64> = Vec::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut seq = 0u64;
        for i in 0..600_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let (insert, key) = match rng % 16 {
                // A new block id; 1 in 4 lives long (so the ring comes round and moves it).
                0..=6 => {
                    seq += 1 + (rng >> 40) % 3;
                    let id = SYNTHETIC_BIT | seq;
                    if rng >> 62 == 0 {
                        live_ids.push(id);
                    }
                    (true, id)
                }
                // The end of a young block, or of an old one.
                7..=10 => (false, SYNTHETIC_BIT | seq.saturating_sub((rng >> 20) % 40)),
                11 if !live_ids.is_empty() => {
                    let k = live_ids.swap_remove((rng >> 16) as usize % live_ids.len());
                    (false, k)
                }
                // A repeated or earlier id (damaged trace), at times the last one moved.
                12 | 13 => {
                    let id = if rng >> 61 == 0 && s.max_moved > 0 {
                        s.max_moved
                    } else {
                        SYNTHETIC_BIT | ((rng >> 20) % (seq + 1))
                    };
                    (rng % 16 == 12, id)
                }
                // Real addresses.
                14 => (true, 16 * (1 + (rng >> 20) % 5000)),
                _ => (false, 16 * (1 + (rng >> 20) % 5000)),
            };
            if insert {
                assert_eq!(s.insert(key, i), m.insert(key, i), "insert {key:#x}");
            } else {
                assert_eq!(s.remove(key), m.remove(&key), "remove {key:#x}");
            }
            assert_eq!(s.len(), m.len());
        }
        assert!(
            s.max_moved > 0,
            "the ring came round: blocks moved to the table"
        );
        let mut a: Vec<u64> = s.values().copied().collect();
        let mut b: Vec<u64> = m.values().copied().collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }

    /// Blocks that outlive the ring in large numbers make it grow; it answers like a map
    /// throughout, with ids freed in and out of allocation order across the growths.
    #[test]
    fn the_nursery_grows_when_many_blocks_outlive_it() {
        let mut s: LiveSet<u64> = LiveSet::with_capacity(4);
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut live: std::collections::VecDeque<u64> = Default::default();
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for seq in 1..1_500_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let id = SYNTHETIC_BIT | seq;
            assert_eq!(s.insert(id, seq), m.insert(id, seq));
            live.push_back(id);
            // 300 Ki blocks live: the oldest die (a generation), now and then a random one.
            if live.len() > 300_000 {
                let k = if rng.is_multiple_of(8) {
                    let i = (rng >> 8) as usize % live.len();
                    live.swap_remove_back(i).unwrap()
                } else {
                    live.pop_front().unwrap()
                };
                assert_eq!(s.remove(k), m.remove(&k), "remove {k:#x}");
            }
        }
        assert_eq!(s.len(), m.len());
        assert!(
            s.nursery_keys.len() >= 1 << 18,
            "the ring grew to {} slots",
            s.nursery_keys.len()
        );
        assert!(s.nursery_keys.len() <= NURSERY_MAX);
        for (k, v) in &m {
            assert_eq!(s.remove(*k), Some(*v));
        }
        assert!(s.is_empty());
    }
}
