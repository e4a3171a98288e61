//! Per-call-site statistics (traces recorded with `record --stacks`): one streaming pass per
//! process image, keyed by stack id (`trace::Event::stack`). Symbolising the stacks, and folding
//! them by function, is for the presentation; this module only counts.
//!
//! Attribution (docs/metrics.md, "Call sites"): an allocation belongs to its stack; a realloc
//! that returns a block counts as a call at its own stack, ends the old block (its lifetime is
//! recorded at the old block's site) and starts the new one at the realloc's stack, as a free
//! and an allocation would; a failed realloc counts as a call and leaves the block as it was.
//! Memory is bounded by the live set plus one accumulator per stack id.
//!
//! `SitePass` counts; which block an event begins or ends it is told (`BlockObserver`), its
//! per-block state (`SiteTag`) kept in the live set of the pass that matched the block: the
//! process pass's in `analyze`, `SiteAnalyzer`'s own when the sites are read alone.
use std::io::{Read, Seek};

use trace::{Event, Op, ProcessInfo, Record, TraceError, TraceReader};

use crate::block_observer::BlockObserver;
use crate::calibration::{self, Calibration, Estimator};
use crate::hash::FastMap;
use crate::histogram::LogHistogram;
use crate::live_blocks::Live;
use crate::residency::{Block, SitesReading, SitesResidency};
use crate::sampling::{Estimate, Sampling, SiteEstimates, Weight, WeightCache};

/// What one stack did in one process image.
#[derive(Debug, Clone, Default)]
pub struct SiteStats {
    /// The stack id (`trace::StackTable`); 0 gathers the calls recorded without a stack.
    pub stack: u32,
    pub pid: u32,
    /// Allocation and realloc calls made from this stack (failed ones included).
    pub calls: u64,
    /// Bytes those calls requested.
    pub requested_bytes: u64,
    /// Bytes of this site's blocks live when the process's live bytes reached their peak (the
    /// first time they reached it).
    pub peak_live_bytes: u64,
    /// Blocks of this site still live when the stream ended, and their bytes.
    pub leaked_bytes: u64,
    pub leaked_blocks: u64,
    /// Blocks of this site that ended (freed, or moved by a realloc).
    pub ended: u64,
    /// Of those, the ones freed by the very next allocator call of the process (lifetime 0).
    pub lifetime_zero: u64,
    /// Lifetimes of the ended blocks in allocator calls (calls of the process between the
    /// allocation and the free) and in ns.
    pub lifetime_calls: LogHistogram,
    pub lifetime_ns: LogHistogram,
    /// Requested sizes of the calls.
    pub sizes: LogHistogram,
    /// When stacks were sampled: the site's figures (post-stratified, `crate::calibration`) and
    /// distributions (weighted by 1/p) estimated from its sampled
    /// allocations (the counts and histograms above are those of the sampled allocations only,
    /// unweighted). None for stack 0.
    pub estimates: Option<SiteEstimates>,
    /// At the image's residency reading (`ProcessSites::residency`, 0 without one): its live
    /// blocks' share of the resident heap pages, and the pages only free memory holds whose last
    /// freed block it allocated (`crate::residency`).
    pub resident_bytes: f64,
    pub free_left_bytes: u64,
}

impl SiteStats {
    /// Share of the ended blocks that lived 0 calls (0 when none ended).
    pub fn lifetime_zero_share(&self) -> f64 {
        if self.ended == 0 {
            0.0
        } else {
            self.lifetime_zero as f64 / self.ended as f64
        }
    }
}

/// The sites of one process image.
#[derive(Debug, Clone)]
pub struct ProcessSites {
    pub info: ProcessInfo,
    /// The process's peak of live requested bytes (what `peak_live_bytes` is measured at).
    pub peak_live_bytes: u64,
    /// Its sites, by stack id (only stacks the image used).
    pub sites: Vec<SiteStats>,
    /// With `SiteAnalyzer::with_residency`: the reading the sites' resident figures are taken at.
    pub residency: Option<SitesReading>,
}

/// What the pass keeps of a live block, in the live set's value beside the block's figures
/// (`BlockObserver::Tag`): its stack, and where it started when a realloc moved it (the set's
/// `Live` keeps the start of the realloc chain; a site counts the moved block from the realloc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SiteTag {
    stack: u32,
    /// 0: the block started where its `Live` starts; else its start in `MovedStarts`.
    moved: u32,
}

