//! Resolving each stack of a process and adding its figures into its stack site and function sites.
use hashbrown::HashMap;
use trace::{ProcessInfo, StackTable};

use super::frame_table::{site_frame, FrameId, FrameTable, FunctionId};
use super::{
    CallSites, Estimation, FunctionSite, ProcessSites, SiteFigures, SiteFrame, SortKey, Spread,
    StackSite,
};
use crate::histogram::{LogHistogram, WeightedCounts};
use crate::sampling::{share_standard_error, SiteEstimates};
use crate::sites::SiteStats;

/// One process image's per-stack figures and the mappings its stacks' addresses are in.
pub struct FoldInput<'a> {
    pub info: &'a ProcessInfo,
    pub sites: &'a [SiteStats],
    pub space: symbols::AddressSpace,
    /// The reading the sites' resident figures were taken at, when the image has one.
    pub residency: Option<crate::residency::SitesReading>,
}

/// The entry points the shim records, and C++'s operators: frames of these are the allocator's,
/// not the program's call site. (The shim drops its own frames when it takes the stack; a
/// program's allocation through libstdc++'s `operator new` still has that frame first.)
const ALLOCATOR_FUNCTIONS: [&str; 12] = [
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "cfree",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "__libc_malloc",
];

/// Rust's global-allocator path, from `Box::new`/`Vec`'s growth down to `malloc`: like C++'s
/// operators, these frames say "allocates", not where. (Without this every Rust program's top
/// allocating function read `alloc::alloc::alloc` or `alloc::alloc::realloc`.) Collections' own
/// frames (`alloc::raw_vec::...`) stay: they say what grew.
const RUST_ALLOCATOR_PREFIXES: [&str; 8] = [
    "alloc::alloc::",
    "<alloc::alloc::Global",
    "__rust_alloc",
    "__rust_realloc",
    "__rust_dealloc",
    "__rdl_",
    "std::sys::alloc::",
    "<std::alloc::System as core::alloc::GlobalAlloc>",
];

/// True for a frame that belongs to the allocator rather than to the program's call site.
pub fn is_allocator_frame(frame: &SiteFrame) -> bool {
    frame.function.as_deref().is_some_and(is_allocator_function)
}

/// True for the (demangled) name of a function of the allocator's path rather than the program's.
pub fn is_allocator_function(name: &str) -> bool {
    ALLOCATOR_FUNCTIONS.contains(&name)
        || name.starts_with("operator new")
        || name.starts_with("operator delete")
        || RUST_ALLOCATOR_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str) -> SiteFrame {
        SiteFrame {
            label: function.to_string(),
            function: Some(function.to_string()),
            file: None,
            line: None,
            inlined: true,
            module: "p".to_string(),
            module_address: 0,
        }
    }

    /// The frames of a real `rustc -O` program's `Box::new` and `String::push` stacks (seen in
    /// `analyze --sites` output): the global-allocator path is the allocator's, the collection
    /// and the program's functions are call sites.
    #[test]
    fn rusts_global_allocator_frames_are_the_allocators() {
        for name in [
            "alloc::alloc::alloc",
            "alloc::alloc::realloc",
            "<alloc::alloc::Global>::grow_impl_runtime",
            "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            "__rust_alloc",
            "__rdl_realloc",
            "operator new(unsigned long)",
            "malloc",
        ] {
            assert!(is_allocator_frame(&frame(name)), "{name}");
        }
        for name in [
            "alloc::raw_vec::RawVecInner<A>::finish_grow",
            "<alloc::string::String>::push",
            "p::make_boxes",
            "allocate_dtv",
        ] {
            assert!(!is_allocator_frame(&frame(name)), "{name}");
        }
    }
}

/// Figures added up before they are summarised.
#[derive(Default)]
struct Sum {
    calls: u64,
    requested_bytes: u64,
    peak_live_bytes: u64,
    leaked_bytes: u64,
    leaked_blocks: u64,
    lifetime_zero: u64,
    lifetime_calls: LogHistogram,
    lifetime_ns: LogHistogram,
    sizes: LogHistogram,
    stacks: u64,
    /// With sampled stacks: the estimates added up (variances add: allocations are sampled
    /// independently).
    est: Option<SiteEstimates>,
    /// Shares of pages add up as fractions, rounded once at the end.
    resident_bytes: f64,
    free_left_bytes: u64,
}

impl Sum {
    fn add(&mut self, s: &SiteStats) {
        self.add_counted(s);
        if let Some(e) = &s.estimates {
            self.est.get_or_insert_with(SiteEstimates::default).merge(e);
        }
    }

    /// Adds what was counted of `s`, not its estimates.
    fn add_counted(&mut self, s: &SiteStats) {
        self.calls += s.calls;
        self.requested_bytes += s.requested_bytes;
        self.peak_live_bytes += s.peak_live_bytes;
        self.leaked_bytes += s.leaked_bytes;
        self.leaked_blocks += s.leaked_blocks;
        self.lifetime_zero += s.lifetime_zero;
        self.lifetime_calls.merge(&s.lifetime_calls);
        self.lifetime_ns.merge(&s.lifetime_ns);
        self.sizes.merge(&s.sizes);
        self.stacks += 1;
        self.resident_bytes += s.resident_bytes;
        self.free_left_bytes += s.free_left_bytes;
    }

