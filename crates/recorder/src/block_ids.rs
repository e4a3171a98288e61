//! Block ids for traces without addresses (`ChunkEncoder::without_addresses`): the map from each
//! live block's real address to the seq of the event that allocated it, kept across chunks by
//! each image's batch, which feeds the encoder in seq order.
//!
//! Two levels. Most blocks are freed soon after their allocation, and an allocator hands the
//! address just freed to the next allocation of its size (glibc's tcache: last in, first out),
//! so a small direct-mapped front (a slot per hash of the address) takes the common pair, the
//! free that empties a slot and the malloc that fills it again, without the table's probe and
//! backward-shift delete. The blocks a newer one pushes out of their slot go to the open-
//! addressing table behind it (at most half full: 32 to 64 bytes per live block). An address is
//! in one of them at most, and each front slot counts the table's entries whose address hashes
//! to it, so that a miss in the front looks in the table only when it may hold the address.
//!
//! Once the live set outgrows the caches the front is emptied into the table and set aside:
//! there every eviction into the table would be a cache miss the drain cannot prefetch, where
//! the table alone has its slots prefetched ahead (`prefetch`). It comes back when the live set
//! is small again.
use blockmap::LiveTable;
use trace::{synthetic_address, Op};

/// Front slots: 64 KiB of (address, seq) and 8 KiB of counts per image. With 1024 live blocks
/// (bench/programs/thread-churn.c's realloc on 4 threads) a 1024-slot front pushed out so many
/// that it cost more than the table alone (the drain harness: 236 instructions per event
/// against 225); at 4096, 212. Churn's few live blocks keep a handful of its lines in the cache.
const FRONT_BITS: u32 = 12;
const FRONT_SLOTS: usize = 1 << FRONT_BITS;

/// The front is set aside once the table holds more blocks than this (a core's caches' worth,
/// where prefetching starts to pay) ...
const LARGE: usize = 1 << 15;
/// ... and comes back once it holds fewer than this (a gap, so that a live set hovering around
/// one bound does not move the blocks back and forth).
const SMALL: usize = 1 << 13;

/// Odd constant with well-spread bits (2^64 / golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// The front slot of an address: the top bits of a product, which depend on all the bits
/// below them, so that the 4 low bits always 0 of a 16-byte-aligned block cost nothing.
#[inline(always)]
fn front_slot(addr: u64) -> usize {
    (addr.wrapping_mul(K) >> (64 - FRONT_BITS)) as usize
}

#[derive(Clone, Copy, Default)]
struct FrontEntry {
    /// 0: empty (a NULL result is never live).
    addr: u64,
    seq: u64,
}

pub struct BlockIds {
    front: Box<[FrontEntry; FRONT_SLOTS]>,
    /// Per front slot: the table's entries whose address hashes to it (below 2^16: the table
    /// holds at most `LARGE + 1` entries while the front is used).
    behind: Box<[u16; FRONT_SLOTS]>,
    table: LiveTable<u64>,
    /// False once the live set outgrew the caches: the table alone holds every block, the front
    /// is empty and its counts are 1 (`set_front_aside`).
    front_used: bool,
    /// `lost` of the tables replaced by `use_front_again`.
    lost_before: u64,
}

impl Default for BlockIds {
    fn default() -> Self {
        BlockIds {
            front: Box::new([FrontEntry::default(); FRONT_SLOTS]),
            behind: Box::new([0; FRONT_SLOTS]),
            table: LiveTable::with_capacity(1 << 12),
            front_used: true,
            lost_before: 0,
        }
    }
}

impl BlockIds {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hint that the block at `addr` will be rewritten soon (its slot is fetched into the cache):
    /// with millions of live blocks, each lookup is a cache miss otherwise.
    #[inline(always)]
    pub fn prefetch(&self, addr: u64) {
        self.table.prefetch(addr);
    }

    /// Rewrites the addresses of one event (events in seq order): a new block becomes
    /// `synthetic_address(seq)`; a released block becomes its allocation's id, or keeps its real
    /// address when it was not allocated in the trace (before tracing began, or a double free).
    #[inline(always)]
    pub fn rewrite(&mut self, op: Op, seq: u64, addr: &mut u64, old_addr: &mut u64) {
        if op.is_free() {
            self.release(addr);
            return;
        }
        if op.is_realloc() {
            self.release(old_addr);
        }
        if *addr != 0 {
            self.insert(*addr, seq);
            *addr = synthetic_address(seq);
        }
    }

    #[inline(always)]
    fn release(&mut self, addr: &mut u64) {
        if *addr != 0 {
            if let Some(seq) = self.remove(*addr) {
                *addr = synthetic_address(seq);
            }
        }
    }

