//! Each allocator's raw figures -> one table. The table, with the exact source of each field per
//! allocator, is docs/memory-metrics.md ("Allocator statistics"); keep the two in step.
use std::collections::BTreeMap;

use allocators::{GLIBC, JEMALLOC, MIMALLOC, TCMALLOC};
use serde::{Deserialize, Serialize};

use crate::glibc::{glibc_stats, glibc_stats_mallinfo2, parse_malloc_info, ArenaStats, Mallinfo2};

/// The allocator's own statistics, normalised. None = this allocator does not expose the figure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorStats {
    /// The library that really serves malloc: "glibc", "jemalloc", "mimalloc", "tcmalloc",
    /// "tbbmalloc" or "unknown". Serialised as `allocator` (watch.json's key).
    #[serde(rename = "allocator")]
    pub name: String,
    /// Bytes the allocator has handed out to the program (in use).
    pub handed_out: Option<u64>,
    /// Bytes it holds free but still mapped (fragmentation and retention).
    pub free_resident: Option<u64>,
    /// Bytes given back to the system (unmapped or purged) but still reserved.
    pub returned: Option<u64>,
    /// The allocator's own bookkeeping.
    pub metadata: Option<u64>,
    /// Everything the allocator has from the system.
    pub heap_total: Option<u64>,
    /// Number of free chunks (glibc).
    pub free_chunks: Option<u64>,
    /// Per arena (glibc, from malloc_info).
    pub arenas: Vec<ArenaStats>,
    /// Every raw figure read, by its API name (e.g. "mallinfo2.fordblks", "stats.resident").
    pub raw: BTreeMap<String, u64>,
}

impl AllocatorStats {
    pub fn named(allocator: &str) -> AllocatorStats {
        AllocatorStats {
            name: allocator.to_string(),
            ..AllocatorStats::default()
        }
    }
}

/// Normalises the raw figures the agent read from `allocator` (and its text reports by section
/// name: "malloc_info"). A malloc_info text that does not parse falls back to mallinfo2 (the raw
/// key "malloc_info.unreadable" says so).
pub fn normalise(
    allocator: &str,
    raw: &BTreeMap<String, u64>,
    sections: &BTreeMap<String, String>,
) -> AllocatorStats {
    let mut s = match allocator {
        GLIBC => glibc(raw, sections),
        JEMALLOC => jemalloc(raw),
        TCMALLOC => tcmalloc(raw),
        MIMALLOC => mimalloc(raw),
        // tbbmalloc has no statistics API; an unknown allocator, nothing to read.
        other => AllocatorStats::named(other),
    };
    for (k, v) in raw {
        s.raw.entry(k.clone()).or_insert(*v);
    }
    s
}

fn glibc(raw: &BTreeMap<String, u64>, sections: &BTreeMap<String, String>) -> AllocatorStats {
    let m = Mallinfo2::from_raw(raw);
    if let Some(xml) = sections.get("malloc_info") {
        match parse_malloc_info(xml) {
            Ok(heap) => return glibc_stats(&heap, m.as_ref()),
            Err(_) => {
                let mut s = m
                    .as_ref()
                    .map(glibc_stats_mallinfo2)
                    .unwrap_or_else(|| AllocatorStats::named(GLIBC));
                s.raw.insert("malloc_info.unreadable".into(), 1);
                return s;
            }
        }
    }
    m.as_ref()
        .map(glibc_stats_mallinfo2)
        .unwrap_or_else(|| AllocatorStats::named(GLIBC))
}

fn jemalloc(raw: &BTreeMap<String, u64>) -> AllocatorStats {
    let g = |k: &str| raw.get(k).copied();
    let page = g("arenas.page");
    let pages = |k: &str| Some(g(k)? * page?);
    let mut s = AllocatorStats::named(JEMALLOC);
    s.handed_out = g("stats.allocated");
    // Free but resident: the unused part of active pages, and the dirty pages (freed, not yet
    // purged).
    s.free_resident = (|| {
        Some(
            g("stats.active")?.saturating_sub(g("stats.allocated")?)
                + pages("stats.arenas.4096.pdirty")?,
        )
    })();
    // Given back: muzzy pages (MADV_FREE: the kernel takes them when it needs memory; they count
    // in RSS until then) and retained address space (purged, mapped again when needed).
    s.returned = (|| Some(pages("stats.arenas.4096.pmuzzy")? + g("stats.retained")?))();
    s.metadata = g("stats.metadata");
    s.heap_total = g("stats.mapped");
    s
}

fn tcmalloc(raw: &BTreeMap<String, u64>) -> AllocatorStats {
    let g = |k: &str| raw.get(k).copied();
    let mut s = AllocatorStats::named(TCMALLOC);
    s.handed_out = g("generic.current_allocated_bytes");
    // Free and mapped: the page heap's free pages and the free objects in the three caches.
    s.free_resident = (|| {
        Some(
            g("tcmalloc.pageheap_free_bytes")?
                + g("tcmalloc.central_cache_free_bytes")?
                + g("tcmalloc.transfer_cache_free_bytes")?
                + g("tcmalloc.thread_cache_free_bytes")?,
        )
    })();
    s.returned = g("tcmalloc.pageheap_unmapped_bytes");
    s.metadata = g("tcmalloc.metadata_bytes");
    s.heap_total = g("generic.heap_size");
    s
}

fn mimalloc(raw: &BTreeMap<String, u64>) -> AllocatorStats {
    let mut s = AllocatorStats::named(MIMALLOC);
    // Release builds (Debian's) count no bytes in use; the process info has the committed total.
    s.heap_total = raw.get("mi_process_info.current_commit").copied();
    s
}
