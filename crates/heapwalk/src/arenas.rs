//! Finding glibc's heaps in a process's mappings, and walking each.

use crate::chain::{Chain, ChainEnd, ChunkCounts};
use crate::pages::{split, PageMarks, PageSplit};
use crate::WalkError;
use reachability::Memory;

/// The alignment (and largest size) of a heap of an arena other than the main one: glibc's
/// `HEAP_MAX_SIZE` on 64-bit targets.
const HEAP_MAX: u64 = 64 << 20;
/// `sizeof (struct malloc_state)` (glibc 2.27 and later, 64-bit), then aligned so that the
/// first chunk's user bytes are 16-byte aligned.
const MALLOC_STATE: u64 = 2200;
/// Where `malloc_state.top` lies in it (after mutex, flags, have_fastchunks and 10 fastbins).
const TOP_OFFSET: u64 = 96;
/// `sizeof (heap_info)`: 32 bytes before glibc 2.35, 48 since (its `pagesize` field).
const HEAP_INFO_SIZES: [u64; 2] = [32, 48];

/// A private, writable, anonymous mapping (where malloc's memory lies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The `[heap]` mapping: the brk heap, the main arena's.
    pub brk: bool,
}

/// The private writable anonymous mappings of process `pid`, from /proc/PID/maps.
pub fn anonymous_mappings(pid: u32) -> Result<Vec<Mapping>, String> {
    let path = procmem::process_dir(pid).join("maps");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text.lines().filter_map(parse_maps_line).collect())
}

fn parse_maps_line(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let name = fields.nth(3).unwrap_or("");
    let anonymous = name.is_empty() || name == "[heap]" || name.starts_with("[anon:");
    if !(perms.starts_with("rw") && perms.ends_with('p') && anonymous) {
        return None;
    }
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        brk: name == "[heap]",
    })
}

/// What a heap is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// The brk heap.
    MainArena,
    /// A heap of another arena (64 MiB-aligned, `heap_info` first).
    ArenaHeap,
}

/// One heap walked: `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub kind: RegionKind,
}

/// glibc's heaps in a process, walked.
#[derive(Debug, Clone)]
pub struct GlibcHeap {
    pub regions: Vec<Region>,
    pub arenas: u32,
    pub chunks: ChunkCounts,
    marks: Vec<PageMarks>,
}

impl GlibcHeap {
    /// Splits the resident pages of the process's heap mappings by what the walk found.
    pub fn split(&self, residency: &procmem::HeapResidency) -> PageSplit {
        PageSplit {
            arenas: self.arenas,
            heaps: self.regions.len() as u32,
            chunks: self.chunks,
            ..split(&self.marks, residency)
        }
    }
}

/// A non-main heap's `heap_info`: its arena, the heap before it, its used and writable sizes.
struct HeapInfo {
    at: u64,
    arena: u64,
    prev: u64,
    size: u64,
    writable: u64,
}

fn read_words<M: Memory, const N: usize>(memory: &mut M, at: u64) -> Option<[u64; N]> {
    let mut bytes = vec![0u8; N * 8];
    (memory.read(at, &mut bytes) == bytes.len()).then(|| {
        std::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()))
    })
}

/// The `heap_info` at `at`, when it looks like one that fits in `mapping`: its arena right after
/// it (the arena's first heap, with no heap before it) or in another heap's start, sizes within
/// the writable part.
fn heap_info<M: Memory>(memory: &mut M, at: u64, mapping: &Mapping) -> Option<HeapInfo> {
    let [arena, prev, size, writable] = read_words::<M, 4>(memory, at)?;
    let arena_heap = arena & !(HEAP_MAX - 1);
    let first = arena_heap == at;
    let plausible = HEAP_INFO_SIZES.contains(&(arena - arena_heap))
        && first == (prev == 0)
        && (first || prev % HEAP_MAX == 0)
        && size > 0
        && size % 4096 == 0
        && size <= writable
        && writable <= HEAP_MAX
        && at + writable <= mapping.end;
    plausible.then_some(HeapInfo {
        at,
        arena,
        prev,
        size,
        writable,
    })
}