    /// The block at `addr` (not 0) is the one allocated by the event `seq`, replacing any block
    /// the map had there (its free was missed).
    #[inline(always)]
    fn insert(&mut self, addr: u64, seq: u64) {
        let i = front_slot(addr);
        if self.front[i].addr == 0 && self.behind[i] == 0 {
            self.front[i] = FrontEntry { addr, seq };
            return;
        }
        self.insert_past_the_front(i, addr, seq);
    }

    /// `insert` when front slot `i` is taken or the table may hold `addr`: the new block takes
    /// the slot (the likelier of the two to be freed soon), the one it held goes to the table.
    #[inline(never)]
    fn insert_past_the_front(&mut self, i: usize, addr: u64, seq: u64) {
        if !self.front_used {
            self.table.insert(addr, seq);
            return;
        }
        let held = self.front[i];
        if held.addr != addr {
            if self.behind[i] != 0 && self.table.remove(addr).is_some() {
                self.behind[i] -= 1;
            }
            if held.addr != 0 {
                self.push_behind(i, held);
            }
        }
        self.front[i] = FrontEntry { addr, seq };
        if self.table.len() > LARGE {
            self.set_front_aside();
        }
    }

    /// Moves the entry of front slot `i` to the table, counted there unless the table had no
    /// memory for it (`lost`).
    fn push_behind(&mut self, i: usize, entry: FrontEntry) {
        let lost = self.table.lost();
        self.table.insert(entry.addr, entry.seq);
        if self.table.lost() == lost {
            self.behind[i] += 1;
        }
    }

    /// The seq that allocated the block at `addr` (not 0), taken out of the map; `None` when the
    /// map has no block there.
    #[inline(always)]
    fn remove(&mut self, addr: u64) -> Option<u64> {
        debug_assert_ne!(addr, 0);
        let i = front_slot(addr);
        let entry = &mut self.front[i];
        if entry.addr == addr {
            entry.addr = 0;
            return Some(entry.seq);
        }
        if self.behind[i] == 0 {
            return None;
        }
        self.remove_behind(i, addr)
    }

    #[inline(never)]
    fn remove_behind(&mut self, i: usize, addr: u64) -> Option<u64> {
        let seq = self.table.remove(addr);
        if !self.front_used {
            if self.table.len() < SMALL {
                self.use_front_again();
            }
        } else if seq.is_some() {
            self.behind[i] -= 1;
        }
        seq
    }

    /// The live set outgrew the caches: every block goes to the table. The front stays empty
    /// and every count non-zero, so that `insert` and `remove` take their slow paths, which go
    /// to the table alone.
    #[cold]
    fn set_front_aside(&mut self) {
        for i in 0..FRONT_SLOTS {
            let entry = std::mem::take(&mut self.front[i]);
            if entry.addr != 0 {
                self.table.insert(entry.addr, entry.seq);
            }
        }
        self.behind.fill(1);
        self.front_used = false;
    }

    /// The live set is small again: the front is used from now on (empty), and the table, as
    /// large as the live set's peak made it, is built again at the size of what it holds (room
    /// for all of it: nothing refused), so that the walk of its slots is paid for by the
    /// insertions that grew it.
    #[cold]
    fn use_front_again(&mut self) {
        let mut table = LiveTable::with_capacity(self.table.len().max(1 << 12));
        self.behind.fill(0);
        for (addr, &seq) in self.table.iter() {
            table.insert(addr, seq);
            self.behind[front_slot(addr)] += 1;
        }
        let old = std::mem::replace(&mut self.table, table);
        self.lost_before += old.lost();
        self.front_used = true;
    }

    /// Blocks left without an id because the map could not grow (out of memory, see
    /// `LiveTable::lost`): their releases keep the real address. With the front, the block
    /// refused is the one a newer block pushed out of its slot, not the newer one.
    pub fn lost(&self) -> u64 {
        self.lost_before + self.table.lost()
    }

