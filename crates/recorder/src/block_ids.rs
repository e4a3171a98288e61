//! Block ids for traces without addresses (`ChunkEncoder::without_addresses`): the map from each
//! live block's real address to the seq of the event that allocated it, kept across chunks by
//! each image's batch, which feeds the encoder in seq order. An open-addressing table kept at most
//! half full: 32 to 64 bytes per live block.
use blockmap::LiveTable;
use trace::{synthetic_address, Op};

pub struct BlockIds {
    live: LiveTable<u64>,
}

impl Default for BlockIds {
    fn default() -> Self {
        BlockIds {
            live: LiveTable::with_capacity(1 << 12),
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
        self.live.prefetch(addr);
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
            self.live.insert(*addr, seq);
            *addr = synthetic_address(seq);
        }
    }

    #[inline]
    fn release(&mut self, addr: &mut u64) {
        if *addr != 0 {
            if let Some(seq) = self.live.remove(*addr) {
                *addr = synthetic_address(seq);
            }
        }
    }

    /// Blocks left without an id because the map could not grow (out of memory, see
    /// `LiveTable::lost`): their releases keep the real address.
    pub fn lost(&self) -> u64 {
        self.live.lost()
    }

    /// True when the map has outgrown a core's caches (about 32 Ki blocks), so that prefetching
    /// pays: below, a prefetch costs more than the lookup it prepares.
    pub fn worth_prefetching(&self) -> bool {
        self.live.len() > 1 << 15
    }
}
