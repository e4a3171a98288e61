//! Per-call-site statistics (traces recorded with `record --stacks`): one streaming pass per
//! process image, keyed by stack id (`trace::Event::stack`). Symbolising the stacks, and folding
//! them by function, is for the presentation; this module only counts.
//!
//! Attribution (docs/metrics.md, "Call sites"): an allocation belongs to its stack; a realloc
//! that returns a block counts as a call at its own stack, ends the old block (its lifetime is
//! recorded at the old block's site) and starts the new one at the realloc's stack, as a free
//! and an allocation would; a failed realloc counts as a call and leaves the block as it was.
//! Memory is bounded by the live set plus one accumulator per stack id.
use std::io::{Read, Seek};

use trace::{Event, Op, ProcessInfo, Record, TraceError, TraceReader};

use crate::calibration::{self, Calibration, Estimator};
use crate::hash::FastMap;
use crate::histogram::LogHistogram;
use crate::residency::{SitesReading, SitesResidency};
use crate::sampling::{Estimate, Sampling, SiteEstimates, Weight};

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

#[derive(Clone)]
struct Block {
    stack: u32,
    size: u64,
    seq: u64,
    t_ns: u64,
}

#[derive(Default, Clone)]
struct Acc {
    stats: SiteStats,
    live: u64,
    /// Live bytes at the last process peak, valid when `saved_at == ` that peak's number.
    saved: u64,
    saved_at: u64,
    used: bool,
    /// With sampling: the estimates, the estimated live bytes and their value at the last peak.
    est: SiteEstimates,
    live_est: Estimate,
    saved_est: Estimate,
}

/// The streaming pass of one image: `push` its events in seq order, then `finish`.
#[derive(Clone)]
pub struct SiteAnalyzer {
    info: ProcessInfo,
    sites: Vec<Acc>,
    live: FastMap<u64, Block>,
    live_bytes: u64,
    peak_bytes: u64,
    /// Peaks reached so far: a site saves its live bytes the first time it changes after one.
    peaks: u64,
    sampling: Option<Sampling>,
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

impl SiteAnalyzer {
    pub fn new(info: ProcessInfo) -> Self {
        SiteAnalyzer {
            info,
            sites: Vec::new(),
            live: FastMap::default(),
            live_bytes: 0,
            peak_bytes: 0,
            peaks: 0,
            sampling: None,
            calibration: None,
            estimator: Estimator::default(),
            cut_is_end: false,
            residency: None,
            stream_cut: false,
        }
    }

    /// For a trace whose stacks were sampled: the sites' figures are also estimated
    /// (`SiteStats::estimates`).
    pub fn with_sampling(info: ProcessInfo, sampling: Option<Sampling>) -> Self {
        SiteAnalyzer {
            sampling,
            calibration: sampling.map(Calibration::new),
            ..Self::new(info)
        }
    }

    /// Estimates the sampled sites' figures with `estimator` instead of the default (to measure
    /// one against another: `examples/estimator_error.rs`).
    pub fn with_estimator(mut self, estimator: Estimator) -> Self {
        self.estimator = estimator;
        self
    }

    /// Counts the blocks live where a truncated image's stream stops (killed, still running when the
    /// recording ended, damage) as leaked, as if the cut were its end: the leaked figures are then
    /// the blocks in use at the end of the trace, what an in-use profile shows (`profiles`). By
    /// default a cut says nothing of whether they would have been freed, and none is leaked.
    pub fn live_at_cut_is_leaked(mut self) -> Self {
        self.cut_is_end = true;
        self
    }

    /// Takes each site's resident and free-left bytes at the reading of `readings` (the image's,
    /// from a trace recorded with `--addresses`) that `crate::residency::site_reading` picks.
    /// For every stack only: with sampled stacks, most blocks have no site.
    pub fn with_residency(mut self, readings: &[trace::Residency]) -> Self {
        self.residency = SitesResidency::new(readings);
        self
    }

    /// How an allocation of `size` from `stack` counts in the estimates (None: no estimates).
    fn weight(&self, stack: u32, size: u64) -> Option<Weight> {
        self.sampling.filter(|_| stack != 0).map(|s| s.weight(size))
    }

