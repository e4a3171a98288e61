//! `tune`'s policy over one command line (docs/tune.md, "Trace mode"): a search by real runs of the
//! command; or by replays of a trace alone; or the replays screening the space and real runs
//! racing and confirming their best few.
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use allocators::Variant;
use runner::RunPlan;

use crate::evaluator::{ReplayEvaluator, RunEvaluator, RunSink};
use crate::record::TuneRecord;
use crate::search::{search, Candidate, Outcome, SearchError, SearchObserver, SearchOptions};

/// What `tune` is asked.
pub struct Request {
    /// Trace mode: the trace whose replays screen the space.
    pub trace: Option<PathBuf>,
    /// How to run the command; None in trace mode without a command.
    pub plan: Option<RunPlan>,
    pub search: SearchOptions,
    /// The space, the baseline first.
    pub candidates: Vec<Candidate>,
    /// When the command started: the budget counts from it, reading the trace included.
    pub started: Instant,
}

/// What the searches found.
pub struct Tuned {
    /// The search that answers: real runs, or the replays when there is no command.
    pub outcome: Outcome,
    /// The replay screening before real runs (a trace and a command).
    pub screened: Option<Outcome>,
    /// Every variant real runs used, in the order first run (results.json `variants`).
    pub run_variants: Vec<Variant>,
    /// What could not be read of the trace, one sentence each.
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error("cannot replay '{trace}': {error}")]
    Replay {
        trace: String,
        error: replay::ReplayError,
    },
    #[error("cannot read the trace '{trace}': {error}")]
    Trace {
        trace: String,
        error: trace::TraceError,
    },
    #[error("the trace '{trace}' is of `{recorded}`, not of `{given}`: give the command it recorded, or record this one (`alloclens record -o FILE -- CMD`)")]
    NotOfCommand {
        trace: String,
        recorded: String,
        given: String,
    },
}

/// How many of the replay screening's best candidates real runs race and confirm.
pub const SCREENED_TO_RUNS: usize = 3;

/// Runs the searches `request` asks for. `sink` sees every real run (the results directory's
/// files); `observer` every evaluation (a progress bar).
pub fn tune(
    request: &Request,
    sink: &mut dyn RunSink,
    observer: &mut dyn SearchObserver,
    interrupted: Arc<AtomicBool>,
) -> Result<Tuned, TuneError> {
    let mut candidates = request.candidates.clone();
    let mut screened = None;
    let mut warnings = Vec::new();
    if let Some(trace) = &request.trace {
        if let Some(plan) = &request.plan {
            check_trace_is_of(trace, &plan.command)?;
        }
        let outcome = screen(request, trace, observer, interrupted.clone(), &mut warnings)?;
        if request.plan.is_none() || outcome.interrupted {
            return Ok(Tuned {
                outcome,
                screened: None,
                run_variants: Vec::new(),
                warnings,
            });
        }
        let best = crate::answer::best_candidates(
            &outcome,
            request.search.objective,
            &screening_options(request).constraints,
            SCREENED_TO_RUNS,
        );
        candidates = std::iter::once(0)
            .chain(best)
            .enumerate()
            .map(|(id, c)| Candidate {
                id,
                ..outcome.candidates[c].clone()
            })
            .collect();
        screened = Some(outcome);
    }
    let plan = request
        .plan
        .clone()
        .expect("a command where there is no trace (the CLI requires one)");
    let mut options = request.search.clone();
    options.budget = options.budget.saturating_sub(request.started.elapsed());
    let mut evaluator = RunEvaluator::new(plan, sink, interrupted);
    let outcome = search(candidates, &mut evaluator, &options, observer)?;
    Ok(Tuned {
        outcome,
        screened,
        run_variants: evaluator.plan().variants.clone(),
        warnings,
    })
}

/// How the replays search. Before real runs they take a third of the budget, at most 3 runs a
/// candidate, no confirmation of their own (the real runs confirm) and no time limit: a replay's
/// time is the allocator's alone, its calls back to back with the recorded threads all busy, while
/// a program that waits or computes between calls pays a smaller and different share (on the
/// cache workload, glibc:arena_max=1 replays 1.2-1.6× slower and runs 1.00×).
fn screening_options(request: &Request) -> SearchOptions {
    let mut options = request.search.clone();
    if request.plan.is_some() {
        options.budget /= 3;
        options.max_runs = options.max_runs.min(3);
        options.confirm_runs = 0;
        options.constraints.max_time_ratio = None;
    }
    options
}

/// The replay search.
fn screen(
    request: &Request,
    trace: &Path,
    observer: &mut dyn SearchObserver,
    interrupted: Arc<AtomicBool>,
    warnings: &mut Vec<String>,
) -> Result<Outcome, TuneError> {
    let mut options = screening_options(request);
    let replay_options = replay::ReplayOptions {
        timeout: Some(options.budget),
        ..replay::ReplayOptions::default()
    };
    let mut evaluator =
        ReplayEvaluator::open(trace, &replay_options, interrupted).map_err(|error| {
            TuneError::Replay {
                trace: trace.display().to_string(),
                error,
            }
        })?;
    options.budget = options.budget.saturating_sub(request.started.elapsed());
    warnings.extend(evaluator.warnings().iter().cloned());
    Ok(search(
        request.candidates.clone(),
        &mut evaluator,
        &options,
        observer,
    )?)
}

/// Refuses a trace recorded of another command than the one given: its screening would pick
/// candidates for another program. The arguments must be the same, and the program the same file
/// name (`./prog` and `/path/to/prog` both name `prog`).
pub fn check_trace_is_of(trace: &Path, command: &[String]) -> Result<(), TuneError> {
    let reader = trace::TraceReader::open(trace).map_err(|error| TuneError::Trace {
        trace: trace.display().to_string(),
        error,
    })?;
    let recorded = &reader.header().command;
    if same_command(recorded, command) {
        return Ok(());
    }
    Err(TuneError::NotOfCommand {
        trace: trace.display().to_string(),
        recorded: recorded.join(" "),
        given: command.join(" "),
    })
}

fn same_command(recorded: &[String], given: &[String]) -> bool {
    let name = |p: &String| Path::new(p).file_name().map(|n| n.to_owned());
    match (recorded.split_first(), given.split_first()) {
        (Some((a, a_args)), Some((b, b_args))) => a_args == b_args && name(a) == name(b),
        _ => false,
    }
}

impl Tuned {
    /// The search as results.json keeps it (`tune`), with the screening when there was one.
    pub fn record(&self, request: &Request, notes: Vec<String>) -> TuneRecord {
        let mut record = crate::record::build(
            &self.outcome,
            request.search.objective,
            request.search.constraints,
            request
                .plan
                .as_ref()
                .and_then(|p| p.throughput.as_ref())
                .map(|r| r.as_str().to_string()),
            request.search.budget.as_secs_f64(),
            notes,
        );
        if let (Some(screen), Some(trace)) = (&self.screened, &request.trace) {
            record.screening = Some(crate::record::screening(
                &trace.display().to_string(),
                screen,
                &self.outcome,
                request.search.objective,
            ));
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_the_same_by_its_arguments_and_its_programs_name() {
        let v = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert!(same_command(&v("/usr/bin/prog -x 1"), &v("prog -x 1")));
        assert!(same_command(&v("./prog"), &v("/opt/prog")));
        assert!(!same_command(&v("prog -x 1"), &v("prog -x 2")));
        assert!(!same_command(&v("prog"), &v("other")));
        assert!(!same_command(&[], &v("prog")));
    }
}
