//! `record --leaks`: the leak check of the command's blocks at its exit, summed by call stack
//! and kind for the trace's LEAKS chunk (docs/leaks.md).
use std::collections::HashMap;

use reachability::{CachedMemory, Kind, ProcessMemory, Root};

use crate::server::LiveAtExit;

/// The kind of every block when the memory could not be read.
pub const NOT_FREED: &str = "not freed at exit";

/// Classifies `blocks` of process `pid`, held at its exit with `threads` (`missed`: threads
/// still running, not scanned).
pub fn scan(
    pid: u32,
    exec_index: u32,
    threads: &[reachability::Thread],
    missed: usize,
    blocks: &[LiveAtExit],
) -> trace::Leaks {
    // Through the first thread held: once the main thread ended alone (`pthread_exit`), the
    // process's own /proc entry has no maps and its pid no memory to read.
    let live = threads.first().map_or(pid, |t| t.tid);
    let mut memory = CachedMemory::new(ProcessMemory::new(live));
    let mut roots = match reachability::find_roots(live, threads) {
        Ok(r) => r,
        Err(e) => {
            return not_freed(
                pid,
                exec_index,
                blocks,
                format!("cannot read its maps: {e}"),
            )
        }
    };
    let ranges: Vec<(u64, u64)> = blocks.iter().map(|(a, b)| (*a, b.size)).collect();
    let mut sorted = ranges.clone();
    sorted.sort_unstable();
    roots.without_heaps(&sorted, &mut memory);
    let verdicts = reachability::classify(&ranges, &roots, &mut memory);
    // (stack, kind) -> blocks, bytes, and bytes per (root, root word).
    type Roots = HashMap<(usize, u64), u64>;
    let mut sites: HashMap<(u32, Kind), (u64, u64, Roots)> = HashMap::new();
    for ((_, block), v) in blocks.iter().zip(&verdicts) {
        let site = sites.entry((block.stack, v.kind)).or_default();
        site.0 += 1;
        site.1 += block.size;
        if let Some(root) = v.root {
            *site.2.entry((root, v.root_word)).or_default() += block.size;
        }
    }
    let mut names: HashMap<(usize, u64), String> = HashMap::new();
    let mut out: Vec<trace::LeakSite> = sites
        .into_iter()
        .map(|((stack, kind), (count, bytes, holders))| {
            let top = holders
                .into_iter()
                .max_by_key(|&(k, b)| (b, std::cmp::Reverse(k)));
            let root = top.map(|(key, _)| {
                names
                    .entry(key)
                    .or_insert_with(|| root_label(&roots, key))
                    .clone()
            });
            trace::LeakSite {
                stack,
                kind: kind.name().into(),
                blocks: count,
                bytes,
                root,
            }
        })
        .collect();
    out.sort_by(|a, b| (b.bytes, a.stack).cmp(&(a.bytes, b.stack)));
    let root_bytes = roots.regions.iter().map(|r| r.end - r.start).sum();
    trace::Leaks {
        pid,
        exec_index,
        scanned: true,
        degraded: (missed > 0).then(|| {
            format!("{missed} threads were still running at the exit and were not scanned")
        }),
        threads: threads.len() as u32,
        root_bytes,
        sites: out,
    }
}

/// The root that holds a block: a global named by its module's symbol table.
fn root_label(roots: &reachability::Roots, (root, word): (usize, u64)) -> String {
    match &roots.names[root] {
        Root::Global { module, .. } => {
            let offset = roots.file_offset(root, word).unwrap_or(0);
            Root::Global {
                module: module.clone(),
                symbol: symbols::global_at(std::path::Path::new(module), offset),
                offset,
            }
            .to_string()
        }
        other => other.to_string(),
    }
}

/// Degraded: the process could not be held at its exit; every block still live is only "not
/// freed at exit", for the `reason` given.
pub fn not_freed(pid: u32, exec_index: u32, blocks: &[LiveAtExit], reason: String) -> trace::Leaks {
    let mut sites: HashMap<u32, (u64, u64)> = HashMap::new();
    for (_, b) in blocks {
        let s = sites.entry(b.stack).or_default();
        s.0 += 1;
        s.1 += b.size;
    }
    let mut out: Vec<trace::LeakSite> = sites
        .into_iter()
        .map(|(stack, (blocks, bytes))| trace::LeakSite {
            stack,
            kind: NOT_FREED.into(),
            blocks,
            bytes,
            root: None,
        })
        .collect();
    out.sort_by(|a, b| (b.bytes, a.stack).cmp(&(a.bytes, b.stack)));
    trace::Leaks {
        pid,
        exec_index,
        scanned: false,
        degraded: Some(reason),
        threads: 0,
        root_bytes: 0,
        sites: out,
    }
}
