//! Post-stratified per-site estimates for sampled stacks (docs/metrics.md, "Sampled stacks").
//!
//! A sampled trace has every call: the exact total of each figure over the allocations of each
//! size in a process image is known; only which site an unsampled allocation came from is not.
//! Within a stratum `h` of sizes, with exact total `T_h` and Horvitz-Thompson sums `S_jh` (site
//! `j`'s sampled allocations, each weighted 1/p) and `S_h` (all sampled allocations of `h`), site
//! `j`'s figure is estimated by the ratio (Hajek) estimator `sum_h T_h S_jh / S_h`: a site's share
//! of each stratum, from the sample, times the stratum's exact total. The estimates of all sites
//! add up to the exact totals, and a site that makes (nearly) all of a stratum's allocations gets
//! (nearly) its exact total. Its variance, by linearisation, is
//! `sum_h (T_h / S_h)^2 * sum over sampled i in h of (1 - p_i) / p_i^2 (y_i - r_jh x_i)^2`
//! (`y_i = x_i` for the site's allocations, 0 for the others; `r_jh = S_jh / S_h`), that is
//! `(T_h / S_h)^2 ((1 - 2 r_jh) V_jh + r_jh^2 V_h)` from the Horvitz-Thompson variances.
//!
//! Strata (`Estimator::default`) are 16-byte classes of size per image and figure; a class with
//! fewer than 20 samples of the figure is pooled with the others of its power of two of size, and
//! what is still short makes one stratum of the rest of the image. The variance is kept at one
//! sample's worth at least (a site alone in a stratum's sample may share it with allocations no
//! sample saw). Allocations certain to be sampled count as themselves (weight 1, no variance), as
//! in Horvitz-Thompson. `examples/estimator_error.rs` measures the choices against each other.
use std::collections::BTreeMap;

use crate::hash::FastMap;
use crate::sampling::{Estimate, Sampling, Weight, WeightCache};

/// The estimated figures, in this order in the arrays below.
pub const CALLS: usize = 0;
pub const REQUESTED_BYTES: usize = 1;
pub const PEAK_LIVE_BYTES: usize = 2;
pub const LEAKED_BYTES: usize = 3;
pub const LEAKED_BLOCKS: usize = 4;
pub const LIFETIMES: usize = 5;
pub const LIFETIME_ZERO: usize = 6;
pub const FIGURES: usize = 7;

/// How the per-site figures of a sampled trace are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    /// Each sampled allocation weighted 1/p, summed per site (unbiased; ignores the exact totals).
    /// Kept to measure the default against (`examples/estimator_error.rs`).
    HorvitzThompson,
    /// The ratio estimator per stratum of sizes, scaled to the stratum's exact total.
    PostStratified {
        strata: Strata,
        /// Fine strata with fewer samples of a figure than this are `small`.
        min_samples: u32,
        small: SmallStrata,
    },
}

/// What becomes of the strata with too few samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallStrata {
    /// Merged with their neighbours in size order until the group has enough.
    Merge,
    /// Estimated by Horvitz-Thompson (their exact totals unused).
    HorvitzThompson,
    /// Pooled by power of two of size where the pool has enough, the rest of the image as one
    /// group (shared out from any sample it has).
    Coarsen,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator::PostStratified {
            strata: Strata::SizeClass16,
            min_samples: 20,
            small: SmallStrata::Coarsen,
        }
    }
}

/// The finest strata of an image's allocations, before merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strata {
    /// One per requested size.
    ExactSize,
    /// One per 16 bytes of size (`size / 16`).
    SizeClass16,
    /// The whole image as one stratum.
    Image,
}

impl Strata {
    /// The smallest size of a class.
    fn lower_size(self, class: u64) -> u64 {
        match self {
            Strata::ExactSize => class,
            Strata::SizeClass16 => class * 16,
            Strata::Image => 0,
        }
    }

    fn class(self, size: u64) -> u64 {
        match self {
            Strata::ExactSize => size,
            Strata::SizeClass16 => size / 16,
            Strata::Image => 0,
        }
    }
}

/// The key of the allocations that are not calibrated: certain to be sampled, or of size 0
/// (never sampled by bytes).
const UNCALIBRATED: u64 = u64::MAX;

