//! The live set of the pass: the open-addressing `LiveTable` (in shards, `ShardedTable`), with pages in front of it for the
//! block ids of traces recorded without addresses.
//!
//! A real address comes back again and again (allocators reuse the block just freed), so its
//! table slot stays in the cache. A block id (`2^63 | seq`) is never reused: each allocation
//! would touch a new random slot, and the pass ran 60 % slower per live-set operation on a cc1
//! trace without addresses than with them. But ids arrive in seq order, and a program frees most
//! of its blocks young, or whole generations of them in creation order (python3). So block ids
//! live in pages of 4096 consecutive ids: a dense array of values indexed by the id's offset,
//! with a bitmap of the live ones, written and read in order, found without hashing and without
//! storing the key.
//!
//! Memory follows the live blocks, not the ids: a page the allocations have moved past
//! (sealed) that holds fewer than `KEEP_AT_LEAST` live blocks moves them to the table and is
//! freed, as is a page `MAX_PAGES_BEHIND` pages behind the newest. A kept page costs at most
//! 64 KiB / 512 = 128 bytes per live block (with 16-byte values); a page of blocks that all
//! live (half of a program's calls are frees) about 32. The ring this replaces (ids modulo
//! its length, growing while the table held more than a sixteenth of its slots) reached 8-16 Mi
//! slots of 40 bytes on python3 traces whatever the live set: 215 bytes per live block.
//!
//! Same semantics as a map, also for ids out of order, repeated or far apart (damaged or crafted
//! traces): an id whose page is open is in the page, any other in the table. A page opens only
//! ahead of every page seen, so no id of it can be in the table.
use std::collections::VecDeque;

use blockmap::live_table::prefetch_ptr;
use blockmap::ShardedTable;
use trace::SYNTHETIC_BIT;

/// Block ids per page (a power of two).
const PAGE_BITS: u32 = 12;
const PAGE: usize = 1 << PAGE_BITS;
/// A sealed page with fewer live blocks moves them to the table and is freed.
const KEEP_AT_LEAST: u32 = 512;
/// Pages further behind the newest are moved to the table whatever they hold: the list of pages
/// stays bounded (8 bytes per 4096 ids) however long the trace.
const MAX_PAGES_BEHIND: usize = 1 << 16;

struct Page<V> {
    /// Bit `off` set: the id at offset `off` is live.
    bits: [u64; PAGE / 64],
    count: u32,
    values: Vec<V>,
}

impl<V: Copy + Default> Page<V> {
    /// `None` when its memory cannot be had: its ids then go to the table.
    fn new() -> Option<Box<Self>> {
        let mut values = Vec::new();
        values.try_reserve_exact(PAGE).ok()?;
        values.resize(PAGE, V::default());
        Some(Box::new(Page {
            bits: [0; PAGE / 64],
            count: 0,
            values,
        }))
    }

    #[inline(always)]
    fn has(&self, off: usize) -> bool {
        self.bits[off / 64] & (1 << (off % 64)) != 0
    }

    /// Empties the page for reuse. Its values stay as they are: none is read before it is
    /// written again (`has` guards every read).
    fn reset(&mut self) {
        self.bits = [0; PAGE / 64];
        self.count = 0;
    }

    fn live(&self) -> impl Iterator<Item = (usize, &V)> + '_ {
        self.bits.iter().enumerate().flat_map(move |(w, &word)| {
            let mut word = word;
            std::iter::from_fn(move || {
                (word != 0).then(|| {
                    let off = w * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    (off, &self.values[off])
                })
            })
        })
    }
}

/// Where a block id lives.
enum Place {
    /// In `pages[i]`, at offset `off`.
    Page(usize, usize),
    Table,
    /// Beyond the newest page: nowhere.
    Ahead,
}

pub struct LiveSet<V> {
    table: ShardedTable<V>,
    /// `pages[i]` holds the ids of page number `first_page + i`; `None`: closed (its ids, if live,
    /// are in the table), as is every page before `first_page`.
    pages: VecDeque<Option<Box<Page<V>>>>,
    first_page: u64,
    in_pages: usize,
    /// The last page closed, emptied, for the next page opened: on a churn trace a page opens
    /// and closes every 4096 ids, and allocating and filling a new one was 4.5 % of the
    /// analysis's instructions (callgrind).
    spare: Option<Box<Page<V>>>,
}

impl<V: Copy + Default> LiveSet<V> {
    pub fn with_capacity(capacity: usize) -> Self {
        LiveSet {
            // Three quarters full at most: 32-64 bytes per block in the table (48-96 half full),
            // for probes about twice as long on a miss.
            table: ShardedTable::with_max_load(capacity, (3, 4)),
            pages: VecDeque::new(),
            first_page: 0,
            in_pages: 0,
            spare: None,
        }
    }

    pub fn len(&self) -> usize {
        self.table.len() + self.in_pages
    }