    /// `figures` with the resident figures when the image has a residency reading.
    fn with_residency(&self, mut figures: SiteFigures, has_reading: bool) -> SiteFigures {
        if has_reading {
            figures.resident_bytes = Some(self.resident_bytes.round() as u64);
            figures.free_left_bytes = Some(self.free_left_bytes);
        }
        figures
    }

    fn figures(&self) -> SiteFigures {
        let spread = |h: &LogHistogram| Spread {
            median: h.quantile(0.5),
            p90: h.quantile(0.9),
            max: (h.total() > 0).then(|| h.max()),
        };
        let lifetimes = self.lifetime_calls.total();
        if let Some(e) = &self.est {
            let share = if e.lifetimes.value > 0.0 {
                e.lifetime_zero.value / e.lifetimes.value
            } else {
                0.0
            };
            return SiteFigures {
                calls: e.calls.rounded(),
                requested_bytes: e.requested_bytes.rounded(),
                peak_live_bytes: e.peak_live_bytes.rounded(),
                leaked_bytes: e.leaked_bytes.rounded(),
                leaked_blocks: e.leaked_blocks.rounded(),
                lifetimes: e.lifetimes.rounded(),
                lifetime_zero: e.lifetime_zero.rounded(),
                share_lifetime_zero: share,
                lifetime_calls: weighted_spread(&e.lifetime_calls, &self.lifetime_calls),
                lifetime_ns: weighted_spread(&e.lifetime_ns, &self.lifetime_ns),
                sizes: weighted_spread(&e.sizes, &self.sizes),
                stacks: self.stacks,
                estimate: Some(Estimation {
                    exact: !e.uncertain,
                    sampled_calls: self.calls,
                    calls_se: e.calls.standard_error(),
                    requested_bytes_se: e.requested_bytes.standard_error(),
                    peak_live_bytes_se: e.peak_live_bytes.standard_error(),
                    leaked_bytes_se: e.leaked_bytes.standard_error(),
                    leaked_blocks_se: e.leaked_blocks.standard_error(),
                    share_lifetime_zero_se: share_standard_error(&e.lifetime_zero, &e.lifetimes),
                }),
                resident_bytes: None,
                free_left_bytes: None,
            };
        }
        SiteFigures {
            calls: self.calls,
            requested_bytes: self.requested_bytes,
            peak_live_bytes: self.peak_live_bytes,
            leaked_bytes: self.leaked_bytes,
            leaked_blocks: self.leaked_blocks,
            lifetimes,
            lifetime_zero: self.lifetime_zero,
            share_lifetime_zero: if lifetimes == 0 {
                0.0
            } else {
                self.lifetime_zero as f64 / lifetimes as f64
            },
            lifetime_calls: spread(&self.lifetime_calls),
            lifetime_ns: spread(&self.lifetime_ns),
            sizes: spread(&self.sizes),
            stacks: self.stacks,
            estimate: None,
            resident_bytes: None,
            free_left_bytes: None,
        }
    }
}

/// A sampled image's exact totals, for a site that made every sampled allocation of it.
struct Image {
    /// Every call of the image added up as counted (sampled and not): its exact figures.
    all: Sum,
    /// The image's sampled allocating calls.
    sampled_calls: u64,
}

impl Image {
    fn of(sites: &[SiteStats]) -> Image {
        let mut all = Sum::default();
        let mut sampled_calls = 0;
        for s in sites {
            all.add_counted(s);
            if s.estimates.is_some() {
                sampled_calls += s.calls;
            }
        }
        Image { all, sampled_calls }
    }

    /// The figures of a site: when it made every sampled allocation, the unsampled calls are its
    /// too as far as the sample can tell, and its figures are the image's exact totals (no ±:
    /// an estimate's floor of one sample's variance made "± 194.8 %" of such a peak); else its
    /// estimates.
    fn figures(&self, site: &Sum) -> SiteFigures {
        if site.est.is_none() || self.sampled_calls == 0 || site.calls != self.sampled_calls {
            return site.figures();
        }
        SiteFigures {
            stacks: site.stacks,
            estimate: Some(Estimation {
                exact: true,
                sampled_calls: site.calls,
                ..Estimation::default()
            }),
            ..self.all.figures()
        }
    }
}

/// The spread of a sampled site: the median and p90 of its allocations, each sampled one counting
/// for 1/p of them; the max is the largest value sampled (no weighting makes a maximum unbiased).
fn weighted_spread(weighted: &WeightedCounts, sampled: &LogHistogram) -> Spread {
    Spread {
        median: weighted.quantile(0.5),
        p90: weighted.quantile(0.9),
        max: (sampled.total() > 0).then(|| sampled.max()),
    }
}

