//! The Horvitz-Thompson estimates of a table's sampled blocks: an allocation of `n` bytes is
//! sampled with `p = 1 - exp(-n / S)` (the Poisson process of the agent's sampler, mean `S`
//! bytes between samples), so it stands for `1/p` allocations and `n/p` bytes; the variance of
//! that estimate is estimated by `(1-p)/p²` (objects) and `(1-p)n²/p²` (bytes).
use serde::Serialize;

/// An estimate and its standard error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub stderr: f64,
}

impl Estimate {
    pub fn variance(&self) -> f64 {
        self.stderr * self.stderr
    }
}

/// Sums of weights and of variance estimates, made into `Estimate`s at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sum {
    pub value: f64,
    pub variance: f64,
}

impl Sum {
    pub fn add(&mut self, value: f64, variance: f64) {
        self.value += value;
        self.variance += variance;
    }

    pub fn estimate(&self) -> Estimate {
        Estimate {
            value: self.value,
            stderr: self.variance.max(0.0).sqrt(),
        }
    }
}

/// The probability that an allocation of `n` bytes is sampled at a mean interval of `s` bytes.
pub fn sample_probability(n: u64, s: u64) -> f64 {
    -(-(n as f64) / s.max(1) as f64).exp_m1()
}

/// Adds one live sampled block of `n` bytes to the in-use objects and bytes. A block of 0
/// bytes is never sampled (p = 0): one in the table is left out.
pub fn add_live_block(objects: &mut Sum, space: &mut Sum, n: u64, s: u64) {
    let p = sample_probability(n, s);
    if p <= 0.0 {
        return;
    }
    let n = n as f64;
    let rest = (1.0 - p) / (p * p);
    objects.add(1.0 / p, rest);
    space.add(n / p, rest * n * n);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block much larger than the interval is always sampled: it stands for itself, with no
    /// error; a block of the interval's size stands for 1/(1-1/e) blocks.
    #[test]
    fn weights_follow_the_sampling_probability() {
        let (mut o, mut s) = (Sum::default(), Sum::default());
        add_live_block(&mut o, &mut s, 1 << 30, 4096);
        assert_eq!((o.value, s.value), (1.0, (1u64 << 30) as f64));
        assert_eq!(o.variance, 0.0);
        let (mut o, mut s) = (Sum::default(), Sum::default());
        add_live_block(&mut o, &mut s, 4096, 4096);
        let p = 1.0 - (-1.0f64).exp();
        assert!((o.value - 1.0 / p).abs() < 1e-12);
        assert!((s.value - 4096.0 / p).abs() < 1e-9);
        assert!((o.variance - (1.0 - p) / (p * p)).abs() < 1e-12);
        add_live_block(&mut o, &mut s, 0, 4096);
        assert!(
            (o.value - 1.0 / p).abs() < 1e-12,
            "a 0-byte block adds nothing"
        );
    }
}
