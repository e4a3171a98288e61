//! Estimating per-site figures from sampled stacks (`record --stacks` with a sampling rate).
//!
//! The recorder samples allocations by bytes with a Poisson process of mean `R` bytes per thread:
//! an allocation of `s` bytes carries a stack with probability `p(s) = 1 - exp(-s/R)`, independently
//! of the others (the process is memoryless). Every call is in the trace anyway; only which site it
//! came from is unknown for the unsampled ones. Each sampled allocation weighs `1/p(s_i)`: the
//! Horvitz-Thompson sum `sum over sampled i of x_i / p(s_i)` is unbiased for any inclusion
//! probabilities (as jemalloc's and Go's profilers scale), its variance estimated, unbiasedly too,
//! by `sum over sampled i of (1 - p_i) / p_i^2 * x_i^2`. The sites' totals are these sums scaled to
//! the exact totals of each size (`crate::calibration`); the distributions keep the weights
//! (docs/metrics.md, "Sampled stacks").

use crate::histogram::WeightedCounts;

/// An allocation at least this likely to be sampled counts as certain: its weight is exactly 1 and
/// adds no variance (sizes above about 20.7 R).
pub const CERTAIN: f64 = 1.0 - 1e-9;

/// The sampling of a trace's stacks: mean bytes between samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    mean_bytes: f64,
}

/// How one sampled allocation counts: `weight` = 1/p, `variance` = (1-p)/p^2 per unit of figure
/// squared, and whether it was certain to be sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weight {
    pub weight: f64,
    pub variance: f64,
    pub certain: bool,
}

impl Sampling {
    /// None for 0: every allocation carries a stack.
    pub fn new(mean_bytes: u64) -> Option<Self> {
        (mean_bytes > 0).then_some(Sampling {
            mean_bytes: mean_bytes as f64,
        })
    }

    /// How a trace's stacks were taken (`TraceReader::stack_sampling`): None unless sampled.
    pub fn of(stacks: trace::StackSampling) -> Option<Self> {
        match stacks {
            trace::StackSampling::Bytes { mean_bytes } => Self::new(mean_bytes),
            _ => None,
        }
    }

    pub fn mean_bytes(self) -> u64 {
        self.mean_bytes as u64
    }

    /// The chance that an allocation of `size` bytes is sampled.
    pub fn probability(self, size: u64) -> f64 {
        -(-(size as f64) / self.mean_bytes).exp_m1()
    }

    /// The weight of a sampled allocation of `size` bytes. A size-0 allocation is never sampled by
    /// bytes; should one carry a stack, it counts as itself (weight 1).
    pub fn weight(self, size: u64) -> Weight {
        let p = self.probability(size);
        if p > CERTAIN || p <= 0.0 {
            return Weight {
                weight: 1.0,
                variance: 0.0,
                certain: p > CERTAIN,
            };
        }
        Weight {
            weight: 1.0 / p,
            variance: (1.0 - p) / (p * p),
            certain: false,
        }
    }
}

/// The weights of the sizes seen, each computed once while it stays in its slot (a direct-mapped
/// cache): `Sampling::weight` takes an `expm1` and a division, and the site pass asked for it up
/// to three times an event (5 % of `analyze --sites` in perf). The same values, computed once.
#[derive(Debug, Clone)]
pub struct WeightCache {
    sampling: Sampling,
    slots: Vec<(u64, Weight)>,
}

const WEIGHT_SLOTS: usize = 1024;

impl WeightCache {
    pub fn new(sampling: Sampling) -> Self {
        // Every slot holds a true pair: a size that maps elsewhere, with its weight.
        let filler = (u64::MAX, sampling.weight(u64::MAX));
        WeightCache {
            sampling,
            slots: vec![filler; WEIGHT_SLOTS],
        }
    }

    /// `Sampling::weight(size)`.
    #[inline]
    pub fn weight(&mut self, size: u64) -> Weight {
        let slot = &mut self.slots[size as usize % WEIGHT_SLOTS];
        if slot.0 != size {
            *slot = (size, self.sampling.weight(size));
        }
        slot.1
    }
}

/// An estimated total and the estimate of its variance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub variance: f64,
}

impl Estimate {
    /// Adds a sampled item of figure `x` (a count of 1, or bytes).
    pub fn add(&mut self, w: Weight, x: f64) {
        self.value += w.weight * x;
        self.variance += w.variance * x * x;
    }

    /// Takes back what `add` added (a block that stopped being live).
    pub fn remove(&mut self, w: Weight, x: f64) {
        self.value -= w.weight * x;
        self.variance -= w.variance * x * x;
    }