/// Walks glibc's heaps found in `mappings` (the brk heap, and every 64 MiB-aligned heap whose
/// `heap_info` holds up). Errs on the first heap whose chunks do not chain up.
pub fn walk_heap<M: Memory>(memory: &mut M, mappings: &[Mapping]) -> Result<GlibcHeap, WalkError> {
    let bad = WalkError::Inconsistent;
    let mut heap = GlibcHeap {
        regions: Vec::new(),
        arenas: 0,
        chunks: ChunkCounts::default(),
        marks: Vec::new(),
    };
    if let Some(brk) = mappings.iter().find(|m| m.brk) {
        let chain = Chain {
            first: brk.start,
            end: brk.end,
            main_arena: true,
        };
        let mut marks = PageMarks::new(brk.start, brk.end, 4096);
        chain
            .walk(memory, &mut marks, &mut heap.chunks)
            .map_err(|why| bad(format!("main arena: {why}")))?;
        heap.arenas += 1;
        heap.regions.push(Region {
            start: brk.start,
            end: brk.end,
            kind: RegionKind::MainArena,
        });
        heap.marks.push(marks);
    }
    let mut infos = Vec::new();
    for m in mappings.iter().filter(|m| !m.brk) {
        let first = m.start.next_multiple_of(HEAP_MAX);
        for at in (first..m.end).step_by(HEAP_MAX as usize) {
            infos.extend(heap_info(memory, at, m));
        }
    }
    for info in &infos {
        walk_arena_heap(memory, info, &infos, &mut heap)?;
    }
    Ok(heap)
}

