//! glibc's own view of its heap: `malloc_info`'s XML (per arena) and `mallinfo2` (totals).
use serde::{Deserialize, Serialize};

use crate::{AgentError, AllocatorStats};

/// A run of free chunks of one size range in one arena (`<size>` or `<unsorted>` in
/// malloc_info: the fastbins and the small and large bins, and the unsorted bin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeSizes {
    pub from: u64,
    pub to: u64,
    pub total: u64,
    pub count: u64,
    /// In the unsorted bin (freed recently, not yet sorted into a bin).
    pub unsorted: bool,
}

/// One arena (`<heap nr=N>`): arena 0 is the main arena (brk), the others are mmapped heaps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaStats {
    pub index: u32,
    pub sizes: Vec<FreeSizes>,
    /// Free chunks in fastbins (`<total type="fast">`).
    pub fast_count: u64,
    pub fast_bytes: u64,
    /// Free chunks in the other bins, the top chunk included (`<total type="rest">`).
    pub rest_count: u64,
    pub rest_bytes: u64,
    /// Bytes the arena has from the system now and at most (`<system type="current|max">`).
    pub system_current: u64,
    pub system_max: u64,
    /// Address space of the arena's heaps (`<aspace type="total|mprotect">`).
    pub aspace_total: u64,
    pub aspace_mprotect: u64,
}

impl ArenaStats {
    pub fn free_bytes(&self) -> u64 {
        self.fast_bytes + self.rest_bytes
    }
    pub fn free_chunks(&self) -> u64 {
        self.fast_count + self.rest_count
    }
}

/// The whole of malloc_info: every arena and the process totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlibcHeap {
    pub arenas: Vec<ArenaStats>,
    pub fast_count: u64,
    pub fast_bytes: u64,
    pub rest_count: u64,
    pub rest_bytes: u64,
    /// Blocks served by their own mmap (`<total type="mmap">`).
    pub mmap_count: u64,
    pub mmap_bytes: u64,
    pub system_current: u64,
    pub system_max: u64,
    pub aspace_total: u64,
    pub aspace_mprotect: u64,
}

/// glibc's `struct mallinfo2` (all arenas together).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mallinfo2 {
    pub arena: u64,
    pub ordblks: u64,
    pub smblks: u64,
    pub hblks: u64,
    pub hblkhd: u64,
    pub fsmblks: u64,
    pub uordblks: u64,
    pub fordblks: u64,
    pub keepcost: u64,
}

impl Mallinfo2 {
    /// From the raw figures the agent writes (`mallinfo2.<field>`); None when absent.
    pub fn from_raw(raw: &std::collections::BTreeMap<String, u64>) -> Option<Mallinfo2> {
        let f = |k: &str| raw.get(&format!("mallinfo2.{k}")).copied();
        Some(Mallinfo2 {
            arena: f("arena")?,
            ordblks: f("ordblks")?,
            smblks: f("smblks")?,
            hblks: f("hblks")?,
            hblkhd: f("hblkhd")?,
            fsmblks: f("fsmblks")?,
            uordblks: f("uordblks")?,
            fordblks: f("fordblks")?,
            keepcost: f("keepcost")?,
        })
    }
}

/// One tag of malloc_info: its name and attributes (the format is glibc's fixed
/// `<name a="v" .../>`, no text content, no entities).
struct Tag<'a> {
    name: &'a str,
    closing: bool,
    attrs: Vec<(&'a str, &'a str)>,
}

fn tags(xml: &str) -> Result<Vec<Tag<'_>>, AgentError> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let end = rest[start..]
            .find('>')
            .ok_or_else(|| AgentError::MallocInfo("a tag is not closed (cut output?)".into()))?;
        let inner = rest[start + 1..start + end].trim_end_matches('/').trim();
        rest = &rest[start + end + 1..];
        let (closing, inner) = match inner.strip_prefix('/') {
            Some(i) => (true, i),
            None => (false, inner),
        };
        let name_end = inner.find(char::is_whitespace).unwrap_or(inner.len());
        let name = &inner[..name_end];
        let mut attrs = Vec::new();
        let mut a = &inner[name_end..];
        while let Some(eq) = a.find('=') {
            let key = a[..eq].trim();
            let after = &a[eq + 1..];
            let q = after
                .strip_prefix('"')
                .ok_or_else(|| AgentError::MallocInfo(format!("attribute {key} is not quoted")))?;
            let close = q
                .find('"')
                .ok_or_else(|| AgentError::MallocInfo(format!("attribute {key} is not closed")))?;
            attrs.push((key, &q[..close]));
            a = &q[close + 1..];
        }
        out.push(Tag {
            name,
            closing,
            attrs,
        });
    }
    Ok(out)
}

