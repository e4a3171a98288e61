//! The `tune` member of results.json: what a search measured and decided, as data.
//!
//! The search that fills it is the tune crate's and the page that shows it is report's: both read
//! these types from here, where results.json's other types are, so `report` needs nothing of the
//! search and `tune` nothing of the pages (docs/tune.md, "Files").
use serde::{Deserialize, Serialize};

mod answer;
mod estimate;
mod objective;

pub use answer::{Answer, Deployment, Drift, Figure, ParetoPoint};
pub use estimate::{Estimate, Ratio, DEFAULT_REL_SD, INTERVAL_Z, MIN_REL_SD};
pub use objective::{Constraints, Figures, Metric, Objective};

/// The search, as results.json `tune` holds it (docs/tune.md, "Files").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneRecord {
    pub objective: Objective,
    pub constraints: Constraints,
    /// `--throughput` regex, when given.
    pub throughput: Option<String>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// What an evaluation was: `run` (real runs) or `replay`.
    pub evaluator: String,
    pub stop_reason: String,
    pub interrupted: bool,
    /// The label of the baseline (glibc's default), candidate 0.
    pub baseline: String,
    /// Relative standard deviation of single runs per metric, pooled over the repeated candidates.
    pub noise: Vec<(Metric, f64)>,
    pub candidates: Vec<CandidateRecord>,
    /// Every evaluation in order.
    pub trials: Vec<Trial>,
    /// What the search decided, in order: candidates dropped (and why), failed, added.
    pub events: Vec<Event>,
    /// None when the baseline gave no figures (the search was interrupted before).
    pub answer: Option<Answer>,
    /// Notes on the space (values the installed versions do not take).
    pub notes: Vec<String>,
    /// Trace mode with a command: the replay screening whose best candidates these real runs
    /// confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screening: Option<Screening>,
}

/// The replay screening before real runs (`tune TRACE -- CMD`), and how far the two agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Screening {
    pub trace: String,
    pub candidates: usize,
    pub evaluations: usize,
    pub elapsed_s: f64,
    pub stop_reason: String,
    /// The candidates handed to real runs, best by replay first, with their replay objective as a
    /// ratio to the baseline's replay.
    pub confirmed: Vec<(String, f64)>,
    /// Pairs of the confirmed candidates and the baseline that replay and real runs order the same
    /// way on the objective, out of `pairs` (both measured).
    pub agreeing_pairs: usize,
    pub pairs: usize,
    /// Whether replay's best of them is the real runs' best.
    pub same_best: Option<bool>,
}

/// One candidate and what was measured of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub id: usize,
    /// The variant's label, as results.json `variants` and `runs` name it.
    pub label: String,
    pub allocator: String,
    pub settings: Vec<(String, String)>,
    pub origin: Origin,
    pub status: Status,
    /// Successful and failed evaluations.
    pub runs: usize,
    pub failed_runs: usize,
    pub mean_pss: Option<Estimate>,
    pub peak_pss: Option<Estimate>,
    pub wall: Option<Estimate>,
    pub throughput: Option<Estimate>,
    /// Its figures against the baseline.
    pub vs_baseline: Vec<Figure>,
    /// When and why it was dropped or failed.
    pub dropped_at_s: Option<f64>,
    pub why: Option<String>,
}

/// One evaluation of one candidate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trial {
    pub candidate: usize,
    pub pass: usize,
    /// Seconds from the search's start to the evaluation's start.
    pub at_s: f64,
    /// How long the evaluation took, seconds.
    pub took_s: f64,
    pub figures: Option<Figures>,
    /// Why it gave no figures.
    pub failure: Option<String>,
    /// Its run's index in results.json `runs` (real runs).
    pub run: Option<usize>,
    /// A fresh run of the confirmation, after the race: not counted in the race's figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmation: bool,
}

/// Something the search decided.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub at_s: f64,
    pub pass: usize,
    pub candidate: Option<usize>,
    /// `dropped`, `failed`, `added`, `confirmed`, `unconfirmed`.
    pub kind: String,
    pub why: String,
}

/// Where a candidate stands at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Still in the race when it ended.
    Alive,
    Dropped,
    /// A run failed: its figures are not comparable.
    Failed,
}

/// The confirmation of the race's leader by fresh runs (docs/tune.md, "Confirmation").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Confirmation {
    pub candidate: usize,
    /// Whether its fresh runs beat the baseline's fresh runs beyond the noise.
    pub confirmed: bool,
    /// Why not, in a few words, when it was not (`the budget left no room for fresh runs`, ...).
    pub why: Option<String>,
}

/// Where a candidate comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Origin {
    /// glibc's default: every ratio is against it, and it is run throughout the search.
    Baseline,
    /// An allocator's default.
    Default,
    /// One value of the spread (or a preset).
    Spread,
    /// The best values of several settings of one allocator, each better than its default alone.
    Combined { from: Vec<usize> },
    /// Named by the user (`-a` with settings or a library, `--space FILE`).
    Given,
}
