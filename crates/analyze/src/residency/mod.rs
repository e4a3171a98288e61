//! Which call sites hold the heap's resident pages (`analyze --residency`): at each residency
//! reading of a trace recorded with `--addresses` (RESIDENCY chunks), every resident page of the
//! heap's mappings is split into (a) held by live blocks, its bytes apportioned to the live blocks
//! on it and so to their call sites, (b) held only by free memory, attributed to the call site of
//! the last block freed on it, (c) allocator metadata: pages of the blocks' mappings no traced
//! block ever lay on, (d) outside: mappings no traced block ever lay in. The four sum to the
//! reading's resident bytes. Beside them: live bytes that are not resident, and what
//! `MADV_DONTNEED` of the free-only pages would return. Definitions in docs/memory-metrics.md,
//! "Heap residency".
//!
//! A pass of its own over each stream that has readings ([`ResidencyPass`]): the events below a
//! reading's seq place the blocks (`blocks`), the reading says which pages are resident
//! (`heap_pages`), `split` puts the two together. The pprof export runs the same pass beside its
//! own for `resident_space`; `analyze --sites` and pprof take each stack's figures at one reading
//! (`at_sites`).
mod at_sites;
mod blocks;
mod heap_pages;
mod pass;
mod split;

use std::path::{Path, PathBuf};

use serde::Serialize;
use trace::{ProcessInfo, Record, TraceReader};

use crate::call_sites::{address_space, resolve_stack};
use crate::error::AnalyzeError;
pub use at_sites::{site_reading, SitesReading, SitesResidency};
pub use blocks::Block;
use heap_pages::HeapPages;
pub use pass::ResidencyPass;
pub use split::{Parts, SiteParts, Split};

/// The split at every reading of every selected process image that has readings.
#[derive(Debug, Clone, Serialize)]
pub struct ResidencyAnalysis {
    pub processes: Vec<ProcessResidency>,
    /// What could not be read (damage, a stream cut short), one sentence each.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessResidency {
    pub pid: u32,
    pub exec_index: u32,
    pub cmdline: Vec<String>,
    /// In the order read.
    pub readings: Vec<ResidencyReading>,
}