impl Tag<'_> {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
    fn num(&self, key: &str) -> Result<u64, AgentError> {
        let v = self.attr(key).ok_or_else(|| {
            AgentError::MallocInfo(format!("<{}> has no {key} attribute", self.name))
        })?;
        v.parse().map_err(|_| {
            AgentError::MallocInfo(format!("<{}> {key}=\"{v}\" is not a number", self.name))
        })
    }
}

/// glibc's malloc_info writes a binned chunk's size field as it is in memory, with the
/// PREV_INUSE flag (1) that every free chunk in a bin has: each such run is one byte per chunk too
/// big (fastbin runs are written with their true size as `to` and `to - 15` as `from`, the top
/// chunk with its true size). Takes it off the runs and returns how many bytes to take off the
/// arena's `rest` total.
fn flag_bytes(sizes: &mut [FreeSizes]) -> u64 {
    let mut n = 0;
    for s in sizes.iter_mut().filter(|s| s.to & 1 == 1) {
        s.from &= !7;
        s.to &= !7;
        s.total = s.total.saturating_sub(s.count);
        n += s.count;
    }
    n
}

/// Parses glibc's `malloc_info(0, fp)` output (format version 1). The sizes are true chunk
/// sizes: the flag bit glibc leaves in the binned chunks' sizes is taken off (see flag_bytes), so
/// the free bytes are mallinfo2's `fordblks` exactly.
pub fn parse_malloc_info(xml: &str) -> Result<GlibcHeap, AgentError> {
    let tags = tags(xml)?;
    let mut heap = GlibcHeap::default();
    let mut current: Option<ArenaStats> = None;
    let mut seen_malloc = false;
    let mut closed = false;
    for t in &tags {
        match (t.name, t.closing) {
            ("malloc", false) => {
                if t.attr("version") != Some("1") {
                    return Err(AgentError::MallocInfo(format!(
                        "format version {} (alloclens reads version 1)",
                        t.attr("version").unwrap_or("missing")
                    )));
                }
                seen_malloc = true;
            }
            ("malloc", true) => closed = true,
            ("heap", false) => {
                current = Some(ArenaStats {
                    index: t.num("nr")? as u32,
                    ..ArenaStats::default()
                })
            }
            ("heap", true) => {
                if let Some(mut a) = current.take() {
                    a.rest_bytes = a.rest_bytes.saturating_sub(flag_bytes(&mut a.sizes));
                    heap.arenas.push(a);
                }
            }
            ("size" | "unsorted", false) => {
                if let Some(a) = current.as_mut() {
                    a.sizes.push(FreeSizes {
                        from: t.num("from")?,
                        to: t.num("to")?,
                        total: t.num("total")?,
                        count: t.num("count")?,
                        unsorted: t.name == "unsorted",
                    });
                }
            }
            ("total", false) => {
                let (count, size) = (t.num("count")?, t.num("size")?);
                match (t.attr("type"), current.as_mut()) {
                    (Some("fast"), Some(a)) => (a.fast_count, a.fast_bytes) = (count, size),
                    (Some("rest"), Some(a)) => (a.rest_count, a.rest_bytes) = (count, size),
                    (Some("fast"), None) => (heap.fast_count, heap.fast_bytes) = (count, size),
                    (Some("rest"), None) => (heap.rest_count, heap.rest_bytes) = (count, size),
                    (Some("mmap"), None) => (heap.mmap_count, heap.mmap_bytes) = (count, size),
                    _ => {}
                }
            }
            ("system" | "aspace", false) => {
                let size = t.num("size")?;
                let field = match (current.as_mut(), t.name, t.attr("type")) {
                    (Some(a), "system", Some("current")) => &mut a.system_current,
                    (Some(a), "system", Some("max")) => &mut a.system_max,
                    (Some(a), "aspace", Some("total")) => &mut a.aspace_total,
                    (Some(a), "aspace", Some("mprotect")) => &mut a.aspace_mprotect,
                    (None, "system", Some("current")) => &mut heap.system_current,
                    (None, "system", Some("max")) => &mut heap.system_max,
                    (None, "aspace", Some("total")) => &mut heap.aspace_total,
                    (None, "aspace", Some("mprotect")) => &mut heap.aspace_mprotect,
                    _ => continue,
                };
                *field = size;
            }
            _ => {}
        }
    }
    if !seen_malloc {
        return Err(AgentError::MallocInfo(
            "no <malloc version=\"1\"> element".into(),
        ));
    }
    if !closed || current.is_some() {
        return Err(AgentError::MallocInfo(
            "the output ends early (cut?)".into(),
        ));
    }
    // The process totals carry the same flag bytes as the arenas' (their sum).
    let arena_rest: u64 = heap.arenas.iter().map(|a| a.rest_bytes).sum();
    if heap.rest_bytes >= arena_rest && !heap.arenas.is_empty() {
        heap.rest_bytes = arena_rest;
    }
    Ok(heap)
}

