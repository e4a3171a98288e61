//! The answer of a search as results.json keeps it: the recommendation, its figures against the
//! baseline, the Pareto front, the baseline's drift, the lines that deploy it.
use serde::{Deserialize, Serialize};

use super::{Metric, Ratio};

/// One figure of a candidate as a ratio to another's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    pub metric: Metric,
    pub ratio: Ratio,
}

/// A point of the Pareto front of mean PSS against wall time (ratios to the baseline).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParetoPoint {
    pub candidate: usize,
    pub label: String,
    pub time_ratio: f64,
    pub memory_ratio: f64,
    pub runs: usize,
}

/// How the baseline's objective moved over the search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drift {
    /// Mean of the last third of its runs over the mean of the first third, minus one.
    pub change: f64,
    pub runs: usize,
    /// Whether the change exceeds twice the noise of single runs: the machine changed under the
    /// search.
    pub notable: bool,
}

/// The environment that runs a program under a variant, written for a shell, systemd and Docker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deployment {
    pub env: Vec<(String, String)>,
    /// `LD_PRELOAD=... MALLOC_CONF=...` to put before the command.
    pub shell: String,
    /// A `[Service]` line.
    pub systemd: String,
    pub dockerfile: String,
}

/// What tune says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// The recommended candidate (the baseline when nothing beats it beyond the noise).
    pub recommended: usize,
    pub recommended_label: String,
    /// Whether it beats the baseline on the objective beyond the noise.
    pub beats_baseline: bool,
    /// The best candidate found, when it is not recommended (within the noise of the baseline).
    pub best_found: Option<usize>,
    /// One sentence.
    pub verdict: String,
    /// The recommendation's figures (or the best found's) against the baseline.
    pub against_baseline: Vec<Figure>,
    /// The best allocator default by the objective, and the recommendation against it.
    pub best_default: Option<usize>,
    pub against_best_default: Vec<Figure>,
    pub pareto: Vec<ParetoPoint>,
    pub drift: Option<Drift>,
    /// None when the recommendation is glibc's default: nothing to change.
    pub deployment: Option<Deployment>,
    /// Successful runs behind the recommended candidate's figures (its fresh runs when confirmed).
    pub runs: usize,
    /// The race's leader and whether its fresh runs confirmed it.
    #[serde(default)]
    pub confirmation: Option<super::Confirmation>,
}