/// The starts (seq, ns) of the live blocks a realloc moved, by `SiteTag::moved`: a slab whose
/// slots are reused once their block ends.
#[derive(Clone, Default)]
struct MovedStarts {
    starts: Vec<(u64, u64)>,
    free: Vec<u32>,
}

impl MovedStarts {
    fn put(&mut self, start: (u64, u64)) -> u32 {
        if let Some(i) = self.free.pop() {
            self.starts[i as usize - 1] = start;
            return i;
        }
        self.starts.push(start);
        u32::try_from(self.starts.len()).expect("fewer than 2^32 live blocks")
    }

    /// Where the block of `tag` (whose figures are `live`) started: (seq, ns).
    fn start(&self, tag: SiteTag, live: &Live) -> (u64, u64) {
        match tag.moved {
            0 => (live.start_seq, live.start_ns),
            i => self.starts[i as usize - 1],
        }
    }

    /// The block of `tag` ended: its slot, if any, is free again.
    fn release(&mut self, tag: SiteTag) {
        if tag.moved != 0 {
            self.free.push(tag.moved);
        }
    }
}

#[derive(Default, Clone)]
struct Acc {
    stats: SiteStats,
    live: u64,
    /// Live bytes at the last process peak, valid when `saved_at == ` that peak's number.
    saved: u64,
    saved_at: u64,
    /// With sampling: the estimates, the estimated live bytes and their value at the last peak.
    est: SiteEstimates,
    live_est: Estimate,
    saved_est: Estimate,
}

/// The per-site figures of one image, told which block each event begins and ends by the pass
/// that matches them (`crate::process::ProcessAnalyzer::with_observer`, or `SiteAnalyzer`).
#[derive(Clone)]
pub struct SitePass {
    info: ProcessInfo,
    /// Stack id -> 1 + its accumulator's index in `sites` (0: not used by the image): 4 bytes
    /// per stack id of the trace instead of an accumulator of about 930 bytes, whose vector was
    /// 18-30 MiB for every image of a 20,000-stack trace while it was analysed (two at once with
    /// `--threads 2`), however few stacks the image used.
    slots: Vec<u32>,
    /// (stack id, accumulator), in the order first used.
    sites: Vec<(u32, Acc)>,
    moved: MovedStarts,
    live_bytes: u64,
    peak_bytes: u64,
    /// Peaks reached so far: a site saves its live bytes the first time it changes after one.
    peaks: u64,
    sampling: Option<Sampling>,
    weights: Option<WeightCache>,
    /// With sampling: the sample and the exact totals per site and size, for `estimator`.
    calibration: Option<Calibration>,
    estimator: Estimator,
    /// Blocks live where a truncated stream stops count as leaked (`live_at_cut_is_leaked`).
    cut_is_end: bool,
    /// The split at the image's site reading (`with_residency`), and whether the stream was cut
    /// by damage before its end.
    residency: Option<SitesResidency>,
    stream_cut: bool,
}

impl SitePass {
    pub fn new(info: ProcessInfo) -> Self {
        SitePass {
            info,
            slots: Vec::new(),
            sites: Vec::new(),
            moved: MovedStarts::default(),
            live_bytes: 0,
            peak_bytes: 0,
            peaks: 0,
            sampling: None,
            weights: None,
            calibration: None,
            estimator: Estimator::default(),
            cut_is_end: false,
            residency: None,
            stream_cut: false,
        }
    }

    /// See `SiteAnalyzer::with_sampling`.
    pub fn with_sampling(info: ProcessInfo, sampling: Option<Sampling>) -> Self {
        SitePass {
            sampling,
            weights: sampling.map(WeightCache::new),
            calibration: sampling.map(Calibration::new),
            ..Self::new(info)
        }
    }

    /// See `SiteAnalyzer::with_estimator`.
    pub fn with_estimator(mut self, estimator: Estimator) -> Self {
        self.estimator = estimator;
        self
    }

    /// See `SiteAnalyzer::live_at_cut_is_leaked`.
    pub fn live_at_cut_is_leaked(mut self) -> Self {
        self.cut_is_end = true;
        self
    }

    /// See `SiteAnalyzer::with_residency`.
    pub fn with_residency(mut self, readings: &[trace::Residency]) -> Self {
        self.residency = SitesResidency::new(readings);
        self
    }

