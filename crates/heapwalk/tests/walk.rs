//! heapwalk on a real process whose layout is known (testkit's `heapwalk_layout`): 64 chunks of
//! 3 pages in the main arena and 64 in a thread's arena, every other one freed.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use heapwalk::{anonymous_mappings, walk_heap, ProcessMemory, RegionKind};
use procmem::{HeapResidency, MappingResidency};

const CHUNK: u64 = 12288;
const PAGE: u64 = 4096;

/// The chunks the program printed: (arena, kept, address).
fn layout(lines: &[String]) -> Vec<(String, bool, u64)> {
    lines
        .iter()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let arena = f.next()?.to_string();
            let kept = f.next()? == "kept";
            let at = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((arena, kept, at))
        })
        .collect()
}

/// Pages of `[from, to)` no kept chunk's user bytes (after its 16-byte header) lie on.
fn expected_free_pages(chunks: &[(String, bool, u64)], from: u64, to: u64) -> u64 {
    (from / PAGE * PAGE..to)
        .step_by(PAGE as usize)
        .filter(|&page| {
            !chunks
                .iter()
                .any(|&(_, kept, c)| kept && c + 16 < page + PAGE && c + CHUNK > page)
        })
        .count() as u64
}

#[test]
fn the_free_pages_of_both_arenas_are_the_freed_chunks_pages() {
    let mut child = Command::new(testkit::program("heapwalk_layout"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "no ready line");
        if line.trim() == "ready" {
            break;
        }
        lines.push(line.trim().to_string());
    }
    let chunks = layout(&lines);
    assert_eq!(chunks.len(), 128, "{lines:?}");
    let pid = child.id();
    let mut memory = ProcessMemory::new(pid);
    let heap = walk_heap(&mut memory, &anonymous_mappings(pid).unwrap()).unwrap();
    let kinds: Vec<RegionKind> = heap.regions.iter().map(|r| r.kind).collect();
    assert!(kinds.contains(&RegionKind::MainArena), "{:?}", heap.regions);
    assert!(kinds.contains(&RegionKind::ArenaHeap), "{:?}", heap.regions);
    assert_eq!(heap.arenas, 2, "{:?}", heap.regions);
    // 31 freed chunks per arena stay free (the 64th merged into the top chunk).
    assert!(heap.chunks.free >= 62, "{:?}", heap.chunks);
    assert!(heap.chunks.in_use >= 64, "{:?}", heap.chunks);
    for arena in ["main", "thread"] {
        let mine: Vec<_> = chunks.iter().filter(|c| c.0 == arena).cloned().collect();
        let from = mine.iter().map(|c| c.2).min().unwrap();
        let to = mine.iter().map(|c| c.2).max().unwrap() + CHUNK;
        // Every page of the span was written: resident.
        let span = HeapResidency {
            page_size: PAGE,
            mappings: vec![MappingResidency {
                start: from / PAGE * PAGE,
                end: to.next_multiple_of(PAGE),
                runs: vec![(from / PAGE * PAGE, to.next_multiple_of(PAGE))],
            }],
        };
        let split = heap.split(&span);
        let expected = expected_free_pages(&mine, from, to);
        // 32 freed chunks of 3 pages, each with at least 2 pages of its own.
        assert!(expected >= 64, "{arena}: {expected}");
        assert_eq!(split.free_only, expected * PAGE, "{arena}: {split:?}");
        assert_eq!(split.outside, 0, "{arena}: {split:?}");
        // A free chunk's page is returnable unless its header lies on it.
        assert!(split.reclaimable >= 32 * PAGE, "{arena}: {split:?}");
    }
    // The whole process, with its pagemap: the freed chunks' pages are among the free ones.
    let split = heapwalk::read_process(pid, &mut procmem::ResidencyReader::new()).unwrap();
    assert!(split.free_only >= 128 * PAGE, "{split:?}");
    assert!(split.arena_resident >= 2 * 64 * CHUNK, "{split:?}");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}
