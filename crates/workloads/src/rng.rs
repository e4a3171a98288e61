//! A tiny seeded PRNG (SplitMix64) and the few distributions the workloads draw from.
//!
//! Written out rather than taken from a crate so that the sequence for a seed can never change under us:
//! tests and users compare runs by seed.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64: one u64 of state, passes BigCrush, fast enough to be invisible next to malloc.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// An independent stream for thread/worker `stream`, so each one's sequence does not depend on how
    /// the others are scheduled.
    pub fn stream(seed: u64, stream: u64) -> Self {
        Self::new(mix(seed ^ mix(stream.wrapping_add(1).wrapping_mul(GOLDEN))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `0..n`; `n == 0` gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-high: no modulo bias worth caring about, no division.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi` (callers guarantee `lo <= hi`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `permille / 1000`.
    pub fn permille(&mut self, permille: u32) -> bool {
        self.below(1000) < u64::from(permille)
    }

    /// Standard normal by Box-Muller (one of the pair is dropped: simpler, and speed does not matter here).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Log-normal with the given median and shape `sigma`: the classic heavy-ish tail of object sizes.
    pub fn log_normal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    /// Pareto with minimum `min` and tail index `alpha` (smaller alpha = heavier tail).
    pub fn pareto(&mut self, min: f64, alpha: f64) -> f64 {
        let u = 1.0 - self.unit(); // (0, 1]
        min / u.powf(1.0 / alpha)
    }

    /// Log-uniform integer in `lo..=hi`: as many draws per size octave, i.e. mostly small sizes.
    pub fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo.max(1)) as f64, (hi.max(1)) as f64);
        let x = (l.ln() + self.unit() * (h.ln() - l.ln())).exp();
        (x as u64).clamp(lo, hi)
    }
}

/// The SplitMix64 finaliser; also used to fold allocation sizes into checksums.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let a: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        let mut s0 = Rng::stream(7, 0);
        let mut s1 = Rng::stream(7, 1);
        assert_ne!(s0.next_u64(), s1.next_u64());
    }

    #[test]
    fn draws_stay_in_their_bounds() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.range(64, 512);
            assert!((64..=512).contains(&x));
            assert!(r.below(10) < 10);
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(r.pareto(2.0, 1.5) >= 2.0);
            assert!(r.log_normal(100.0, 2.0) > 0.0);
            let l = r.log_uniform(8, 1024);
            assert!((8..=1024).contains(&l));
        }
    }

    #[test]
    fn log_normal_median_is_near_the_requested_one() {
        let mut r = Rng::new(3);
        let mut v: Vec<f64> = (0..20_001).map(|_| r.log_normal(256.0, 1.0)).collect();
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        assert!((200.0..330.0).contains(&median), "median {median}");
    }
}