    /// How an allocation of `size` from `stack` counts in the estimates (None: no estimates).
    fn weight(&mut self, stack: u32, size: u64) -> Option<Weight> {
        let weights = self.weights.as_mut().filter(|_| stack != 0)?;
        Some(weights.weight(size))
    }

    fn site(&mut self, stack: u32) -> &mut Acc {
        let i = stack as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, 0);
        }
        if self.slots[i] == 0 {
            self.sites.push((stack, Acc::default()));
            self.slots[i] = u32::try_from(self.sites.len()).expect("a stack id is a u32");
        }
        &mut self.sites[self.slots[i] as usize - 1].1
    }

    /// Changes a site's live bytes, keeping its value at the last peak.
    fn change_live(&mut self, stack: u32, add: u64, sub: u64) {
        let peaks = self.peaks;
        let weight = self.weight(stack, add.max(sub));
        if let Some(c) = &mut self.calibration {
            c.live(stack, add.max(sub), add > 0, peaks);
        }
        let s = self.site(stack);
        if s.saved_at != peaks {
            s.saved = s.live;
            s.saved_est = s.live_est;
            s.saved_at = peaks;
        }
        s.live = s.live.wrapping_add(add).wrapping_sub(sub);
        if let Some(w) = weight {
            s.live_est.add(w, add as f64);
            s.live_est.remove(w, sub as f64);
        }
        self.live_bytes = self.live_bytes.wrapping_add(add).wrapping_sub(sub);
        if add > 0 && self.live_bytes > self.peak_bytes {
            self.peak_bytes = self.live_bytes;
            self.peaks += 1; // every site's value at this peak is its live bytes now
        }
    }

    /// An allocating call (failed ones included).
    fn call(&mut self, e: &Event) {
        let weight = self.weight(e.stack, e.size);
        if let Some(c) = &mut self.calibration {
            c.call(e.stack, e.size);
        }
        let acc = self.site(e.stack);
        if let Some(w) = weight {
            acc.est.calls.add(w, 1.0);
            acc.est.requested_bytes.add(w, e.size as f64);
            acc.est.sizes.add(e.size, w.weight);
            acc.est.uncertain |= !w.certain;
        }
        let s = &mut acc.stats;
        s.calls += 1;
        s.requested_bytes = s.requested_bytes.saturating_add(e.size);
        s.sizes.record(e.size);
    }

    pub fn finish(mut self) -> ProcessSites {
        let residency = self
            .residency
            .take()
            .and_then(|r| r.finish(!self.stream_cut));
        let (pid, peaks, sampling) = (self.info.pid, self.peaks, self.sampling);
        let calibrated = self
            .calibration
            .as_ref()
            .and_then(|c| c.estimates(self.estimator, peaks));
        // Collected into a vector of its own size: collected in place, the result kept the
        // accumulators' vector: 1.4 GB held until the output on a python3 trace with every
        // stack, when it had a slot per stack id of the trace.
        let mut sites = Vec::with_capacity(self.sites.len());
        self.slots = Vec::new();
        self.sites.sort_unstable_by_key(|&(id, _)| id);
        let used = self.sites.into_iter().map(|(id, a)| {
            let at_peak = a.saved_at == peaks;
            let mut estimates = (sampling.is_some() && id != 0).then_some(SiteEstimates {
                peak_live_bytes: if at_peak { a.saved_est } else { a.live_est },
                ..a.est
            });
            if let (Some(e), Some(c)) = (&mut estimates, &calibrated) {
                let f = c.get(&id).copied().unwrap_or_default();
                e.calls = f[calibration::CALLS];
                e.requested_bytes = f[calibration::REQUESTED_BYTES];
                e.peak_live_bytes = f[calibration::PEAK_LIVE_BYTES];
                e.leaked_bytes = f[calibration::LEAKED_BYTES];
                e.leaked_blocks = f[calibration::LEAKED_BLOCKS];
                e.lifetimes = f[calibration::LIFETIMES];
                e.lifetime_zero = f[calibration::LIFETIME_ZERO];
            }
            let held = residency
                .as_ref()
                .and_then(|(_, split)| split.sites.get(&id))
                .copied()
                .unwrap_or_default();
            SiteStats {
                stack: id,
                pid,
                peak_live_bytes: if at_peak { a.saved } else { a.live },
                estimates,
                resident_bytes: held.resident,
                free_left_bytes: held.free_left,
                ..a.stats
            }
        });
        sites.extend(used);
        ProcessSites {
            info: self.info,
            peak_live_bytes: self.peak_bytes,
            sites,
            residency: residency.map(|(reading, _)| reading),
        }
    }
}