/// Horvitz-Thompson sums of some sampled allocations: the weighted total, its variance, and how
/// many samples (nonzero items) it holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Part {
    ht: f64,
    variance: f64,
    samples: i64,
}

impl Part {
    fn add(&mut self, w: Weight, x: f64) {
        self.ht += w.weight * x;
        self.variance += w.variance * x * x;
        self.samples += 1;
    }

    fn remove(&mut self, w: Weight, x: f64) {
        self.ht -= w.weight * x;
        self.variance -= w.variance * x * x;
        self.samples -= 1;
    }

    fn merge(&mut self, o: &Part) {
        self.ht += o.ht;
        self.variance += o.variance;
        self.samples += o.samples;
    }
}

/// A value and its value at the last peak of the image's live bytes (valid when `saved_at` is
/// that peak's number), as `SiteAnalyzer` keeps a site's live bytes.
#[derive(Debug, Clone, Copy, Default)]
struct AtPeak<T> {
    live: T,
    saved: T,
    saved_at: u64,
}

impl<T: Copy> AtPeak<T> {
    /// Call before changing `live`: keeps its value at the last peak.
    fn save(&mut self, peaks: u64) {
        if self.saved_at != peaks {
            self.saved = self.live;
            self.saved_at = peaks;
        }
    }

    fn at(&self, peaks: u64) -> T {
        if self.saved_at == peaks {
            self.saved
        } else {
            self.live
        }
    }
}

/// A site's sampled allocations of one size (or the uncalibrated ones).
#[derive(Debug, Default, Clone)]
struct Cell {
    parts: [Part; FIGURES],
    live: AtPeak<Part>,
}

/// All allocations of one size of the image: the exact totals.
#[derive(Debug, Default, Clone)]
struct Stratum {
    totals: [f64; FIGURES],
    live: AtPeak<u64>,
}

/// The sampled allocations per site and size, and the exact totals per size, of one image.
#[derive(Debug, Clone)]
pub struct Calibration {
    weights: WeightCache,
    cells: FastMap<(u32, u64), Cell>,
    strata: FastMap<u64, Stratum>,
}

impl Calibration {
    pub fn new(sampling: Sampling) -> Self {
        Calibration {
            weights: WeightCache::new(sampling),
            cells: FastMap::default(),
            strata: FastMap::default(),
        }
    }

    fn key(&mut self, size: u64) -> (u64, Weight) {
        let w = self.weights.weight(size);
        let key = if w.certain || size == 0 {
            UNCALIBRATED
        } else {
            size
        };
        (key, w)
    }

    /// Records figure values of an allocation of `size` from `stack` (0: not sampled).
    fn add(&mut self, stack: u32, size: u64, values: &[(usize, f64)]) {
        let (key, w) = self.key(size);
        if key != UNCALIBRATED {
            let s = self.strata.entry(key).or_default();
            for &(f, x) in values {
                s.totals[f] += x;
            }
        }
        if stack != 0 {
            let c = self.cells.entry((stack, key)).or_default();
            for &(f, x) in values {
                c.parts[f].add(w, x);
            }
        }
    }

    /// An allocating call (failed ones included).
    pub fn call(&mut self, stack: u32, size: u64) {
        self.add(stack, size, &[(CALLS, 1.0), (REQUESTED_BYTES, size as f64)]);
    }

    /// A block of `size` from `stack` that ended, in 0 calls or not.
    pub fn ended(&mut self, stack: u32, size: u64, lifetime_zero: bool) {
        if lifetime_zero {
            self.add(stack, size, &[(LIFETIMES, 1.0), (LIFETIME_ZERO, 1.0)]);
        } else {
            self.add(stack, size, &[(LIFETIMES, 1.0)]);
        }
    }

    /// A block still live at the end.
    pub fn leaked(&mut self, stack: u32, size: u64) {
        self.add(
            stack,
            size,
            &[(LEAKED_BYTES, size as f64), (LEAKED_BLOCKS, 1.0)],
        );
    }

