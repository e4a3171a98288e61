//! Call sites: the per-stack figures of `sites` (one row per stack id and process) resolved to frames
//! by the `symbols` crate and folded two ways, per process image:
//! - **by stack**: stacks that resolve to the same frames are one site (the same call path seen in an
//!   exec'd image, or under two ids);
//! - **by function**: each stack's figures go to the function that made the call (the innermost frame
//!   once the allocator's own frames are dropped; an inlined function counts as itself), and its
//!   `calls_inclusive`/`bytes_inclusive` to every function on the stack, once per stack.
//!
//! Everything here is computed after the streaming pass, from the per-stack figures: memory is the
//! stack table plus one entry per distinct stack and function.
mod address_space;
mod fold;
mod frame_table;

pub use address_space::{address_space, symbol_mapping};
pub(crate) use fold::resolve_stack;
pub use fold::{fold, is_allocator_frame, is_allocator_function, FoldInput};

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Call sites of every analysed process image that has stacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallSites {
    pub processes: Vec<ProcessSites>,
    /// Modules whose frames could not be named (file missing or changed since the recording).
    pub warnings: Vec<String>,
    /// When the stacks were sampled (`record --stacks` with a rate): the mean bytes between
    /// samples. The sites' figures are then estimates (`SiteFigures::estimate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_sample_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSites {
    pub pid: u32,
    pub exec_index: u32,
    pub cmdline: Vec<String>,
    /// By decreasing calls (then name).
    pub functions: Vec<FunctionSite>,
    /// By decreasing calls.
    pub stacks: Vec<StackSite>,
    /// Allocations without a stack (taken before the shim could unwind, or unwinding failed).
    pub without_stack: SiteFigures,
    /// With residency readings (a trace recorded with `--addresses`, every stack): the reading the
    /// sites' `resident_bytes` and `free_left_bytes` are taken at
    /// (`crate::residency::site_reading`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residency: Option<crate::residency::SitesReading>,
}

/// One frame of a resolved stack (`symbols::Frame`, serialisable).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SiteFrame {
    /// The function name, or `module+0xADDR` when nothing names it.
    pub label: String,
    /// Demangled function name, when the symbols or debug info name it.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Inlined into the next frame.
    pub inlined: bool,
    pub module: String,
    /// The return address in the module's own address space (ELF virtual address).
    pub module_address: u64,
}

impl SiteFrame {
    /// `file:line` (file name only) where the debug info has it.
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = file.rsplit('/').next().unwrap_or(file);
        Some(match self.line {
            Some(l) => format!("{name}:{l}"),
            None => name.to_string(),
        })
    }
}

/// Summary of a distribution (log-linear buckets: values are bucket lower edges, within 1/128).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: Option<u64>,
    pub p90: Option<u64>,
    pub max: Option<u64>,
}

/// The figures of a call site (docs/metrics.md, "Call sites").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SiteFigures {
    /// Allocating calls made from the site.
    pub calls: u64,
    pub requested_bytes: u64,
    /// Bytes allocated from the site that were live when the process's live bytes peaked.
    pub peak_live_bytes: u64,
    pub leaked_bytes: u64,
    pub leaked_blocks: u64,
    /// Allocations from the site whose end was seen, and those with lifetime 0 (freed before any
    /// other allocator call).
    pub lifetimes: u64,
    pub lifetime_zero: u64,
    /// lifetime_zero / lifetimes (0 when none ended).
    pub share_lifetime_zero: f64,
    /// Lifetimes in allocator calls and in ns, and requested sizes in bytes.
    pub lifetime_calls: Spread,
    pub lifetime_ns: Spread,
    pub sizes: Spread,
    /// Distinct stacks folded into this site.
    pub stacks: u64,
    /// When stacks were sampled: `calls`, `requested_bytes`, `peak_live_bytes`, `leaked_bytes`,
    /// `leaked_blocks`, `lifetimes` and `lifetime_zero` above are estimates (rounded), the shares
    /// and the medians and p90s of the spreads weighted the same way, and this says how good (docs/metrics.md, "Sampled stacks"). Absent when every allocation has a stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimation>,
    /// At the process's residency reading (`ProcessSites::residency`; absent without one): the
    /// site's share of the resident heap pages its live blocks lie on (each page apportioned to
    /// the live blocks on it by their bytes there), and the resident pages only free memory holds
    /// whose last freed block the site allocated (docs/memory-metrics.md, "Heap residency").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_left_bytes: Option<u64>,
}