/// glibc's figures normalised: malloc_info when there is one (per arena), mallinfo2's totals
/// otherwise; both are kept in `raw`. The two give the same totals: glibc computes both from the
/// same bins (mallinfo2.fordblks = the fast and rest bytes of malloc_info, top chunks included).
pub fn glibc_stats(heap: &GlibcHeap, mallinfo2: Option<&Mallinfo2>) -> AllocatorStats {
    let mut s = AllocatorStats::named(allocators::GLIBC);
    let free = heap.fast_bytes + heap.rest_bytes;
    s.free_resident = Some(free);
    s.free_chunks = Some(heap.fast_count + heap.rest_count);
    s.handed_out = Some(heap.system_current.saturating_sub(free) + heap.mmap_bytes);
    s.heap_total = Some(heap.system_current + heap.mmap_bytes);
    s.arenas = heap.arenas.clone();
    for (k, v) in [
        ("malloc_info.fast.count", heap.fast_count),
        ("malloc_info.fast.size", heap.fast_bytes),
        ("malloc_info.rest.count", heap.rest_count),
        ("malloc_info.rest.size", heap.rest_bytes),
        ("malloc_info.mmap.count", heap.mmap_count),
        ("malloc_info.mmap.size", heap.mmap_bytes),
        ("malloc_info.system.current", heap.system_current),
        ("malloc_info.system.max", heap.system_max),
        ("malloc_info.aspace.total", heap.aspace_total),
        ("malloc_info.aspace.mprotect", heap.aspace_mprotect),
        ("malloc_info.arenas", heap.arenas.len() as u64),
    ] {
        s.raw.insert(k.to_string(), v);
    }
    if let Some(m) = mallinfo2 {
        insert_mallinfo2(&mut s, m);
    }
    s
}

/// glibc's figures from mallinfo2 alone (no malloc_info text).
pub(crate) fn glibc_stats_mallinfo2(m: &Mallinfo2) -> AllocatorStats {
    let mut s = AllocatorStats::named(allocators::GLIBC);
    s.free_resident = Some(m.fordblks);
    s.free_chunks = Some(m.ordblks + m.smblks);
    s.handed_out = Some(m.uordblks + m.hblkhd);
    s.heap_total = Some(m.arena + m.hblkhd);
    insert_mallinfo2(&mut s, m);
    s
}

fn insert_mallinfo2(s: &mut AllocatorStats, m: &Mallinfo2) {
    for (k, v) in [
        ("arena", m.arena),
        ("ordblks", m.ordblks),
        ("smblks", m.smblks),
        ("hblks", m.hblks),
        ("hblkhd", m.hblkhd),
        ("fsmblks", m.fsmblks),
        ("uordblks", m.uordblks),
        ("fordblks", m.fordblks),
        ("keepcost", m.keepcost),
    ] {
        s.raw.insert(format!("mallinfo2.{k}"), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_or_foreign_text_is_refused() {
        assert!(parse_malloc_info("").is_err());
        assert!(parse_malloc_info("<malloc version=\"1\">\n<heap nr=\"0\">").is_err());
        assert!(parse_malloc_info("<malloc version=\"2\"></malloc>").is_err());
        assert!(parse_malloc_info(
            "<malloc version=\"1\"><total type=\"fast\" count=\"x\" size=\"0\"/></malloc>"
        )
        .is_err());
    }
}