    /// A block of `size` from `stack` became live (`begins`) or stopped being live; `peaks` is the
    /// number of peaks of the image's live bytes reached before this change.
    pub fn live(&mut self, stack: u32, size: u64, begins: bool, peaks: u64) {
        let (key, w) = self.key(size);
        if key != UNCALIBRATED {
            let s = &mut self.strata.entry(key).or_default().live;
            s.save(peaks);
            s.live = if begins {
                s.live.wrapping_add(size)
            } else {
                s.live.wrapping_sub(size)
            };
        }
        if stack != 0 {
            let c = &mut self.cells.entry((stack, key)).or_default().live;
            c.save(peaks);
            if begins {
                c.live.add(w, size as f64);
            } else {
                c.live.remove(w, size as f64);
            }
        }
    }

    /// The estimated figures of each sampled site (by stack id), `peaks` the image's number of
    /// peaks at the end. None for Horvitz-Thompson, which `SiteAnalyzer` sums itself.
    pub fn estimates(
        &self,
        estimator: Estimator,
        peaks: u64,
    ) -> Option<FastMap<u32, [Estimate; FIGURES]>> {
        let Estimator::PostStratified {
            strata,
            min_samples,
            small,
        } = estimator
        else {
            return None;
        };
        let mut out: FastMap<u32, [Estimate; FIGURES]> = FastMap::default();
        let part = |c: &Cell, f: usize| {
            if f == PEAK_LIVE_BYTES {
                c.live.at(peaks)
            } else {
                c.parts[f]
            }
        };
        for f in 0..FIGURES {
            // The exact total and the sample of each fine stratum, in size order.
            let mut fine: BTreeMap<u64, (f64, Part)> = BTreeMap::new();
            for (&size, s) in &self.strata {
                let total = if f == PEAK_LIVE_BYTES {
                    s.live.at(peaks) as f64
                } else {
                    s.totals[f]
                };
                fine.entry(strata.class(size)).or_default().0 += total;
            }
            for (&(stack, size), c) in &self.cells {
                let p = part(c, f);
                if size == UNCALIBRATED {
                    // Certain (or size 0): itself, with no variance to speak of.
                    let e = &mut out.entry(stack).or_default()[f];
                    e.value += p.ht;
                    e.variance += p.variance;
                } else {
                    fine.entry(strata.class(size)).or_default().1.merge(&p);
                }
            }
            let k = i64::from(min_samples);
            // The group whose total is shared out from any sample it has.
            let mut rest = None;
            let group_of = match small {
                SmallStrata::Merge => merge_strata(&fine, k),
                SmallStrata::HorvitzThompson => (0..fine.len()).collect(),
                SmallStrata::Coarsen => {
                    let (group_of, last) = coarsen_strata(&fine, strata, k);
                    rest = last;
                    group_of
                }
            };
            // Per group: exact total and the whole sample; per site and group: its sample.
            let groups_len = group_of.iter().max().map_or(0, |g| g + 1);
            let mut groups = vec![(0.0f64, Part::default()); groups_len];
            for (i, (total, sample)) in fine.values().enumerate() {
                groups[group_of[i]].0 += total;
                groups[group_of[i]].1.merge(sample);
            }
            let index: FastMap<u64, usize> = fine
                .keys()
                .enumerate()
                .map(|(i, &k)| (k, group_of[i]))
                .collect();
            let mut by_site: FastMap<(u32, usize), Part> = FastMap::default();
            for (&(stack, size), c) in &self.cells {
                if size != UNCALIBRATED {
                    let g = index[&strata.class(size)];
                    by_site.entry((stack, g)).or_default().merge(&part(c, f));
                }
            }
            for ((stack, g), p) in by_site {
                let (total, all) = groups[g];
                let e = &mut out.entry(stack).or_default()[f];
                let enough = if rest == Some(g) { 1 } else { k };
                if all.samples < enough || all.ht <= 0.0 {
                    // Too few samples to share out the total: each counts 1/p, unbiased.
                    e.value += p.ht;
                    e.variance += p.variance;
                    continue;
                }
                let (factor, r) = (total / all.ht, p.ht / all.ht);
                e.value += factor * p.ht;
                // Linearised, with the share kept one sample away from 0 and 1 (r (1 - r) >= 1/n
                // for equal weights): a site alone in a stratum may still share it with
                // allocations no sample saw.
                let linearised = p.variance * (1.0 - 2.0 * r) + r * r * all.variance;
                let one_sample = all.variance / all.samples as f64;
                e.variance += factor * factor * linearised.max(one_sample);
            }
        }
        Some(out)
    }
}