impl BlockObserver for SitePass {
    type Tag = SiteTag;

    #[inline]
    fn event(&mut self, e: &Event) {
        if !e.op.is_free() {
            self.call(e);
        }
    }

    #[inline]
    fn tag(&mut self, e: &Event, moved: bool) -> SiteTag {
        SiteTag {
            stack: e.stack,
            moved: if moved {
                self.moved.put((e.seq, e.t_ns))
            } else {
                0
            },
        }
    }

    #[inline]
    fn begin(&mut self, e: &Event) {
        self.change_live(e.stack, e.size, 0);
    }

    #[inline]
    fn end(&mut self, tag: SiteTag, live: &Live, e: &Event) {
        let (start_seq, start_ns) = self.moved.start(tag, live);
        self.moved.release(tag);
        let (stack, size) = (tag.stack, live.size);
        if let Some(r) = &mut self.residency {
            let address = if e.op.is_realloc() {
                e.old_addr
            } else {
                e.addr
            };
            r.on_free(address, Block { size, stack });
        }
        self.change_live(stack, 0, size);
        let calls = e.seq.saturating_sub(start_seq).saturating_sub(1);
        let weight = self.weight(stack, size);
        if let Some(c) = &mut self.calibration {
            c.ended(stack, size, calls == 0);
        }
        let acc = self.site(stack);
        let lifetime_ns = e.t_ns.saturating_sub(start_ns);
        if let Some(w) = weight {
            acc.est.lifetimes.add(w, 1.0);
            if calls == 0 {
                acc.est.lifetime_zero.add(w, 1.0);
            }
            acc.est.lifetime_calls.add(calls, w.weight);
            acc.est.lifetime_ns.add(lifetime_ns, w.weight);
        }
        let s = &mut acc.stats;
        s.ended += 1;
        if calls == 0 {
            s.lifetime_zero += 1;
        }
        s.lifetime_calls.record(calls);
        s.lifetime_ns.record(lifetime_ns);
    }

    #[inline]
    fn replaced(&mut self, tag: SiteTag, live: &Live) {
        self.moved.release(tag);
        self.change_live(tag.stack, 0, live.size);
    }

    fn live_at_end(&mut self, tag: SiteTag, live: &Live) {
        // A truncated image (cut by damage, killed, or still running at the end of the
        // recording) says nothing of whether its blocks live at the cut would have been freed:
        // none is counted as leaked, by site or in the estimates.
        if self.info.truncated && !self.cut_is_end {
            return;
        }
        let (stack, size) = (tag.stack, live.size);
        let weight = self.weight(stack, size);
        if let Some(c) = &mut self.calibration {
            c.leaked(stack, size);
        }
        let acc = self.site(stack);
        if let Some(w) = weight {
            acc.est.leaked_blocks.add(w, 1.0);
            acc.est.leaked_bytes.add(w, size as f64);
        }
        let s = &mut acc.stats;
        s.leaked_blocks += 1;
        s.leaked_bytes += size;
    }

    fn mark_truncated(&mut self) {
        self.info.truncated = true;
        self.stream_cut = true;
    }

    #[inline(always)]
    fn live_blocks_wanted_at(&self) -> u64 {
        self.residency
            .as_ref()
            .map_or(u64::MAX, SitesResidency::live_blocks_wanted_at)
    }

    fn live_blocks(
        &mut self,
        blocks: &mut dyn Iterator<Item = (u64, Live, SiteTag)>,
        at_end: bool,
    ) {
        let Some(r) = &mut self.residency else {
            return;
        };
        let blocks = blocks.map(|(address, live, tag)| {
            let block = Block {
                size: live.size,
                stack: tag.stack,
            };
            (address, block)
        });
        r.on_live_blocks(blocks, at_end);
    }
}

/// The sites of one image on their own: `push` its events in seq order, then `finish`. It
/// matches frees to blocks itself; `analyze` instead feeds a `SitePass` from the process
/// pass's live set.
#[derive(Clone)]
pub struct SiteAnalyzer {
    pass: SitePass,
    /// Its live blocks by address: a map that can be cloned (`examples/estimator_error.rs`
    /// finishes one analysis with several estimators).
    live: FastMap<u64, (Live, SiteTag)>,
}

