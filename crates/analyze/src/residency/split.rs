//! The split of one residency reading: each resident heap page is held by live blocks, only by
//! free memory, by the allocator's own metadata, or lies outside the memory the blocks use
//! (docs/memory-metrics.md, "Heap residency").
use crate::hash::FastMap;

use super::blocks::HeapBlocks;
use super::heap_pages::HeapPages;

/// Figures of one reading, before the sites are named.
#[derive(Debug, Default, Clone)]
pub struct Split {
    pub parts: Parts,
    /// Per allocation stack id.
    pub sites: FastMap<u32, SiteParts>,
    /// Per heap mapping, in address order.
    pub regions: Vec<Parts>,
}

/// The four parts of resident heap bytes, and the live bytes beside them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Parts {
    /// Resident bytes of the mappings (`live_blocks + free_only + metadata + outside`).
    pub resident: u64,
    /// (a) Pages with bytes of a live block.
    pub live_blocks: u64,
    /// (b) Pages without a live block, where some block was freed.
    pub free_only: u64,
    /// (c) Pages of a mapping the blocks use, where no traced block ever lay.
    pub metadata: u64,
    /// (d) Pages of mappings where no traced block ever lay.
    pub outside: u64,
    /// Requested bytes of the live blocks.
    pub live_bytes: u64,
    /// Those of them on pages that are not resident (allocated and never written, or swapped).
    pub live_not_resident: u64,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SiteParts {
    /// Its share of (a): each page's bytes apportioned to the live blocks on it by their bytes
    /// there.
    pub resident: f64,
    pub live_bytes: u64,
    pub live_not_resident: u64,
    /// (b) pages whose last freed block it allocated.
    pub free_left: u64,
}

/// Splits the resident pages of `pages` by what `blocks` (the state of the events below the
/// reading's seq) places on them.
pub fn split(blocks: &HeapBlocks, pages: &HeapPages) -> Split {
    let page_size = pages.page_size;
    let mut out = Split {
        regions: vec![Parts::default(); pages.mapping_count()],
        ..Split::default()
    };
    // Mappings some traced block lies or lay in: the rest is (d).
    let mut used = vec![false; pages.mapping_count()];
    // Live bytes on each resident page.
    let mut live_on: FastMap<u64, u64> = FastMap::default();
    for (address, block) in blocks.live() {
        let end = address.saturating_add(block.size);
        let mut resident = 0;
        pages.for_resident_pages(address, end, |page, bytes| {
            *live_on.entry(page).or_default() += bytes;
            resident += bytes;
        });
        if let Some(m) = pages.mapping_of(address) {
            used[m] = true;
            out.regions[m].live_bytes += block.size;
            out.regions[m].live_not_resident += block.size - resident;
        }
        let site = out.sites.entry(block.stack).or_default();
        site.live_bytes += block.size;
        site.live_not_resident += block.size - resident;
        out.parts.live_bytes += block.size;
        out.parts.live_not_resident += block.size - resident;
    }
    for (address, block) in blocks.live() {
        let site = out.sites.entry(block.stack).or_default();
        pages.for_resident_pages(
            address,
            address.saturating_add(block.size),
            |page, bytes| {
                site.resident += page_size as f64 * bytes as f64 / live_on[&page] as f64;
            },
        );
    }
    for page in blocks.freed_pages() {
        if let Some(m) = pages.mapping_of(page) {
            used[m] = true;
        }
    }
    for &(start, end) in pages.runs() {
        let Some(m) = pages.mapping_of(start) else {
            continue;
        };
        let region = &mut out.regions[m];
        let mut page = start;
        while page < end {
            region.resident += page_size;
            if live_on.contains_key(&page) {
                region.live_blocks += page_size;
            } else if let Some(stack) = blocks.last_freed_on(page) {
                region.free_only += page_size;
                out.sites.entry(stack).or_default().free_left += page_size;
            } else if used[m] {
                region.metadata += page_size;
            } else {
                region.outside += page_size;
            }
            page += page_size;
        }
    }
    for r in &out.regions {
        out.parts.resident += r.resident;
        out.parts.live_blocks += r.live_blocks;
        out.parts.free_only += r.free_only;
        out.parts.metadata += r.metadata;
        out.parts.outside += r.outside;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::{Event, Op, Residency, ResidentMapping};

    fn malloc(addr: u64, size: u64, stack: u32) -> Event {
        Event {
            seq: 0,
            t_ns: 0,
            tid: 1,
            stack,
            op: Op::Malloc,
            addr,
            size,
            old_addr: 0,
        }
    }

    #[test]
    fn pages_go_to_their_part_and_the_parts_sum_to_the_resident_bytes() {
        let page = 0x1000;
        // Mapping A (16 pages, all resident) holds blocks; mapping B (4 pages, 2 resident) none.
        let reading = Residency {
            seq: 0,
            t_ns: 0,
            page_size: page,
            mappings: vec![
                ResidentMapping {
                    start: 0x100000,
                    end: 0x110000,
                    runs: vec![(0x100000, 0x10c000)],
                },
                ResidentMapping {
                    start: 0x200000,
                    end: 0x204000,
                    runs: vec![(0x200000, 0x202000)],
                },
            ],
        };
        let mut blocks = HeapBlocks::new(page);
        // Page 1: two blocks of stacks 1 and 2, 0x300 and 0x100 bytes: 3/4 and 1/4 of the page.
        blocks.on_event(&malloc(0x101000, 0x300, 1));
        blocks.on_event(&malloc(0x101400, 0x100, 2));
        // Pages 2-3: a block of stack 3, freed: free-only, left by stack 3.
        blocks.on_event(&malloc(0x102010, 0x1ff0, 3));
        blocks.on_event(&Event {
            op: Op::Free,
            size: 0,
            ..malloc(0x102010, 0, 0)
        });
        // Pages 12-15 (not resident): a block of stack 4, never written.
        blocks.on_event(&malloc(0x10c000, 0x4000, 4));
        let s = split(&blocks, &HeapPages::new(&reading));
        let p = s.parts;
        assert_eq!(p.resident, 14 * page);
        assert_eq!(p.live_blocks, page);
        assert_eq!(p.free_only, 2 * page);
        // Mapping A's other 9 resident pages: no block ever lay there.
        assert_eq!(p.metadata, 9 * page);
        assert_eq!(p.outside, 2 * page);
        assert_eq!(
            p.live_blocks + p.free_only + p.metadata + p.outside,
            p.resident
        );
        assert_eq!(p.live_bytes, 0x300 + 0x100 + 0x4000);
        assert_eq!(p.live_not_resident, 0x4000);
        assert_eq!(s.sites[&1].resident, 0x1000 as f64 * 0.75);
        assert_eq!(s.sites[&2].resident, 0x1000 as f64 * 0.25);
        assert_eq!(s.sites[&3].free_left, 2 * page);
        assert_eq!(s.sites[&4].live_not_resident, 0x4000);
        assert_eq!(s.regions[1].outside, 2 * page);
    }
}
