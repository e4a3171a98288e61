//! `alloclens tune`: finds the allocator and settings that serve a program best, with the evidence
//! (docs/tune.md).
//!
//! - [`space`] builds the candidates: every installed allocator's default and a spread of its
//!   documented settings (ranges chosen per setting), or the list the user gives.
//! - [`Evaluator`] is the one interface the search measures a candidate through: [`RunEvaluator`]
//!   runs the command under it (the runner's single-run machinery, the figures `run` measures).
//! - [`search`] races the candidates: one run each, then repeats on the promising ones, dropping
//!   those whose interval is clearly worse, with the baseline repeated throughout, within a budget.
//! - [`answer`] turns what was measured into the recommendation: ratios with their spread, the
//!   Pareto front of memory against time, the lines that deploy it.
//! - [`record`] builds what results.json keeps of a search (`tune`, typed in
//!   `runner::tune_record`; its page and summary are report's).
//! - [`session`] is the policy over a command line: runs, replays, or replays screening for runs.
pub mod answer;
pub mod evaluator;
pub mod objective;
pub mod record;
pub mod search;
pub mod session;
pub mod space;
pub mod stats;

pub use answer::{best_candidates, deployment, Answer, Deployment, Figure, ParetoPoint};
pub use evaluator::{EvalError, Evaluator, Observation, ReplayEvaluator, RunEvaluator, RunSink};
pub use objective::{Constraints, Metric, Objective};
pub use record::{CandidateRecord, Screening, TuneRecord};
pub use search::{
    search, search_with_clock, Candidate, Clock, Confirmation, Event, Origin, Outcome, SearchError,
    SearchObserver, SearchOptions, Status, Trial,
};
pub use session::{tune, Request, TuneError, Tuned, SCREENED_TO_RUNS};
pub use space::{build_space, parse_space_file, SpaceError, SpaceSelection, SPREAD};