impl SiteAnalyzer {
    pub fn new(info: ProcessInfo) -> Self {
        Self::from_pass(SitePass::new(info))
    }

    fn from_pass(pass: SitePass) -> Self {
        SiteAnalyzer {
            pass,
            live: FastMap::default(),
        }
    }

    /// For a trace whose stacks were sampled: the sites' figures are also estimated
    /// (`SiteStats::estimates`).
    pub fn with_sampling(info: ProcessInfo, sampling: Option<Sampling>) -> Self {
        Self::from_pass(SitePass::with_sampling(info, sampling))
    }

    /// Estimates the sampled sites' figures with `estimator` instead of the default (to measure
    /// one against another: `examples/estimator_error.rs`).
    pub fn with_estimator(self, estimator: Estimator) -> Self {
        Self::from_pass(self.pass.with_estimator(estimator))
    }

    /// Counts the blocks live where a truncated image's stream stops (killed, still running when the
    /// recording ended, damage) as leaked, as if the cut were its end: the leaked figures are then
    /// the blocks in use at the end of the trace, what an in-use profile shows (`profiles`). By
    /// default a cut says nothing of whether they would have been freed, and none is leaked.
    pub fn live_at_cut_is_leaked(self) -> Self {
        Self::from_pass(self.pass.live_at_cut_is_leaked())
    }

    /// Takes each site's resident and free-left bytes at the reading of `readings` (the image's,
    /// from a trace recorded with `--addresses`) that `crate::residency::site_reading` picks.
    /// For every stack only: with sampled stacks, most blocks have no site.
    pub fn with_residency(self, readings: &[trace::Residency]) -> Self {
        Self::from_pass(self.pass.with_residency(readings))
    }

    /// A new block at `e.addr` (the address was live already: a free we did not see, it ended
    /// unobserved).
    fn begin(&mut self, e: &Event) {
        let live = Live {
            start_seq: e.seq,
            start_ns: e.t_ns,
            size: e.size,
            cell: 0,
        };
        let tag = self.pass.tag(e, false);
        if let Some((old, old_tag)) = self.live.insert(e.addr, (live, tag)) {
            self.pass.replaced(old_tag, &old);
        }
        self.pass.begin(e);
    }

    fn end(&mut self, addr: u64, e: &Event) {
        // None: allocated before tracing began.
        if let Some((live, tag)) = self.live.remove(&addr) {
            self.pass.end(tag, &live, e);
        }
    }

    pub fn push(&mut self, e: &Event) {
        if e.seq >= self.pass.live_blocks_wanted_at() {
            self.give_live_blocks(false);
        }
        self.pass.event(e);
        match e.op {
            op if op.is_free() => {
                if e.addr != 0 {
                    self.end(e.addr, e);
                }
            }
            Op::Realloc | Op::Reallocarray => {
                if e.addr == 0 {
                    if e.size == 0 && e.old_addr != 0 {
                        self.end(e.old_addr, e); // realloc(p, 0) freed p
                    }
                    return;
                }
                if e.old_addr != 0 {
                    self.end(e.old_addr, e);
                }
                self.begin(e);
            }
            _ => {
                if e.addr != 0 {
                    self.begin(e);
                }
            }
        }
    }

    /// The stream was cut short (damage): its blocks still live at the cut are not leaks.
    pub fn mark_truncated(&mut self) {
        self.pass.mark_truncated();
    }

    /// The pass's residency split wants the live blocks (`BlockObserver::live_blocks`).
    fn give_live_blocks(&mut self, at_end: bool) {
        let mut blocks = self.live.iter().map(|(&a, &(live, tag))| (a, live, tag));
        self.pass.live_blocks(&mut blocks, at_end);
    }

    pub fn finish(mut self) -> ProcessSites {
        if self.pass.live_blocks_wanted_at() != u64::MAX {
            self.give_live_blocks(true);
        }
        for (live, tag) in std::mem::take(&mut self.live).into_values() {
            self.pass.live_at_end(tag, &live);
        }
        self.pass.finish()
    }
}

