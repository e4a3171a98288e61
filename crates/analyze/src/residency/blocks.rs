//! The heap's blocks as the events place them: the live blocks by address, and for each page a
//! freed block lay on, the stack of the last one freed there.
//!
//! An ordered map rather than the analysis's live set (`LiveBlocks`, a hash table keyed by
//! address without the allocation's stack): a reading needs the blocks in address order, page
//! by page, and the stack of each.
use std::collections::BTreeMap;

use trace::{Event, SYNTHETIC_BIT};

use crate::hash::FastMap;

/// A live block: its requested bytes and the stack id of its allocation (0: none recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub size: u64,
    pub stack: u32,
}

/// The most pages a free marks: 16 GiB of 4 KiB pages. The pages of a larger block past it count
/// as metadata once freed.
const MAX_PAGES_PER_FREE: u64 = 1 << 22;

/// A `Block` as the map keeps it: 12 bytes aligned to 4 rather than 16 aligned to 8, for 20
/// bytes a live block in the tree's nodes instead of 24 (1.8 M live blocks on a python3 trace).
#[derive(Debug, Clone, Copy)]
struct Stored([u32; 3]);

impl From<Block> for Stored {
    fn from(b: Block) -> Stored {
        Stored([b.size as u32, (b.size >> 32) as u32, b.stack])
    }
}

impl From<Stored> for Block {
    fn from(Stored([low, high, stack]): Stored) -> Block {
        Block {
            size: u64::from(high) << 32 | u64::from(low),
            stack,
        }
    }
}

#[derive(Clone)]
pub struct HeapBlocks {
    page_size: u64,
    live: BTreeMap<u64, Stored>,
    /// Page address -> stack id of the last block freed with bytes on that page.
    last_freed: FastMap<u64, u32>,
}

impl HeapBlocks {
    pub fn new(page_size: u64) -> HeapBlocks {
        HeapBlocks {
            page_size: page_size.max(1),
            live: BTreeMap::new(),
            last_freed: FastMap::default(),
        }
    }

    /// Applies one event: an allocation adds its block, a free removes it and marks its pages,
    /// a realloc does both (its new block gets the realloc's stack); a failed realloc (NULL for a
    /// size above 0) leaves the old block live.
    pub fn on_event(&mut self, e: &Event) {
        let failed_realloc = e.op.is_realloc() && e.addr == 0 && e.size > 0;
        if failed_realloc {
            return;
        }
        if e.op.is_free() || e.op.is_realloc() {
            let old = if e.op.is_realloc() {
                e.old_addr
            } else {
                e.addr
            };
            self.free(old);
        }
        if !e.op.is_free() && e.addr != 0 && e.addr & SYNTHETIC_BIT == 0 {
            let block = Block {
                size: e.size,
                stack: e.stack,
            };
            self.live.insert(e.addr, block.into());
        }
    }

    fn free(&mut self, address: u64) {
        let Some(block) = self.live.remove(&address).map(Block::from) else {
            return; // free(NULL), or a block allocated before tracing began
        };
        self.mark_freed(address, block);
    }

    /// The live blocks are `blocks` (any order): for a caller that follows them itself and
    /// tells of each free (`mark_freed`) instead of each event.
    pub fn set_live(&mut self, blocks: impl IntoIterator<Item = (u64, Block)>) {
        self.live = blocks.into_iter().map(|(a, b)| (a, b.into())).collect();
    }

    /// `block`, at `address`, was freed: its pages' last freed block is its.
    pub fn mark_freed(&mut self, address: u64, block: Block) {
        // At most MAX_PAGES_PER_FREE pages: a size read from a damaged trace cannot make this
        // loop for ever.
        let end = address.saturating_add(block.size.max(1));
        let first = address - address % self.page_size;
        let pages = (end - first)
            .div_ceil(self.page_size)
            .min(MAX_PAGES_PER_FREE);
        for i in 0..pages {
            self.last_freed
                .insert(first + i * self.page_size, block.stack);
        }
    }

    /// The live blocks in address order.
    pub fn live(&self) -> impl Iterator<Item = (u64, Block)> + '_ {
        self.live.iter().map(|(a, b)| (*a, Block::from(*b)))
    }

    /// The stack of the last block freed on the page at `page`, if any block ever was.
    pub fn last_freed_on(&self, page: u64) -> Option<u32> {
        self.last_freed.get(&page).copied()
    }

    /// Pages where some block was freed (in no order).
    pub fn freed_pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.last_freed.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::Op;

    fn ev(op: Op, addr: u64, size: u64, old_addr: u64, stack: u32) -> Event {
        Event {
            seq: 0,
            t_ns: 0,
            tid: 1,
            stack,
            op,
            addr,
            size,
            old_addr,
        }
    }

    #[test]
    fn frees_mark_their_pages_with_the_allocations_stack() {
        let mut blocks = HeapBlocks::new(0x1000);
        blocks.on_event(&ev(Op::Malloc, 0x10f00, 0x200, 0, 7));
        blocks.on_event(&ev(Op::Malloc, 0x20000, 16, 0, 8));
        blocks.on_event(&ev(Op::Free, 0x10f00, 0, 0, 0));
        assert_eq!(blocks.last_freed_on(0x10000), Some(7));
        assert_eq!(blocks.last_freed_on(0x11000), Some(7));
        assert_eq!(blocks.last_freed_on(0x12000), None);
        // A realloc frees the old block and makes a new one with its own stack.
        blocks.on_event(&ev(Op::Realloc, 0x30000, 64, 0x20000, 9));
        assert_eq!(blocks.last_freed_on(0x20000), Some(8));
        // A failed realloc leaves its block as it was.
        blocks.on_event(&ev(Op::Realloc, 0, 1 << 40, 0x30000, 10));
        let live: Vec<_> = blocks.live().collect();
        assert_eq!(live, vec![(0x30000, Block { size: 64, stack: 9 })]);
    }

    /// The packed form keeps every bit of a size above 4 GiB and the stack.
    #[test]
    fn a_stored_block_is_the_block() {
        for block in [
            Block {
                size: 0x1_2345_6789,
                stack: u32::MAX,
            },
            Block {
                size: u64::MAX,
                stack: 0,
            },
            Block { size: 24, stack: 7 },
        ] {
            assert_eq!(Block::from(Stored::from(block)), block);
        }
    }
}