/// Resolves stack `addresses` (innermost first) into frames, innermost first, the allocator's own
/// frames at the top dropped (one frame is always kept).
pub(crate) fn resolve_stack(
    addresses: &[u64],
    space: &symbols::AddressSpace,
    symbolizer: &mut symbols::Symbolizer,
) -> Vec<SiteFrame> {
    let mut frames: Vec<SiteFrame> = Vec::with_capacity(addresses.len());
    for &a in addresses {
        frames.extend(symbolizer.resolve(space.find(a), a).iter().map(site_frame));
    }
    let allocator = frames.iter().take_while(|f| is_allocator_frame(f)).count();
    frames.drain(..allocator.min(frames.len().saturating_sub(1)));
    frames
}

/// The one frame of the site of sampled allocations whose stack could not be taken.
fn stack_not_taken() -> SiteFrame {
    SiteFrame {
        label: "[stack not taken]".to_string(),
        function: None,
        file: None,
        line: None,
        inlined: false,
        module: String::new(),
        module_address: 0,
    }
}

#[derive(Default)]
struct FunctionSum {
    sum: Sum,
    location: Option<String>,
    /// Sums of estimates when sampled, rounded at the end (exact integers below 2^53 otherwise).
    calls_inclusive: f64,
    bytes_inclusive: f64,
}

/// One image's sites by function, in the order first met.
#[derive(Default)]
struct Functions {
    slot: HashMap<FunctionId, usize>,
    sums: Vec<(FunctionId, FunctionSum)>,
}

impl Functions {
    fn get(&mut self, function: FunctionId) -> &mut FunctionSum {
        let next = self.sums.len();
        let i = *self.slot.entry(function).or_insert(next);
        if i == next {
            self.sums.push((function, FunctionSum::default()));
        }
        &mut self.sums[i].1
    }
}

/// Resolves and folds the call sites of every image in `inputs` (in that order), sorted by `sort`.
pub fn fold(
    inputs: Vec<FoldInput>,
    stacks: &StackTable,
    symbolizer: &mut symbols::Symbolizer,
    sort: SortKey,
) -> CallSites {
    let mut out = CallSites::default();
    let mut table = FrameTable::default();
    let not_taken = table.intern(stack_not_taken());
    let (mut frames, mut on_stack) = (Vec::new(), Vec::new());
    for input in inputs {
        let image = Image::of(input.sites);
        let has_reading = input.residency.is_some();
        let mut without_stack = Sum::default();
        let mut by_stack: HashMap<Vec<FrameId>, (Sum, Vec<u32>)> = HashMap::new();
        let mut by_function = Functions::default();
        for s in input.sites {
            match stacks.get(s.stack) {
                Some(addresses) if !addresses.is_empty() => {
                    table.resolve_stack(addresses, &input.space, symbolizer, &mut frames)
                }
                // Sampled, but the stack could not be taken: the sample still counts (leaving it
                // out would bias every estimate down), under a site of its own.
                Some(_) if s.estimates.is_some() => {
                    frames.clear();
                    frames.push(not_taken);
                }
                _ => {
                    without_stack.add(s);
                    continue;
                }
            };
            let caller = frames[0];
            let f = by_function.get(table.function(caller));
            f.sum.add(s);
            if f.location.is_none() {
                f.location = table.frame(caller).location();
            }
            on_stack.clear();
            on_stack.extend(frames.iter().map(|&id| table.function(id)));
            on_stack.sort_unstable();
            on_stack.dedup();
            let (calls, bytes) = match &s.estimates {
                Some(e) => (e.calls.value, e.requested_bytes.value),
                None => (s.calls as f64, s.requested_bytes as f64),
            };
            for &function in &on_stack {
                let f = by_function.get(function);
                f.calls_inclusive += calls;
                f.bytes_inclusive += bytes;
            }
            let entry = by_stack.entry_ref(frames.as_slice()).or_default();
            entry.0.add(s);
            entry.1.push(s.stack);
        }
        let mut process = ProcessSites {
            pid: input.info.pid,
            exec_index: input.info.exec_index,
            cmdline: input.info.cmdline.clone(),
            functions: by_function
                .sums
                .into_iter()
                .map(|(function, f)| {
                    let named = table.function_frame(function);
                    FunctionSite {
                        function: named.label.clone(),
                        module: named.module.clone(),
                        location: f.location,
                        figures: f.sum.with_residency(image.figures(&f.sum), has_reading),
                        calls_inclusive: f.calls_inclusive.max(0.0).round() as u64,
                        bytes_inclusive: f.bytes_inclusive.max(0.0).round() as u64,
                    }
                })
                .collect(),
            stacks: by_stack
                .into_iter()
                .map(|(frames, (sum, mut ids))| {
                    ids.sort_unstable();
                    ids.dedup();
                    StackSite {
                        frames: frames.iter().map(|&id| table.frame(id).clone()).collect(),
                        figures: sum.with_residency(image.figures(&sum), has_reading),
                        stack_ids: ids,
                    }
                })
                .collect(),
            without_stack: without_stack.with_residency(without_stack.figures(), has_reading),
            residency: input.residency,
        };
        process.sort_by(sort);
        out.processes.push(process);
    }
    out.warnings = symbolizer
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    out
}