/// The sites of every process image of a trace, one image at a time (in stream order). Stops at
/// the first chunk that cannot be read, whose error it returns.
pub fn trace_sites<R: Read + Seek>(
    reader: &mut TraceReader<R>,
) -> Result<Vec<ProcessSites>, TraceError> {
    let mut out = Vec::new();
    for s in 0..reader.streams().len() {
        let mut a = SiteAnalyzer::new(reader.streams()[s].info.clone());
        for r in reader.records(s)? {
            if let Record::Event(e) = r? {
                a.push(&e);
            }
        }
        out.push(a.finish());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ProcessInfo {
        ProcessInfo {
            pid: 7,
            ppid: 1,
            exec_index: 0,
            cmdline: vec![],
            start_unix_ns: 0,
            truncated: false,
        }
    }

    fn ev(seq: u64, op: Op, addr: u64, size: u64, old_addr: u64, stack: u32) -> Event {
        Event {
            seq,
            t_ns: seq * 10,
            tid: 1,
            stack,
            op,
            addr,
            size,
            old_addr,
        }
    }

    /// A stream cut short (killed, still running): its live blocks are no leaks, unless the cut
    /// counts as the end (an in-use profile at the end of the trace).
    #[test]
    fn blocks_live_at_a_cut_are_leaked_only_when_the_cut_is_the_end() {
        let cut = ProcessInfo {
            truncated: true,
            ..info()
        };
        for (analyzer, leaked) in [
            (SiteAnalyzer::new(cut.clone()), 0),
            (SiteAnalyzer::new(cut).live_at_cut_is_leaked(), 100),
        ] {
            let mut a = analyzer;
            a.push(&ev(0, Op::Malloc, 0x10, 100, 0, 1));
            let r = a.finish();
            assert_eq!(r.sites[0].leaked_bytes, leaked);
        }
    }

    /// Hand-computed: two sites, a realloc moving a block to a third, a leak, and the peak.
    #[test]
    fn counts_lifetimes_peak_and_leaks_by_site() {
        let mut a = SiteAnalyzer::new(info());
        let events = [
            ev(0, Op::Malloc, 0x10, 100, 0, 1),
            ev(1, Op::Malloc, 0x20, 50, 0, 2), // the peak: 150 (site 1: 100, site 2: 50)
            ev(2, Op::Free, 0x20, 0, 0, 0),    // site 2: lifetime 0
            ev(3, Op::Malloc, 0x30, 30, 0, 2), // 130 live: below the peak of seq 1 (150)
            ev(4, Op::Free, 0x10, 0, 0, 0),    // site 1: lifetime 3
            ev(5, Op::Realloc, 0x40, 10, 0x30, 3), // site 2 ends (lifetime 1), site 3 begins
            ev(6, Op::Malloc, 0, 1 << 40, 0, 1), // failed: a call, nothing live
        ];
        for e in &events {
            a.push(e);
        }
        let r = a.finish();
        assert_eq!(r.peak_live_bytes, 150);
        let by: FastMap<u32, &SiteStats> = r.sites.iter().map(|s| (s.stack, s)).collect();
        let (s1, s2, s3) = (by[&1], by[&2], by[&3]);
        assert_eq!((s1.calls, s1.requested_bytes), (2, 100 + (1 << 40)));
        assert_eq!((s2.calls, s2.requested_bytes), (2, 80));
        assert_eq!((s3.calls, s3.requested_bytes), (1, 10));
        assert_eq!(
            (s1.peak_live_bytes, s2.peak_live_bytes, s3.peak_live_bytes),
            (100, 50, 0)
        );
        assert_eq!(
            (s1.ended, s1.lifetime_zero, s1.lifetime_calls.max()),
            (1, 0, 3)
        );
        assert_eq!(
            (s2.ended, s2.lifetime_zero, s2.lifetime_calls.max()),
            (2, 1, 1)
        );
        assert_eq!((s3.leaked_blocks, s3.leaked_bytes), (1, 10));
        assert_eq!(s1.leaked_blocks + s2.leaked_blocks, 0);
        assert_eq!(s2.lifetime_ns.max(), 20);
        assert!(!by.contains_key(&0), "frees do not make stack 0 a site");
    }

    /// The sites `pass` finds in `events` fed to it by the process pass (in one chunk).
    fn through_the_process_pass(pass: SitePass, events: &[Event]) -> ProcessSites {
        let config = crate::process::Config::default();
        let mut a = crate::ProcessAnalyzer::with_observer(info(), &config, pass);
        let records: Vec<Record> = events.iter().map(|e| Record::Event(*e)).collect();
        a.feed_chunk(&records);
        a.finish_with_observer().1.finish()
    }

    /// The sites of `events`, fed from the process pass's live set (in one chunk) or matched by
    /// `SiteAnalyzer` itself.
    fn sites_of(events: &[Event], sampling: Option<Sampling>, from_process: bool) -> ProcessSites {
        if from_process {
            through_the_process_pass(SitePass::with_sampling(info(), sampling), events)
        } else {
            let mut a = SiteAnalyzer::with_sampling(info(), sampling);
            for e in events {
                a.push(e);
            }
            a.finish()
        }
    }

    /// In one chunk: an address freed and handed out again to another stack, then freed; a
    /// realloc that moves a block, its old address handed out again; a realloc in place. Each
    /// free ends the block the live set holds at its address, at that block's stack, and a
    /// moved block's lifetime counts from the realloc (the live set's figures keep the
    /// chain's start).
    #[test]
    fn a_free_ends_the_block_the_live_set_matched() {
        let events = [
            ev(0, Op::Malloc, 0x10, 100, 0, 1),
            ev(1, Op::Free, 0x10, 0, 0, 0),
            ev(2, Op::Malloc, 0x10, 40, 0, 2), // the address again, another stack
            ev(3, Op::Malloc, 0x50, 7, 0, 6),
            ev(4, Op::Free, 0x10, 0, 0, 0), // stack 2's block: lifetime 1
            ev(5, Op::Malloc, 0x20, 8, 0, 3),
            ev(6, Op::Realloc, 0x30, 64, 0x20, 4), // stack 3's ends (0), stack 4's begins
            ev(7, Op::Malloc, 0x20, 16, 0, 5),     // the old address again
            ev(8, Op::Malloc, 0x60, 1, 0, 6),
            ev(9, Op::Free, 0x30, 0, 0, 0), // stack 4's block: lifetime 2 (not 3)
            ev(10, Op::Free, 0x20, 0, 0, 0), // stack 5's block: lifetime 2
            ev(11, Op::Realloc, 0x50, 9, 0x50, 7), // in place: stack 6's ends (7)
        ];
        for from_process in [true, false] {
            let r = sites_of(&events, None, from_process);
            let by: FastMap<u32, &SiteStats> = r.sites.iter().map(|s| (s.stack, s)).collect();
            let ended = |stack: u32| {
                let s = by[&stack];
                (
                    s.ended,
                    s.lifetime_calls.max(),
                    s.lifetime_ns.max(),
                    s.leaked_blocks,
                    s.leaked_bytes,
                )
            };
            let how = if from_process { "process" } else { "alone" };
            assert_eq!(ended(1), (1, 0, 10, 0, 0), "{how}");
            assert_eq!(ended(2), (1, 1, 20, 0, 0), "{how}");
            assert_eq!(ended(3), (1, 0, 10, 0, 0), "{how}");
            assert_eq!(ended(4), (1, 2, 30, 0, 0), "{how}");
            assert_eq!(ended(5), (1, 2, 30, 0, 0), "{how}");
            assert_eq!(ended(6), (1, 7, 80, 1, 1), "{how}");
            assert_eq!(ended(7), (0, 0, 0, 1, 9), "{how}");
            assert_eq!(r.peak_live_bytes, 100, "{how}");
        }
    }

    /// The next state of a xorshift64 generator: the random events of the two tests below.
    fn xorshift(rng: &mut u64) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
    }

    /// Random allocations, frees and reallocs (moving, in place, to 0, failed, of unknown
    /// blocks, onto live addresses) over few addresses: the sites fed from the process pass are
    /// those `SiteAnalyzer` finds matching the frees itself, with every stack and sampled.
    #[test]
    fn sites_fed_by_the_process_pass_are_the_sites_found_alone() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut events = Vec::new();
        for seq in 0..30_000u64 {
            xorshift(&mut rng);
            let addr = 16 * (1 + (rng >> 8) % 200);
            let other = 16 * (1 + (rng >> 24) % 200);
            let size = 1 + (rng >> 40) % 3000;
            let stack = ((rng >> 50) % 12) as u32;
            let e = match rng % 10 {
                0..=3 => ev(seq, Op::Malloc, addr, size, 0, stack),
                4..=6 => ev(seq, Op::Free, addr, 0, 0, 0),
                7 => ev(seq, Op::Realloc, addr, size, other, stack),
                8 => ev(seq, Op::Realloc, 0, (rng >> 60) % 2, other, stack),
                _ => ev(seq, Op::Calloc, addr, size, 0, stack),
            };
            events.push(e);
        }
        for sampling in [None, Sampling::new(512)] {
            let fed = sites_of(&events, sampling, true);
            let alone = sites_of(&events, sampling, false);
            assert!(fed.sites.iter().any(|s| s.ended > 0 && s.leaked_blocks > 0));
            assert_eq!(fed.peak_live_bytes, alone.peak_live_bytes);
            assert_eq!(fed.sites.len(), alone.sites.len());
            for (a, b) in fed.sites.iter().zip(&alone.sites) {
                let sampled = sampling.is_some();
                // Compared whole (their Debug form), reported by site: a site is long to print.
                assert!(
                    format!("{a:?}") == format!("{b:?}"),
                    "site {} differs (sampled: {sampled})",
                    a.stack
                );
            }
        }
    }

    /// The sites' resident and free-left bytes, taken from the process pass's live set handed
    /// over at the reading (and at the end, for a reading after the last event), are those of
    /// the `--residency` pass, which follows every block in a map of its own: random events
    /// over a few pages, reallocs moving, in place, to 0, failed, onto live addresses.
    #[test]
    fn the_sites_residency_is_the_residency_pass_split() {
        use crate::residency::ResidencyPass;
        use trace::{Residency, ResidentMapping};
        let (page, base) = (0x1000u64, 0x100000u64);
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut events = Vec::new();
        for seq in 0..20_000u64 {
            xorshift(&mut rng);
            // Four places a page on 64 pages: some pages are left with no live block.
            let at = |r: u64| base + (r % 64) * page + (r >> 6) % 4 * 1024;
            let (addr, other) = (at(rng >> 8), at(rng >> 24));
            let size = 1 + (rng >> 40) % 300;
            let stack = 1 + ((rng >> 50) % 9) as u32;
            events.push(match rng % 10 {
                0..=2 => ev(seq, Op::Malloc, addr, size, 0, stack),
                3..=6 => ev(seq, Op::Free, addr, 0, 0, 0),
                7 => ev(seq, Op::Realloc, addr, size, other, stack),
                8 => ev(seq, Op::Realloc, 0, (rng >> 60) % 2, other, stack),
                _ => ev(seq, Op::Calloc, addr, size, 0, stack),
            });
        }
        for seq in [7_000, 30_000] {
            // Every other page resident, and a mapping the blocks never use.
            let runs = (0..32).map(|i| (base + 2 * i * page, base + (2 * i + 1) * page));
            let reading = Residency {
                seq,
                t_ns: seq * 10,
                page_size: page,
                mappings: vec![
                    ResidentMapping {
                        start: base,
                        end: base + 64 * page,
                        runs: runs.collect(),
                    },
                    ResidentMapping {
                        start: 0x900000,
                        end: 0x902000,
                        runs: vec![(0x900000, 0x901000)],
                    },
                ],
            };
            let mut own = ResidencyPass::new(vec![reading.clone()]);
            events.iter().for_each(|e| own.on_event(e));
            let (_, want) = own.finish(true).pop().unwrap();
            assert!(
                want.parts.live_blocks > 0 && want.parts.free_only > 0,
                "{seq}"
            );
            for from_process in [true, false] {
                let readings = std::slice::from_ref(&reading);
                let got = if from_process {
                    let pass = SitePass::new(info()).with_residency(readings);
                    through_the_process_pass(pass, &events)
                } else {
                    let mut a = SiteAnalyzer::new(info()).with_residency(readings);
                    events.iter().for_each(|e| a.push(e));
                    a.finish()
                };
                let how = format!("reading at {seq}, from the process pass: {from_process}");
                assert_eq!(got.residency.unwrap().parts, want.parts, "{how}");
                for s in &got.sites {
                    let w = want.sites.get(&s.stack).copied().unwrap_or_default();
                    assert_eq!(
                        (s.resident_bytes, s.free_left_bytes),
                        (w.resident, w.free_left),
                        "stack {}, {how}",
                        s.stack
                    );
                }
            }
        }
    }
}
