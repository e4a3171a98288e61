//! A figure's estimate over a candidate's runs and a ratio of two, with their spread.
use serde::{Deserialize, Serialize};

/// Relative noise assumed before any figure was repeated (5 %), and the least ever assumed (1 %):
/// two runs that happen to agree closely do not make a figure exact.
pub const DEFAULT_REL_SD: f64 = 0.05;
pub const MIN_REL_SD: f64 = 0.01;

/// A stated interval is the ratio ± this many standard deviations (about 95 % of single runs).
pub const INTERVAL_Z: f64 = 2.0;

/// Mean and spread of one figure over a candidate's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean: f64,
    /// Sample standard deviation (n - 1); None with a single run.
    pub sd: Option<f64>,
    pub n: usize,
}

impl Estimate {
    /// None without any value.
    pub fn of(values: &[f64]) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let sd = (n > 1).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            var.sqrt()
        });
        Some(Estimate { mean, sd, n })
    }

    /// The relative standard deviation of one run: measured, at least `MIN_REL_SD`; `pooled` (the
    /// noise seen in every repeated candidate) while this one has a single run.
    pub fn rel_sd(&self, pooled: f64) -> f64 {
        match self.sd {
            Some(sd) if self.mean > 0.0 => (sd / self.mean).max(MIN_REL_SD),
            _ => pooled,
        }
    }

    /// The relative standard error of the mean.
    pub fn rel_se(&self, pooled: f64) -> f64 {
        self.rel_sd(pooled) / (self.n as f64).sqrt()
    }
}

/// A ratio of two candidates' figures with its spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub value: f64,
    /// Standard deviation of the ratio of two single runs, propagated as hyperfine does:
    /// value × √((σa/a)² + (σb/b)²).
    pub sd: f64,
    /// value ± `INTERVAL_Z` sd: where a new measurement of the ratio is expected.
    pub low: f64,
    pub high: f64,
    /// Runs behind the numerator and the denominator.
    pub runs: [usize; 2],
    /// Whether a side had a single run, so its noise is the pooled one.
    pub pooled_noise: bool,
}