    /// Blocks refused for want of memory (`LiveTable::lost`): not 0 means the set is incomplete.
    pub fn lost(&self) -> u64 {
        self.table.lost()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline(always)]
    fn place(&self, key: u64) -> Place {
        let seq = key & !SYNTHETIC_BIT;
        let page = seq >> PAGE_BITS;
        let Some(i) = page.checked_sub(self.first_page) else {
            return Place::Table;
        };
        match self.pages.get(i as usize) {
            Some(Some(_)) => Place::Page(i as usize, seq as usize & (PAGE - 1)),
            Some(None) => Place::Table,
            None => Place::Ahead,
        }
    }

    #[inline(always)]
    fn page(&self, i: usize) -> &Page<V> {
        self.pages[i].as_deref().expect("an open page")
    }

    #[inline(always)]
    fn page_mut(&mut self, i: usize) -> &mut Page<V> {
        self.pages[i].as_deref_mut().expect("an open page")
    }

    /// Hint that `key` will be looked up soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        if key & SYNTHETIC_BIT == 0 {
            self.table.prefetch(key);
            return;
        }
        match self.place(key) {
            Place::Page(i, off) => prefetch_ptr(self.page(i).values.as_ptr().wrapping_add(off)),
            Place::Table => self.table.prefetch(key),
            Place::Ahead => {}
        }
    }

    /// Insert or replace; returns the value that was there. `key` must not be 0.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        if key & SYNTHETIC_BIT == 0 {
            return self.table.insert(key, value);
        }
        let place = match self.place(key) {
            Place::Ahead => self.open_page_of(key),
            p => p,
        };
        match place {
            Place::Page(i, off) => {
                let page = self.page_mut(i);
                if page.has(off) {
                    let old = std::mem::replace(&mut page.values[off], value);
                    return Some(old);
                }
                self.put(i, off, value);
                None
            }
            Place::Table | Place::Ahead => self.table.insert(key, value),
        }
    }

    /// Sets the value of a free offset of an open page.
    #[inline(always)]
    fn put(&mut self, i: usize, off: usize, value: V) {
        let page = self.page_mut(i);
        page.bits[off / 64] |= 1 << (off % 64);
        page.count += 1;
        page.values[off] = value;
        self.in_pages += 1;
    }

    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key & SYNTHETIC_BIT == 0 {
            return self.table.remove(key);
        }
        match self.place(key) {
            Place::Page(i, off) => {
                let page = self.page_mut(i);
                if !page.has(off) {
                    return None;
                }
                page.bits[off / 64] &= !(1 << (off % 64));
                page.count -= 1;
                let (value, count) = (page.values[off], page.count);
                self.in_pages -= 1;
                if count < KEEP_AT_LEAST && i + 1 < self.pages.len() {
                    self.close(i);
                }
                Some(value)
            }
            Place::Table => self.table.remove(key),
            Place::Ahead => None,
        }
    }

    /// Opens the page of `key`, ahead of the newest (or the first page): where the key goes.
    #[cold]
    fn open_page_of(&mut self, key: u64) -> Place {
        let page = (key & !SYNTHETIC_BIT) >> PAGE_BITS;
        if page < self.first_page + self.pages.len() as u64 {
            return Place::Table; // not ahead (callers only ask for ids ahead)
        }
        // The newest page is sealed: the allocations moved past it.
        if let Some(newest) = self.pages.len().checked_sub(1) {
            if self.pages[newest]
                .as_ref()
                .is_some_and(|p| p.count < KEEP_AT_LEAST)
            {
                self.close(newest);
            }
        }
        let end = self.first_page + self.pages.len() as u64;
        if page - end >= MAX_PAGES_BEHIND as u64 {
            // Every page kept would be too far behind the new one (a jump that only a damaged
            // or crafted trace makes): no run of empty pages for it.
            while !self.pages.is_empty() {
                self.close(0);
            }
        }
        if self.pages.is_empty() {
            self.first_page = page;
        }
        let end = self.first_page + self.pages.len() as u64;
        for _ in end..page {
            self.pages.push_back(None);
        }
        let new = self.spare.take().or_else(Page::new);
        let opened = new.is_some();
        self.pages.push_back(new);
        while self.pages.len() > MAX_PAGES_BEHIND {
            self.close(0);
        }
        self.trim();
        if opened {
            self.place(key)
        } else {
            Place::Table
        }
    }

    /// Moves the live blocks of page `i` to the table and frees it.
    #[cold]
    fn close(&mut self, i: usize) {
        if let Some(mut page) = self.pages[i].take() {
            let base = SYNTHETIC_BIT | ((self.first_page + i as u64) << PAGE_BITS);
            for (off, value) in page.live() {
                self.table.insert(base | off as u64, *value);
            }
            self.in_pages -= page.count as usize;
            page.reset();
            self.spare = Some(page);
        }
        self.trim();
    }

    /// Drops the closed pages at the front.
    fn trim(&mut self) {
        while let Some(None) = self.pages.front() {
            self.pages.pop_front();
            self.first_page += 1;
        }
    }

    /// Every (key, value), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        let first = self.first_page;
        let pages = self.pages.iter().enumerate().flat_map(move |(i, page)| {
            let base = (first + i as u64) << PAGE_BITS | SYNTHETIC_BIT;
            page.iter()
                .flat_map(move |p| p.live().map(move |(off, v)| (base | off as u64, v)))
        });
        self.table.iter().chain(pages)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        let pages = self
            .pages
            .iter()
            .flatten()
            .flat_map(|p| p.live().map(|(_, v)| v));
        self.table.values().chain(pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The pages' own bookkeeping, and the memory bound: every sealed page kept holds at least
    /// `KEEP_AT_LEAST` live blocks.
    fn check_pages<V: Copy + Default>(s: &LiveSet<V>) {
        let mut total = 0;
        for (i, page) in s.pages.iter().enumerate() {
            let Some(page) = page else {
                assert!(i > 0, "the first page kept is open");
                continue;
            };
            let bits: u32 = page.bits.iter().map(|w| w.count_ones()).sum();
            assert_eq!(bits, page.count);
            if i + 1 < s.pages.len() {
                assert!(
                    page.count >= KEEP_AT_LEAST,
                    "sealed page {i}: {}",
                    page.count
                );
            }
            total += page.count as usize;
        }
        assert_eq!(total, s.in_pages);
        assert!(s.pages.len() <= MAX_PAGES_BEHIND);
    }

    /// Block ids mostly in seq order, some repeated, out of order or far ahead (as a damaged trace
    /// may have them), real addresses mixed in: the set answers like a map, through many pages
    /// closed.
    #[test]
    fn behaves_like_a_map_with_block_ids_and_addresses() {
        let mut s: LiveSet<u64> = LiveSet::with_capacity(4);
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut live_ids: Vec<u64> = Vec::new();
        let mut young: Vec<u64> = Vec::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut seq = 0u64;
        let mut moved = false;
        for i in 0..600_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let (insert, key) = match rng % 16 {
                // A new block id; 1 in 8 lives long (so pages close and move it).
                0..=5 => {
                    seq += 1 + (rng >> 40) % 3;
                    if rng >> 54 == 0 {
                        // A run of frees between two allocations: empty pages in between.
                        seq += 50 << PAGE_BITS;
                    }
                    let id = SYNTHETIC_BIT | seq;
                    if rng >> 61 == 0 {
                        live_ids.push(id);
                    } else {
                        young.push(id);
                    }
                    (true, id)
                }
                // The end of a young block, or of an id just allocated or not.
                6..=10 => (false, young.pop().unwrap_or(SYNTHETIC_BIT | seq)),
                11 if !live_ids.is_empty() => {
                    let k = live_ids.swap_remove((rng >> 16) as usize % live_ids.len());
                    (false, k)
                }
                // A repeated or earlier id, or one far ahead (damaged trace).
                12 | 13 => {
                    let id = if rng >> 58 == 0 && i > 590_000 {
                        SYNTHETIC_BIT | (seq + (1 << 30) + (rng >> 50))
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
            if i % 10_000 == 0 {
                check_pages(&s);
                let ids = m.keys().filter(|k| *k & SYNTHETIC_BIT != 0).count();
                moved |= ids > s.in_pages + 1000;
            }
        }
        assert!(moved, "pages closed: blocks moved to the table");
        check_pages(&s);
        let mut a: Vec<u64> = s.values().copied().collect();
        let mut b: Vec<u64> = m.values().copied().collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }

    /// Generations of blocks freed in creation order long after (python3's pattern) stay in
    /// their pages; the few survivors of mostly short-lived pages go to the table; the memory
    /// kept follows the live blocks.
    #[test]
    fn dense_generations_stay_in_pages_sparse_survivors_move() {
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
            if seq < 1_000_000 {
                live.push_back(id);
            } else if !rng.is_multiple_of(64) {
                // The second part: most blocks die at once, 1 in 64 survives.
                assert_eq!(s.remove(id), m.remove(&id));
            }
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
            if seq % 100_000 == 0 {
                check_pages(&s);
            }
            if seq == 999_999 {
                // Nearly all in pages: the random deaths leave them dense.
                assert!(
                    s.table.len() < s.len() / 10,
                    "{} in the table",
                    s.table.len()
                );
            }
        }
        check_pages(&s);
        assert_eq!(s.len(), m.len());
        // The sparse survivors went to the table.
        assert!(s.table.len() >= 500_000 / 64 / 2, "{}", s.table.len());
        for (k, v) in &m {
            assert_eq!(s.remove(*k), Some(*v));
        }
        assert!(s.is_empty());
    }
}
