//! The flood fill of memcheck's leak check (`mc_leakcheck.c`), on memory read from outside.
//!
//! 1. From every root word, and then from every block reached, each aligned word that points
//!    into a live block marks it: a pointer to its start from a block (or root) reached by start
//!    pointers makes it *reachable*; an interior pointer, or any pointer from a block reached
//!    only *possibly*, makes an unreached block *possibly* reached. A block first reached
//!    possibly and later by a chain of start pointers becomes reachable (and is scanned again).
//!    An interior pointer that one of memcheck's heuristics explains (its default,
//!    `--leak-check-heuristics=all`: `heuristics.rs`) counts as a start pointer.
//!    A pointer of glibc's malloc to the chunk after a block (its arena's `top`, its bins),
//!    which falls inside the block's last 8 bytes, is not the program's and is skipped.
//! 2. Every block still unreached, in address order, is a leader of lost memory: the unreached
//!    blocks it points to (start or interior), transitively, are *indirectly lost*; what remains
//!    unreached is *definitely lost*. In a cycle of lost blocks the lowest address is the
//!    definite one, as in memcheck.
use crate::memory::Memory;
use crate::roots::Roots;

/// memcheck's four kinds of block still allocated at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    DefinitelyLost,
    IndirectlyLost,
    PossiblyLost,
    StillReachable,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::DefinitelyLost,
        Kind::IndirectlyLost,
        Kind::PossiblyLost,
        Kind::StillReachable,
    ];

    /// The name memcheck prints ("definitely lost"), also the trace's.
    pub fn name(self) -> &'static str {
        match self {
            Kind::DefinitelyLost => "definitely lost",
            Kind::IndirectlyLost => "indirectly lost",
            Kind::PossiblyLost => "possibly lost",
            Kind::StillReachable => "still reachable",
        }
    }
}

/// What became of one block: its kind, and for a reachable or possibly lost block the root
/// (an index into `Roots::names`) whose chain reached it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub kind: Kind,
    pub root: Option<usize>,
    /// Where the root's pointer is (for a register, its value).
    pub root_word: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Unreached,
    Possible,
    Reachable,
    Indirect,
}

/// Bytes read per call while scanning a region, and the most a batch of small blocks reads.
const SCAN_CHUNK: usize = 1 << 16;
/// Blocks read in one call (at most the kernel's `IOV_MAX`, 1024).
const BATCH: usize = 256;
/// Blocks up to this size are read in batches: `BATCH` of them fit in `SCAN_CHUNK`.
const SMALL_BLOCK: usize = SCAN_CHUNK / BATCH;

const WORD: usize = std::mem::size_of::<u64>();

pub(crate) struct Marker<'a> {
    /// (address, size), sorted by address.
    blocks: Vec<(u64, u64)>,
    state: Vec<State>,
    root: Vec<Option<(usize, u64)>>,
    /// Blocks to scan: (index, its state when pushed).
    todo: Vec<usize>,
    pub(crate) mem: &'a mut dyn Memory,
    buf: Vec<u8>,
    /// `Roots::file_mappings`, for the heuristics.
    pub(crate) file_mappings: &'a [(u64, u64, bool)],
}

/// Classifies `blocks` (address, requested size; any order, no two overlapping) of a stopped
/// process whose roots are `roots`, reading its memory through `mem`. The verdicts are in the
/// order of `blocks`.
pub fn classify(blocks: &[(u64, u64)], roots: &Roots, mem: &mut dyn Memory) -> Vec<Verdict> {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_unstable_by_key(|&i| blocks[i].0);
    let mut m = Marker {
        blocks: order.iter().map(|&i| blocks[i]).collect(),
        state: vec![State::Unreached; blocks.len()],
        root: vec![None; blocks.len()],
        todo: Vec::new(),
        mem,
        buf: vec![0; SCAN_CHUNK],
        file_mappings: &roots.file_mappings,
    };
    m.flood_from_roots(roots);
    m.lost_cliques();
    let mut verdicts = vec![
        Verdict {
            kind: Kind::DefinitelyLost,
            root: None,
            root_word: 0,
        };
        blocks.len()
    ];
    for (sorted, &original) in order.iter().enumerate() {
        let kind = match m.state[sorted] {
            State::Unreached => Kind::DefinitelyLost,
            State::Indirect => Kind::IndirectlyLost,
            State::Possible => Kind::PossiblyLost,
            State::Reachable => Kind::StillReachable,
        };
        verdicts[original] = Verdict {
            kind,
            root: m.root[sorted].map(|r| r.0),
            root_word: m.root[sorted].map_or(0, |r| r.1),
        };
    }
    verdicts
}