/// Walks one non-main heap: from after its `heap_info` (and, in the arena's first heap, after
/// the `malloc_state`) to its used size, ending at the arena's top chunk or at a fencepost.
fn walk_arena_heap<M: Memory>(
    memory: &mut M,
    info: &HeapInfo,
    infos: &[HeapInfo],
    heap: &mut GlibcHeap,
) -> Result<(), WalkError> {
    let bad = |why: String| WalkError::Inconsistent(format!("heap at {:#x}: {why}", info.at));
    let arena_heap = info.arena & !(HEAP_MAX - 1);
    let header = info.arena - arena_heap;
    let first_heap = arena_heap == info.at;
    if !first_heap && !infos.iter().any(|i| i.at == info.prev) {
        return Err(bad(format!(
            "the heap before it, {:#x}, is not one",
            info.prev
        )));
    }
    let first = if first_heap {
        (info.arena + MALLOC_STATE + 16).next_multiple_of(16) - 16
    } else {
        info.at + header
    };
    let [top] = read_words::<M, 1>(memory, info.arena + TOP_OFFSET)
        .ok_or_else(|| bad("its arena is not readable".into()))?;
    let chain = Chain {
        first,
        end: info.at + info.size,
        main_arena: false,
    };
    let mut marks = PageMarks::new(info.at, info.at + info.writable, 4096);
    // heap_info and malloc_state: the arena's own, never handed out.
    marks.free_chunk(info.at, first - info.at, first - info.at);
    let end = chain
        .walk(memory, &mut marks, &mut heap.chunks)
        .map_err(bad)?;
    let top_here = (info.at..info.at + info.size).contains(&top);
    match end {
        ChainEnd::Top(at) if at == top => {}
        ChainEnd::Fencepost if !top_here => {}
        ChainEnd::Top(at) => {
            return Err(bad(format!(
                "the chain ends at a chunk at {at:#x}, the arena's top is {top:#x}"
            )))
        }
        ChainEnd::Fencepost => {
            return Err(bad(format!("a fencepost before the arena's top {top:#x}")))
        }
    }
    if first_heap {
        heap.arenas += 1;
    }
    heap.regions.push(Region {
        start: info.at,
        end: info.at + info.writable,
        kind: RegionKind::ArenaHeap,
    });
    heap.marks.push(marks);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fabricated address space: one brk heap's bytes at `base`.
    struct Image {
        base: u64,
        bytes: Vec<u8>,
    }

    impl Memory for Image {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
            let Some(from) = addr.checked_sub(self.base).map(|o| o as usize) else {
                return 0;
            };
            let n = buf.len().min(self.bytes.len().saturating_sub(from));
            buf[..n].copy_from_slice(&self.bytes[from..from + n]);
            n
        }
    }

    impl Image {
        fn put(&mut self, at: u64, word: u64) {
            let i = (at - self.base) as usize;
            self.bytes[i..i + 8].copy_from_slice(&word.to_le_bytes());
        }
    }

    const BASE: u64 = 0x5555_0000_0000;
    const PAGE: u64 = 4096;

    /// A 4-page brk heap: a 2-page chunk in use, a free one of a page and a half, a small one in
    /// use, then the top chunk to the end.
    fn brk_heap() -> Image {
        let mut image = Image {
            base: BASE,
            bytes: vec![0; 4 * PAGE as usize],
        };
        let (a, b, c) = (BASE, BASE + 2 * PAGE, BASE + 2 * PAGE + 6144);
        let top = c + 64;
        image.put(a + 8, (2 * PAGE) | 1);
        image.put(b + 8, 6144 | 1);
        // b is free: c's PREV_INUSE clear, b's size in c's prev_size.
        image.put(c, 6144);
        image.put(c + 8, 64);
        image.put(top + 8, (BASE + 4 * PAGE - top) | 1);
        image
    }

    fn brk_mapping() -> Vec<Mapping> {
        vec![Mapping {
            start: BASE,
            end: BASE + 4 * PAGE,
            brk: true,
        }]
    }

    fn resident_all() -> procmem::HeapResidency {
        procmem::HeapResidency {
            page_size: PAGE,
            mappings: vec![procmem::MappingResidency {
                start: BASE,
                end: BASE + 4 * PAGE,
                runs: vec![(BASE, BASE + 4 * PAGE)],
            }],
        }
    }

    #[test]
    fn a_consistent_image_is_split_page_by_page() {
        let heap = walk_heap(&mut brk_heap(), &brk_mapping()).unwrap();
        assert_eq!(heap.chunks.in_use, 2, "{:?}", heap.chunks);
        assert_eq!(heap.chunks.free, 2, "{:?}", heap.chunks);
        let split = heap.split(&resident_all());
        // Pages 0-1: the first chunk; page 2: the free chunk's head; page 3: the small chunk in
        // use (and the top's head). None free but page 2, which holds a free chunk's header.
        assert_eq!(split.arena_resident, 4 * PAGE);
        assert_eq!((split.free_only, split.reclaimable), (PAGE, 0), "{split:?}");
    }

    /// A heap that changed under the walk (a free chunk's foot that does not match its size, a
    /// size past the heap's end, a break that is not where the chain ends) is not read: an error,
    /// never a figure.
    #[test]
    fn an_inconsistent_image_is_not_read() {
        let bad_foot = |image: &mut Image| image.put(BASE + 2 * PAGE + 6144, 4096);
        let past_the_end = |image: &mut Image| image.put(BASE + 2 * PAGE + 8, (9 * PAGE) | 1);
        let misaligned = |image: &mut Image| image.put(BASE + 8, (2 * PAGE + 8) | 1);
        let no_top = |image: &mut Image| image.put(BASE + 2 * PAGE + 6144 + 64 + 8, 64 | 1);
        for (what, corrupt) in [
            ("foot", &bad_foot as &dyn Fn(&mut Image)),
            ("past the end", &past_the_end),
            ("misaligned", &misaligned),
            ("no top", &no_top),
        ] {
            let mut image = brk_heap();
            corrupt(&mut image);
            let err = walk_heap(&mut image, &brk_mapping()).unwrap_err();
            assert!(
                matches!(&err, WalkError::Inconsistent(why) if why.starts_with("main arena: ")),
                "{what}: {err:?}"
            );
        }
    }
}