    fn site(&mut self, stack: u32) -> &mut Acc {
        let i = stack as usize;
        if i >= self.sites.len() {
            self.sites.resize_with(i + 1, Acc::default);
        }
        let s = &mut self.sites[i];
        s.used = true;
        s
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

    fn begin(&mut self, e: &Event) {
        if let Some(old) = self.live.insert(
            e.addr,
            Block {
                stack: e.stack,
                size: e.size,
                seq: e.seq,
                t_ns: e.t_ns,
            },
        ) {
            // The address was live already (a free we did not see): it ended unobserved.
            self.change_live(old.stack, 0, old.size);
        }
        self.change_live(e.stack, e.size, 0);
    }

    fn end(&mut self, addr: u64, e: &Event) {
        let Some(b) = self.live.remove(&addr) else {
            return; // allocated before tracing began
        };
        self.change_live(b.stack, 0, b.size);
        let calls = e.seq.saturating_sub(b.seq).saturating_sub(1);
        let weight = self.weight(b.stack, b.size);
        if let Some(c) = &mut self.calibration {
            c.ended(b.stack, b.size, calls == 0);
        }
        let acc = self.site(b.stack);
        let lifetime_ns = e.t_ns.saturating_sub(b.t_ns);
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

    pub fn push(&mut self, e: &Event) {
        if let Some(r) = &mut self.residency {
            r.on_event(e);
        }
        match e.op {
            op if op.is_free() => {
                if e.addr != 0 {
                    self.end(e.addr, e);
                }
            }
            Op::Realloc | Op::Reallocarray => {
                self.call(e);
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
                self.call(e);
                if e.addr != 0 {
                    self.begin(e);
                }
            }
        }
    }

    /// The stream was cut short (damage): its blocks still live at the cut are not leaks.
    pub fn mark_truncated(&mut self) {
        self.info.truncated = true;
        self.stream_cut = true;
    }

    pub fn finish(mut self) -> ProcessSites {
        let live = std::mem::take(&mut self.live);
        // A truncated image (cut by damage, killed, or still running at the end of the recording)
        // says nothing of whether its blocks live at the cut would have been freed: none is
        // counted as leaked, by site or in the estimates.
        let never_freed = if self.info.truncated && !self.cut_is_end {
            Default::default()
        } else {
            live
        };
        for b in never_freed.into_values() {
            let weight = self.weight(b.stack, b.size);
            if let Some(c) = &mut self.calibration {
                c.leaked(b.stack, b.size);
            }
            let acc = self.site(b.stack);
            if let Some(w) = weight {
                acc.est.leaked_blocks.add(w, 1.0);
                acc.est.leaked_bytes.add(w, b.size as f64);
            }
            let s = &mut acc.stats;
            s.leaked_blocks += 1;
            s.leaked_bytes += b.size;
        }
        let residency = self
            .residency
            .take()
            .and_then(|r| r.finish(!self.stream_cut));
        let (pid, peaks, sampling) = (self.info.pid, self.peaks, self.sampling);
        let calibrated = self
            .calibration
            .as_ref()
            .and_then(|c| c.estimates(self.estimator, peaks));
        let sites = self
            .sites
            .into_iter()
            .enumerate()
            .filter(|(_, a)| a.used)
            .map(|(id, a)| {
                let at_peak = a.saved_at == peaks;
                let mut estimates = (sampling.is_some() && id != 0).then_some(SiteEstimates {
                    peak_live_bytes: if at_peak { a.saved_est } else { a.live_est },
                    ..a.est
                });
                if let (Some(e), Some(c)) = (&mut estimates, &calibrated) {
                    let f = c.get(&(id as u32)).copied().unwrap_or_default();
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
                    .and_then(|(_, split)| split.sites.get(&(id as u32)))
                    .copied()
                    .unwrap_or_default();
                SiteStats {
                    stack: id as u32,
                    pid,
                    peak_live_bytes: if at_peak { a.saved } else { a.live },
                    estimates,
                    resident_bytes: held.resident,
                    free_left_bytes: held.free_left,
                    ..a.stats
                }
            })
            .collect();
        ProcessSites {
            info: self.info,
            peak_live_bytes: self.peak_bytes,
            sites,
            residency: residency.map(|(reading, _)| reading),
        }
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
}