/// The group of each fine stratum (in order): neighbours merged until a group holds at least
/// `min_samples` samples; a short last group joins the one before it.
fn merge_strata(fine: &BTreeMap<u64, (f64, Part)>, min_samples: i64) -> Vec<usize> {
    let mut group_of = Vec::with_capacity(fine.len());
    let (mut group, mut samples) = (0usize, 0i64);
    for (_, sample) in fine.values() {
        group_of.push(group);
        samples += sample.samples;
        if samples >= min_samples.max(1) {
            group += 1;
            samples = 0;
        }
    }
    if samples < min_samples.max(1) && group > 0 {
        // The last group (open, short) joins the one before.
        for g in group_of.iter_mut().filter(|g| **g == group) {
            *g = group - 1;
        }
    }
    group_of
}

/// The group of each fine stratum (in order): those with `min_samples` samples alone; the others
/// pooled by power of two of size where the pool has enough; the rest as one group (returned).
fn coarsen_strata(
    fine: &BTreeMap<u64, (f64, Part)>,
    strata: Strata,
    min_samples: i64,
) -> (Vec<usize>, Option<usize>) {
    let mut group_of = vec![usize::MAX; fine.len()];
    let mut next = 0;
    let mut pools: BTreeMap<u32, (Vec<usize>, i64)> = BTreeMap::new();
    for (i, (&class, (_, sample))) in fine.iter().enumerate() {
        if sample.samples >= min_samples {
            group_of[i] = next;
            next += 1;
        } else {
            let pool = pools
                .entry(64 - strata.lower_size(class).leading_zeros())
                .or_default();
            pool.0.push(i);
            pool.1 += sample.samples;
        }
    }
    let mut rest = Vec::new();
    for (members, samples) in pools.into_values() {
        if samples >= min_samples {
            for m in members {
                group_of[m] = next;
            }
            next += 1;
        } else {
            rest.extend(members);
        }
    }
    let last = (!rest.is_empty()).then_some(next);
    for m in rest {
        group_of[m] = next;
    }
    (group_of, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed: 1,000 calls of 100 bytes (one stratum), 30 of them sampled from site 1 and
    /// 10 from site 2; 10 calls of 50 bytes, none sampled; one certain call of site 2.
    #[test]
    fn shares_of_the_sample_times_the_exact_totals() {
        let sampling = Sampling::new(1000).unwrap();
        let mut c = Calibration::new(sampling);
        for i in 0..1000 {
            let stack = match i {
                0..30 => 1,
                30..40 => 2,
                _ => 0,
            };
            c.call(stack, 100);
        }
        for _ in 0..10 {
            c.call(0, 50);
        }
        c.call(2, 1 << 20);
        let e = c.estimates(Estimator::default(), 0).unwrap();
        let (a, b) = (e[&1][CALLS], e[&2][CALLS]);
        // 1,000 calls shared 3:1; the 10 calls of 50 bytes, with no sample in the image's rest,
        // are nobody's.
        assert!((a.value - 750.0).abs() < 1e-9, "{a:?}");
        assert!((b.value - (250.0 + 1.0)).abs() < 1e-9, "{b:?}");
        // (T/S)^2 ((1 - 2r) V_j + r^2 V) with equal weights w = 1/p: S = 40 w, V = 40 (1-p) w^2,
        // V_1 = 30 (1-p) w^2, r = 3/4: T^2 (1-p) r (1-r) / n.
        let p = sampling.probability(100);
        let expected = 1000.0f64.powi(2) * (1.0 - p) * 0.75 * 0.25 / 40.0;
        assert!((a.variance / expected - 1.0).abs() < 1e-9);
        assert!(
            (b.variance / expected - 1.0).abs() < 1e-9,
            "certain: no variance"
        );
        assert_eq!(
            c.estimates(Estimator::HorvitzThompson, 0),
            None,
            "Horvitz-Thompson is summed by the caller"
        );
    }
}