    pub fn merge(&mut self, other: &Estimate) {
        self.value += other.value;
        self.variance += other.variance;
    }

    /// The standard error (the variance's square root; rounding in `remove` may leave it a hair
    /// below 0).
    pub fn standard_error(&self) -> f64 {
        self.variance.max(0.0).sqrt()
    }

    /// The estimate rounded to a count or bytes.
    pub fn rounded(&self) -> u64 {
        self.value.max(0.0).round() as u64
    }
}

/// The standard error of the share `part / whole` of two estimates over the same allocations, `part`
/// counting a subset of those `whole` counts (lifetime 0 among the ended blocks): the variance of
/// the ratio by linearisation, `(V(part) (1 - 2 r) + r^2 V(whole)) / whole^2` with `r` the share
/// (each item's residual is `1 - r` in the subset, `-r` outside). 0 for an empty whole.
pub fn share_standard_error(part: &Estimate, whole: &Estimate) -> f64 {
    if whole.value <= 0.0 {
        return 0.0;
    }
    let r = part.value / whole.value;
    let variance = part.variance * (1.0 - 2.0 * r) + r * r * whole.variance;
    variance.max(0.0).sqrt() / whole.value
}

/// The estimated figures of a site (the ones `SiteStats` counts over its sampled allocations).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteEstimates {
    pub calls: Estimate,
    pub requested_bytes: Estimate,
    pub peak_live_bytes: Estimate,
    pub leaked_bytes: Estimate,
    pub leaked_blocks: Estimate,
    pub lifetimes: Estimate,
    pub lifetime_zero: Estimate,
    /// The distributions of lifetimes (in calls and ns) and of requested sizes, each sampled
    /// allocation weighted by 1/p as in the totals: the sampled allocations themselves over-represent
    /// large sizes.
    pub lifetime_calls: WeightedCounts,
    pub lifetime_ns: WeightedCounts,
    pub sizes: WeightedCounts,
    /// Some sampled allocation of the site was not certain to be sampled.
    pub uncertain: bool,
}

impl SiteEstimates {
    pub fn merge(&mut self, o: &SiteEstimates) {
        self.calls.merge(&o.calls);
        self.requested_bytes.merge(&o.requested_bytes);
        self.peak_live_bytes.merge(&o.peak_live_bytes);
        self.leaked_bytes.merge(&o.leaked_bytes);
        self.leaked_blocks.merge(&o.leaked_blocks);
        self.lifetimes.merge(&o.lifetimes);
        self.lifetime_zero.merge(&o.lifetime_zero);
        self.lifetime_calls.merge(&o.lifetime_calls);
        self.lifetime_ns.merge(&o.lifetime_ns);
        self.sizes.merge(&o.sizes);
        self.uncertain |= o.uncertain;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_the_poisson_probability() {
        let s = Sampling::new(1000).unwrap();
        let w = s.weight(1000);
        let p = 1.0 - (-1.0f64).exp();
        assert!((w.weight - 1.0 / p).abs() < 1e-12);
        assert!((w.variance - (1.0 - p) / (p * p)).abs() < 1e-12);
        assert!(!w.certain);
        // 21 R: p > 1 - 1e-9, exact.
        let big = s.weight(21_000);
        assert_eq!((big.weight, big.variance, big.certain), (1.0, 0.0, true));
        // A tiny size keeps its precision (expm1): p ~ 1e-3, weight ~ 1000.5.
        assert!((s.weight(1).weight - 1000.5).abs() < 0.01);
        assert!(Sampling::new(0).is_none());
    }

    /// Sizes sharing a slot, asked for in turn, and the filler's own size: the computed weights.
    #[test]
    fn the_weight_cache_gives_the_computed_weights() {
        let s = Sampling::new(4096).unwrap();
        let mut cache = WeightCache::new(s);
        for size in [0, 1, 1025, 1, 2049, 1025, 1 << 40, u64::MAX, 0, 48, 48] {
            assert_eq!(cache.weight(size), s.weight(size), "size {size}");
        }
    }

    #[test]
    fn an_estimate_adds_and_removes() {
        let s = Sampling::new(100).unwrap();
        let mut e = Estimate::default();
        e.add(s.weight(50), 50.0);
        e.add(s.weight(10), 10.0);
        e.remove(s.weight(50), 50.0);
        let w = s.weight(10);
        assert!((e.value - 10.0 * w.weight).abs() < 1e-9);
        assert!((e.standard_error() - 10.0 * w.variance.sqrt()).abs() < 1e-9);
    }
}