impl Marker<'_> {
    /// The block `ptr` points into, and whether it points at its start. A block of size 0 is
    /// pointed to only by its start.
    fn find(&self, ptr: u64) -> Option<(usize, bool)> {
        let i = self
            .blocks
            .partition_point(|&(a, _)| a <= ptr)
            .checked_sub(1)?;
        let (addr, size) = self.blocks[i];
        (ptr < addr + size.max(1)).then_some((i, ptr == addr))
    }

    /// Phase 1: the flood fill from the roots.
    fn flood_from_roots(&mut self, roots: &Roots) {
        for &(value, root) in &roots.values {
            self.reach(value, true, (root, value));
        }
        for region in &roots.regions {
            self.scan(region.start, region.end, |m, at, ptr| {
                m.reach(ptr, true, (region.root, at))
            });
            self.drain_reached();
        }
        self.drain_reached();
    }

    /// memcheck's `lc_push_without_clique_if_a_chunk_ptr`.
    fn reach(&mut self, ptr: u64, prior_definite: bool, root: (usize, u64)) {
        let Some((i, at_start)) = self.find(ptr) else {
            return;
        };
        if self.state[i] == State::Reachable
            || (!at_start && self.is_chunk_header(self.blocks[i], ptr))
        {
            return;
        }
        let as_start = at_start || (prior_definite && self.heuristic_explains(self.blocks[i], ptr));
        match self.state[i] {
            State::Reachable => {}
            _ if as_start && prior_definite => {
                self.state[i] = State::Reachable;
                self.root[i] = Some(root);
                self.todo.push(i);
            }
            State::Unreached => {
                self.state[i] = State::Possible;
                self.root[i] = Some(root);
                self.todo.push(i);
            }
            _ => {}
        }
    }

    fn drain_reached(&mut self) {
        while !self.todo.is_empty() {
            self.scan_blocks(|m, i, ptr| {
                // As the block is now: reached possibly when pushed, it may be reachable since.
                let definite = m.state[i] == State::Reachable;
                let root = m.root[i].unwrap_or((0, 0));
                m.reach(ptr, definite, root);
            });
        }
    }

    /// Pops up to `BATCH` blocks off `todo` and calls `on_word` with each aligned word of each
    /// that could point into a block, the small ones read in one call (`Memory::read_batch`:
    /// per call, the kernel's access checks cost more than the copy of a small block).
    fn scan_blocks(&mut self, mut on_word: impl FnMut(&mut Self, usize, u64)) {
        let mut small = Vec::with_capacity(BATCH);
        while small.len() < BATCH {
            let Some(i) = self.todo.pop() else { break };
            let (addr, size) = self.blocks[i];
            if size as usize > SMALL_BLOCK {
                self.scan(addr, addr + size, |m, _, ptr| on_word(m, i, ptr));
            } else {
                small.push(i);
            }
        }
        let requests: Vec<(u64, usize)> = small
            .iter()
            .map(|&i| (self.blocks[i].0, self.blocks[i].1 as usize / WORD * WORD))
            .collect();
        let mut buf = std::mem::take(&mut self.buf);
        let got = self.mem.read_batch(&requests, &mut buf);
        let (lowest, highest) = self.bounds();
        let mut at = 0;
        for (k, &i) in small.iter().enumerate() {
            let words = &buf[at..at + got[k] / WORD * WORD];
            at += requests[k].1;
            for word in words.chunks_exact(WORD) {
                let ptr = u64::from_ne_bytes(word.try_into().unwrap_or_default());
                if ptr >= lowest && ptr < highest {
                    on_word(self, i, ptr);
                }
            }
        }
        self.buf = buf;
    }

    /// The lowest block address and the end of the highest block.
    fn bounds(&self) -> (u64, u64) {
        match (self.blocks.first(), self.blocks.last()) {
            (Some(&(lowest, _)), Some(&(top, size))) => (lowest, top + size.max(1)),
            _ => (0, 0),
        }
    }

    /// Phase 2: each unreached block, in address order, leads the lost blocks it points to.
    fn lost_cliques(&mut self) {
        for leader in 0..self.blocks.len() {
            if self.state[leader] != State::Unreached {
                continue;
            }
            self.todo.push(leader);
            while !self.todo.is_empty() {
                self.scan_blocks(|m, _, ptr| {
                    if let Some((j, _)) = m.find(ptr) {
                        if j != leader && m.state[j] == State::Unreached {
                            m.state[j] = State::Indirect;
                            m.todo.push(j);
                        }
                    }
                });
            }
        }
    }

    /// Calls `on_word` with the address and value of every aligned word of `[start, end)` that
    /// could point into a block.
    fn scan(&mut self, start: u64, end: u64, mut on_word: impl FnMut(&mut Self, u64, u64)) {
        let (Some(&(lowest, _)), Some(&(top, top_size))) =
            (self.blocks.first(), self.blocks.last())
        else {
            return;
        };
        let highest = top + top_size.max(1);
        let mut at = start.next_multiple_of(WORD as u64);
        let mut buf = std::mem::take(&mut self.buf);
        while at + WORD as u64 <= end {
            let want = ((end - at) as usize).min(buf.len()) / WORD * WORD;
            let got = self.mem.read(at, &mut buf[..want]) / WORD * WORD;
            for (k, word) in buf[..got].chunks_exact(WORD).enumerate() {
                let ptr = u64::from_ne_bytes(word.try_into().unwrap_or_default());
                if ptr >= lowest && ptr < highest {
                    on_word(self, at + (k * WORD) as u64, ptr);
                }
            }
            if got < want {
                // An unreadable page: skip to the next one.
                at = (at + got as u64 + 1).next_multiple_of(4096);
            } else {
                at += got as u64;
            }
        }
        self.buf = buf;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::BufferMemory;
    use crate::roots::{Root, RootRegion};

    /// A fake address space: a root region at 0x1000 (64 words) and blocks at 0x10000 + 0x100*k.
    struct Space {
        mem: BufferMemory,
        blocks: Vec<(u64, u64)>,
    }

    const ROOT: u64 = 0x1000;
    const HEAP: u64 = 0x10000;

    impl Space {
        fn new(blocks: usize) -> Space {
            Space {
                mem: BufferMemory {
                    base: ROOT,
                    bytes: vec![0; (HEAP - ROOT) as usize + 0x100 * blocks],
                },
                blocks: (0..blocks as u64).map(|k| (HEAP + 0x100 * k, 64)).collect(),
            }
        }
        fn put(&mut self, at: u64, value: u64) {
            let o = (at - ROOT) as usize;
            self.mem.bytes[o..o + 8].copy_from_slice(&value.to_ne_bytes());
        }
        fn block(k: u64) -> u64 {
            HEAP + 0x100 * k
        }
        fn kinds(&mut self) -> Vec<Kind> {
            let roots = Roots {
                names: vec![Root::Global {
                    module: "test".into(),
                    symbol: None,
                    offset: 0,
                }],
                regions: vec![RootRegion {
                    start: ROOT,
                    end: ROOT + 0x200,
                    root: 0,
                    file_offset: None,
                }],
                values: Vec::new(),
                file_mappings: Vec::new(),
            };
            classify(&self.blocks, &roots, &mut self.mem)
                .into_iter()
                .map(|v| v.kind)
                .collect()
        }
    }

    use Kind::*;

    #[test]
    fn memchecks_nine_cases_classify_as_memcheck_says() {
        // Blocks 2k and 2k+1 are case k's AAA and BBB (mc_leakcheck.c's table).
        let mut s = Space::new(18);
        let b = Space::block;
        // (1) RRR -> BBB
        s.put(ROOT, b(1));
        // (2) RRR -> AAA -> BBB
        s.put(ROOT + 8, b(2));
        s.put(b(2), b(3));
        // (3) BBB alone. (4) AAA -> BBB.
        s.put(b(6), b(7));
        // (5) RRR -?-> BBB
        s.put(ROOT + 16, b(9) + 8);
        // (6) RRR -> AAA -?-> BBB
        s.put(ROOT + 24, b(10));
        s.put(b(10), b(11) + 8);
        // (7) RRR -?-> AAA -> BBB
        s.put(ROOT + 32, b(12) + 8);
        s.put(b(12), b(13));
        // (8) RRR -?-> AAA -?-> BBB
        s.put(ROOT + 40, b(14) + 8);
        s.put(b(14), b(15) + 8);
        // (9) AAA -?-> BBB
        s.put(b(16), b(17) + 8);
        let k = s.kinds();
        let unused = [0, 4, 8];
        let expected = [
            (1, StillReachable),
            (2, StillReachable),
            (3, StillReachable),
            (5, DefinitelyLost),
            (6, DefinitelyLost),
            (7, IndirectlyLost),
            (9, PossiblyLost),
            (10, StillReachable),
            (11, PossiblyLost),
            (12, PossiblyLost),
            (13, PossiblyLost),
            (14, PossiblyLost),
            (15, PossiblyLost),
            (16, DefinitelyLost),
            (17, IndirectlyLost),
        ];
        for (i, kind) in expected {
            assert_eq!(k[i], kind, "block {i}");
        }
        for i in unused {
            assert_eq!(k[i], DefinitelyLost, "unused block {i}");
        }
    }

    #[test]
    fn a_possible_block_reached_later_by_start_pointers_becomes_reachable() {
        let mut s = Space::new(2);
        s.put(ROOT, Space::block(1) + 8); // scanned first: possibly
        s.put(ROOT + 8, Space::block(0));
        s.put(Space::block(0), Space::block(1));
        assert_eq!(s.kinds(), vec![StillReachable, StillReachable]);
    }

    #[test]
    fn interior_pointers_memchecks_heuristics_explain_reach_as_start_pointers() {
        let mut s = Space::new(4);
        let b = Space::block;
        // new[] of 2 elements of 28 bytes (64 = 8 + 2 x 28): the count, then the elements.
        s.put(b(0), 2);
        s.put(ROOT, b(0) + 8);
        // length64: the first word is the size of the rest.
        s.put(b(1), 64 - 8);
        s.put(ROOT + 8, b(1) + 8);
        // A COW std::string: length 10, capacity 64 - 24 - 1, refcount, its characters.
        s.put(b(2), 10);
        s.put(b(2) + 8, 64 - 24 - 1);
        s.put(ROOT + 16, b(2) + 24);
        // The same pointer 24 bytes in, the words not matching: possibly lost.
        s.put(ROOT + 24, b(3) + 24);
        assert_eq!(
            s.kinds(),
            vec![StillReachable, StillReachable, StillReachable, PossiblyLost]
        );
    }

    #[test]
    fn glibcs_pointer_to_the_next_chunk_inside_a_block_is_not_the_programs() {
        // Block 1 of 56 bytes in a 64-byte chunk (size field 0x41 before it): the next chunk's
        // header is 48 bytes in, where the arena's `top` points.
        let mut s = Space::new(2);
        s.blocks[1].1 = 56;
        s.put(Space::block(1) - 8, 0x41);
        s.put(ROOT, Space::block(1) + 48);
        // The same pointer with no size field before the block is the program's.
        s.put(ROOT + 8, Space::block(0) + 48);
        assert_eq!(s.kinds(), vec![PossiblyLost, DefinitelyLost]);
    }

    #[test]
    fn a_lost_cycle_has_one_definite_block_the_lowest() {
        let mut s = Space::new(3);
        s.put(Space::block(1), Space::block(2));
        s.put(Space::block(2), Space::block(1));
        assert_eq!(
            s.kinds(),
            vec![DefinitelyLost, DefinitelyLost, IndirectlyLost]
        );
    }

    #[test]
    fn a_pointer_one_past_the_end_reaches_nothing() {
        let mut s = Space::new(1);
        s.put(ROOT, Space::block(0) + 64);
        assert_eq!(s.kinds(), vec![DefinitelyLost]);
    }
}