/// The split at one reading. Bytes throughout.
#[derive(Debug, Clone, Serialize)]
pub struct ResidencyReading {
    /// The image's seq at the reading: the events below it place the blocks.
    pub seq: u64,
    /// ns since the image started, when the memory sample read with it began.
    pub t_ns: u64,
    /// Calls the program made while smaps and the pages were read (`seq_end - seq` of the
    /// sample): when not 0, the pages may hold blocks the events below `seq` do not place, and
    /// smaps and the pages may differ by what the program touched meanwhile.
    pub calls_during: Option<u64>,
    /// `Rss` of the heap's mappings in smaps, read just before the pages (the memory sample's
    /// `heap`).
    pub smaps_heap: Option<u64>,
    /// The parts: `resident = live_blocks + free_only + metadata + outside`.
    #[serde(flatten)]
    pub parts: Parts,
    /// What `MADV_DONTNEED` of the free-only pages would return (`free_only`): an upper bound of
    /// what `malloc_trim` returns (glibc keeps each free chunk's first page, its header there).
    pub reclaimable: u64,
    /// Per heap mapping, in address order.
    pub regions: Vec<RegionResidency>,
    /// Per call site (the innermost function of the allocation's stack, allocator frames
    /// dropped), by decreasing `resident + free_left`.
    pub sites: Vec<SiteResidency>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RegionResidency {
    pub start: u64,
    pub end: u64,
    #[serde(flatten)]
    pub parts: Parts,
}

#[derive(Debug, Clone, Serialize)]
pub struct SiteResidency {
    /// The function, `[no stack]` for allocations without one (recorded without `--stacks`, or
    /// not sampled), `[stack not taken]` when the unwinder found none.
    pub site: String,
    /// Its share of the pages live blocks hold.
    pub resident: u64,
    pub live_bytes: u64,
    pub live_not_resident: u64,
    /// Free-only pages whose last freed block it allocated.
    pub free_left: u64,
}

/// The split of every reading of the trace at `path` (of process `process` only, with `Some`).
pub fn analyze_residency(
    path: &Path,
    process: Option<u32>,
) -> Result<ResidencyAnalysis, AnalyzeError> {
    let mut reader = TraceReader::open(path)?;
    let mut losses = trace::Losses::of(&reader);
    let selected: Vec<usize> = (0..reader.streams().len())
        .filter(|&i| process.is_none_or(|p| p == reader.streams()[i].info.pid))
        .filter(|&i| !reader.residency(i).is_empty())
        .collect();
    if selected.is_empty() {
        return Err(AnalyzeError::NoResidency {
            path: path.to_path_buf(),
        });
    }
    let infos: Vec<ProcessInfo> = reader.streams().iter().map(|s| s.info.clone()).collect();
    let mut names = SiteNames::default();
    let mut processes = Vec::new();
    for i in selected {
        let info = infos[i].clone();
        let readings = reader.residency(i).to_vec();
        let samples = reader.memory_samples(i).to_vec();
        let mut pass = ResidencyPass::new(readings.clone());
        let mut read = 0u64;
        let mut stopped = None;
        for record in reader.records(i)? {
            match record {
                Ok(Record::Event(e)) => pass.on_event(&e),
                Ok(_) => {}
                Err(e) => {
                    stopped = Some(e);
                    break;
                }
            }
            read += 1;
        }
        if let Some(e) = &stopped {
            losses.stream_stopped(&info, e, read);
        }
        let splits = pass.finish(stopped.is_none());
        let space = address_space(&info, &infos, reader.modules());
        let readings = splits
            .into_iter()
            .map(|(k, s)| {
                let r = &readings[k];
                let sample = samples.iter().find(|m| m.seq == r.seq && m.t_ns == r.t_ns);
                let pages = HeapPages::new(r);
                reading_of(r, sample, s, &pages, |stack| {
                    names.name(stack, reader.stacks(), &space)
                })
            })
            .collect();
        processes.push(ProcessResidency {
            pid: info.pid,
            exec_index: info.exec_index,
            cmdline: info.cmdline.clone(),
            readings,
        });
    }
    let mut warnings = losses.warnings("analysed what precedes the damage");
    warnings.extend(names.warnings());
    Ok(ResidencyAnalysis {
        processes,
        warnings,
    })
}

fn reading_of(
    r: &trace::Residency,
    sample: Option<&trace::MemorySample>,
    s: split::Split,
    pages: &HeapPages,
    mut name: impl FnMut(u32) -> String,
) -> ResidencyReading {
    // Sites are functions: stacks that resolve to the same innermost function add up.
    let mut by_name: Vec<SiteResidency> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for (stack, p) in s.sites {
        let site = name(stack);
        let i = *index.entry(site.clone()).or_insert_with(|| {
            by_name.push(SiteResidency {
                site,
                resident: 0,
                live_bytes: 0,
                live_not_resident: 0,
                free_left: 0,
            });
            by_name.len() - 1
        });
        let row = &mut by_name[i];
        row.resident += p.resident.round() as u64;
        row.live_bytes += p.live_bytes;
        row.live_not_resident += p.live_not_resident;
        row.free_left += p.free_left;
    }
    by_name.sort_by(|a, b| {
        (b.resident + b.free_left)
            .cmp(&(a.resident + a.free_left))
            .then_with(|| a.site.cmp(&b.site))
    });
    ResidencyReading {
        seq: r.seq,
        t_ns: r.t_ns,
        calls_during: sample.map(|m| m.seq_end - m.seq),
        smaps_heap: sample.and_then(|m| m.heap),
        parts: s.parts,
        reclaimable: s.parts.free_only,
        regions: s
            .regions
            .into_iter()
            .enumerate()
            .map(|(m, parts)| {
                let (start, end) = pages.mapping(m);
                RegionResidency { start, end, parts }
            })
            .collect(),
        sites: by_name,
    }
}

/// Names of allocation stacks, resolved once each.
#[derive(Default)]
struct SiteNames {
    symbolizer: Option<symbols::Symbolizer>,
    known: std::collections::HashMap<u32, String>,
}

impl SiteNames {
    fn name(
        &mut self,
        stack: u32,
        stacks: &trace::StackTable,
        space: &symbols::AddressSpace,
    ) -> String {
        if stack == 0 {
            return "[no stack]".to_string();
        }
        if let Some(n) = self.known.get(&stack) {
            return n.clone();
        }
        let symbolizer = self
            .symbolizer
            .get_or_insert_with(|| symbols::Symbolizer::new(Vec::<PathBuf>::new()));
        let frames = stacks
            .get(stack)
            .map(|addresses| resolve_stack(addresses, space, symbolizer))
            .unwrap_or_default();
        let n = frames
            .first()
            .map_or_else(|| "[stack not taken]".to_string(), |f| f.label.clone());
        self.known.insert(stack, n.clone());
        n
    }

    fn warnings(&self) -> Vec<String> {
        self.symbolizer
            .as_ref()
            .map(|s| s.warnings().iter().map(|w| w.to_string()).collect())
            .unwrap_or_default()
    }
}