/// The precision of a sampled site's estimated figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimation {
    /// Every sampled allocation of the site was certain to be sampled (p(size) > 1 - 1e-9): its
    /// figures are exact, the standard errors 0.
    pub exact: bool,
    /// The site's sampled allocations (what the estimates are made from).
    pub sampled_calls: u64,
    /// One standard error of each estimated figure, in its unit.
    pub calls_se: f64,
    pub requested_bytes_se: f64,
    pub peak_live_bytes_se: f64,
    pub leaked_bytes_se: f64,
    pub leaked_blocks_se: f64,
    /// One standard error of `share_lifetime_zero` (a ratio of two estimates), as a share.
    #[serde(default)]
    pub share_lifetime_zero_se: f64,
}

impl Estimation {
    /// The standard error of the figure `key` sorts by.
    pub fn se_of(&self, key: SortKey) -> f64 {
        match key {
            SortKey::Calls => self.calls_se,
            SortKey::Bytes => self.requested_bytes_se,
            SortKey::PeakLive => self.peak_live_bytes_se,
            SortKey::Leaked => self.leaked_bytes_se,
        }
    }
}

/// A function that made allocating calls (or is on the stack of some).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionSite {
    /// The function name, or `module+0xADDR`.
    pub function: String,
    pub module: String,
    /// Where the function made its calls, when a single `file:line` (else the first one seen).
    pub location: Option<String>,
    /// The calls it made itself (it is the innermost frame once the allocator's are dropped).
    pub figures: SiteFigures,
    /// Calls and requested bytes of every stack it is on (its callees' included).
    pub calls_inclusive: u64,
    pub bytes_inclusive: u64,
}

/// A whole call path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackSite {
    /// Innermost first, the allocator's own frames dropped. Shared: the stacks of a trace repeat
    /// the same frames (outer ones above all), each held once.
    pub frames: Vec<Arc<SiteFrame>>,
    pub figures: SiteFigures,
    /// The trace's stack ids folded here.
    pub stack_ids: Vec<u32>,
}

impl StackSite {
    /// The frame labels root-first, as flame graphs take them.
    pub fn root_first(&self) -> Vec<&str> {
        self.frames.iter().rev().map(|f| f.label.as_str()).collect()
    }
}

/// What `analyze_file` needs to resolve and fold call sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSiteOptions {
    pub sort: SortKey,
    /// Where separate debug files are looked for (`ROOT/.build-id/xx/yyyy.debug`, debuglink).
    pub debug_roots: Vec<std::path::PathBuf>,
}

impl Default for CallSiteOptions {
    fn default() -> Self {
        CallSiteOptions {
            sort: SortKey::Calls,
            debug_roots: vec!["/usr/lib/debug".into()],
        }
    }
}

/// Resolves and folds the per-stack figures of `images` of a trace whose stack table and modules
/// are given.
pub fn resolve(
    images: &[crate::sites::ProcessSites],
    stacks: &trace::StackTable,
    modules: &[trace::Module],
    options: &CallSiteOptions,
    stack_sample_bytes: Option<u64>,
) -> CallSites {
    let infos: Vec<trace::ProcessInfo> = images.iter().map(|i| i.info.clone()).collect();
    let inputs = images
        .iter()
        .map(|image| FoldInput {
            info: &image.info,
            sites: &image.sites,
            space: address_space(&image.info, &infos, modules),
            residency: image.residency,
        })
        .collect();
    let mut symbolizer = symbols::Symbolizer::new(options.debug_roots.clone());
    let mut sites = fold(inputs, stacks, &mut symbolizer, options.sort);
    sites.stack_sample_bytes = stack_sample_bytes;
    if stack_sample_bytes.is_some() {
        // A function that is only ever a caller made no sampled call itself: its own figures are
        // estimated as 0, with nothing to say how good that is.
        for p in &mut sites.processes {
            for f in &mut p.functions {
                f.figures.estimate.get_or_insert_with(Estimation::default);
            }
        }
    }
    sites
}

/// Which figure sorts the call sites (`analyze --sites --sort`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortKey {
    #[default]
    Calls,
    Bytes,
    PeakLive,
    Leaked,
}

impl SortKey {
    pub fn value(self, f: &SiteFigures) -> u64 {
        match self {
            SortKey::Calls => f.calls,
            SortKey::Bytes => f.requested_bytes,
            SortKey::PeakLive => f.peak_live_bytes,
            SortKey::Leaked => f.leaked_bytes,
        }
    }
}

impl ProcessSites {
    /// Sorts both lists by `key`, largest first (ties: calls, then name), as the outputs show them.
    pub fn sort_by(&mut self, key: SortKey) {
        self.functions.sort_by(|a, b| {
            (key.value(&b.figures), b.figures.calls, b.calls_inclusive)
                .cmp(&(key.value(&a.figures), a.figures.calls, a.calls_inclusive))
                .then_with(|| a.function.cmp(&b.function))
        });
        self.stacks.sort_by(|a, b| {
            (key.value(&b.figures), b.figures.calls)
                .cmp(&(key.value(&a.figures), a.figures.calls))
                .then_with(|| a.stack_ids.cmp(&b.stack_ids))
        });
    }
}