    /// True while the front is set aside (the live set outgrew a core's caches, `LARGE`), so
    /// that prefetching the table's slots pays: below, a prefetch costs more than the lookup it
    /// prepares, and the front takes most lookups.
    pub fn worth_prefetching(&self) -> bool {
        !self.front_used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The map as it was before the front: the table alone. The ids it hands out are the ones
    /// the traces have; the front must not change one of them.
    #[derive(Default)]
    struct TableOnly(Option<LiveTable<u64>>);

    impl TableOnly {
        fn rewrite(&mut self, op: Op, seq: u64, addr: &mut u64, old_addr: &mut u64) {
            let live = self
                .0
                .get_or_insert_with(|| LiveTable::with_capacity(1 << 12));
            let mut release = |a: &mut u64| {
                if let Some(seq) = live.remove(*a) {
                    *a = synthetic_address(seq);
                }
            };
            if op.is_free() {
                release(addr);
                return;
            }
            if op.is_realloc() {
                release(old_addr);
            }
            if *addr != 0 {
                live.insert(*addr, seq);
                *addr = synthetic_address(seq);
            }
        }
    }

    /// One call on a pool of addresses: an index into it, or `None` for NULL.
    #[derive(Debug, Clone, Copy)]
    enum Call {
        Malloc(Option<u16>),
        Free(Option<u16>),
        Realloc(Option<u16>, Option<u16>),
    }

    impl Call {
        /// (op, addr, old_addr) with the pool's addresses: 16-byte aligned, `spacing` apart.
        fn record(self, spacing: u64) -> (Op, u64, u64) {
            let at = |i: Option<u16>| i.map_or(0, |i| 0x5555_0000_0000 + spacing * u64::from(i));
            match self {
                Call::Malloc(a) => (Op::Malloc, at(a), 0),
                Call::Free(a) => (Op::Free, at(a), 0),
                Call::Realloc(new, old) => (Op::Realloc, at(new), at(old)),
            }
        }
    }

    /// Feeds both maps the same records; every event's rewritten addresses must agree.
    fn same_ids(ids: &mut BlockIds, calls: impl IntoIterator<Item = (Op, u64, u64)>) {
        let mut old = TableOnly::default();
        for (seq, (op, addr, old_addr)) in calls.into_iter().enumerate() {
            let seq = seq as u64;
            let (mut a, mut o) = (addr, old_addr);
            let (mut want_a, mut want_o) = (addr, old_addr);
            ids.rewrite(op, seq, &mut a, &mut o);
            old.rewrite(op, seq, &mut want_a, &mut want_o);
            assert_eq!(
                (a, o),
                (want_a, want_o),
                "{op:?} {addr:#x} {old_addr:#x} at seq {seq}"
            );
        }
        assert_eq!(ids.lost(), 0);
    }

    fn pool_index(pool: u16) -> impl Strategy<Value = Option<u16>> {
        prop_oneof![15 => (0..pool).prop_map(Some), 1 => Just(None)]
    }

    /// Frees of live blocks and of unknown ones, double frees, mallocs over a live block (a
    /// missed free), reallocs in place, moving, failing or from NULL, on pools small enough
    /// for an address to come back often and for the front's slots to collide.
    fn calls() -> impl Strategy<Value = (u64, Vec<Call>)> {
        (1u16..3000, prop_oneof![Just(16u64), Just(48), Just(4096)]).prop_flat_map(
            |(pool, spacing)| {
                let call = prop_oneof![
                    4 => pool_index(pool).prop_map(Call::Malloc),
                    4 => pool_index(pool).prop_map(Call::Free),
                    1 => (pool_index(pool), pool_index(pool))
                        .prop_map(|(new, old)| Call::Realloc(new, old)),
                    1 => pool_index(pool).prop_map(|a| Call::Realloc(a, a)),
                ];
                (Just(spacing), prop::collection::vec(call, 0..4000))
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn the_front_gives_the_ids_of_the_table_alone((spacing, calls) in calls()) {
            same_ids(&mut BlockIds::new(), calls.iter().map(|c| c.record(spacing)));
        }
    }

    /// A live set that outgrows the caches twice and shrinks back (the front set aside and
    /// used again, the table rebuilt), blocks freed soon and late, reused last in first out.
    #[test]
    fn the_ids_stay_the_same_as_the_live_set_grows_and_shrinks() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut calls = Vec::new();
        let mut live: Vec<u64> = Vec::new();
        let mut freed: Vec<u64> = Vec::new();
        let mut fresh = 0x7f00_0000_0000u64;
        for target in [40_000usize, 2_000, 45_000, 100] {
            while live.len() != target {
                let r = next();
                let grow = live.len() < target;
                if (grow && r % 4 != 0) || (!grow && r % 4 == 0) || live.is_empty() {
                    let addr = freed.pop().unwrap_or_else(|| {
                        fresh += 16 * (1 + r % 33);
                        fresh
                    });
                    live.push(addr);
                    calls.push((Op::Malloc, addr, 0));
                } else {
                    // Mostly the newest block (freed soon), sometimes any.
                    let i = if r % 3 == 0 {
                        (r >> 8) as usize % live.len()
                    } else {
                        live.len() - 1
                    };
                    let addr = live.swap_remove(i);
                    freed.push(addr);
                    calls.push((Op::Free, addr, 0));
                }
            }
        }
        let mut ids = BlockIds::new();
        let mut turns = Vec::new();
        let mut old = TableOnly::default();
        for (seq, &(op, addr, old_addr)) in calls.iter().enumerate() {
            let (mut a, mut o, mut want_a, mut want_o) = (addr, old_addr, addr, old_addr);
            ids.rewrite(op, seq as u64, &mut a, &mut o);
            old.rewrite(op, seq as u64, &mut want_a, &mut want_o);
            assert_eq!((a, o), (want_a, want_o), "seq {seq}");
            if turns.last() != Some(&ids.front_used) {
                turns.push(ids.front_used);
            }
        }
        assert_eq!(
            turns,
            [true, false, true, false, true],
            "the front set aside twice"
        );
    }
}
