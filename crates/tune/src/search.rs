//! The search: a race among the candidates (docs/tune.md, "Method").
//!
//! Every candidate runs once (pass 0, allocators interleaved); after each pass the candidates whose
//! objective is clearly worse than the leader's (beyond `z` standard errors of the difference of
//! their log means, `z` = 3 after one run each, 2 after) or that clearly break a constraint are
//! dropped, and the others run once more. The baseline runs at the start of every pass and after
//! every `baseline_every` other runs, so the machine's drift shows in its figures. When the budget
//! left cannot pay a whole pass, the worse half (by mean) is dropped first: successive halving as
//! the fallback of racing. After pass 0 the settings of an allocator that each beat its default are
//! combined into one more candidate.
//!
//! The race's leader is then confirmed with fresh runs, alternated with fresh runs of the baseline
//! (the winner's curse: the best of forty single runs is the luckiest as much as the best, so its
//! own race figures cannot say it is better); the race keeps room in the budget for them.
use std::time::{Duration, Instant};

use allocators::parse_variant;
use runner::RunRecord;

pub use crate::space::{Candidate, Origin};
pub use runner::tune_record::{Confirmation, Event, Status, Trial};

use crate::evaluator::{run_limit, EvalError, Evaluator};
use crate::objective::{Constraints, Figures, Metric, Objective};
use crate::stats::{advantage, beats_beyond_noise, pooled_rel_sd, Estimate};

/// How the search is run.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub objective: Objective,
    pub constraints: Constraints,
    /// Wall time of the whole search: no run starts that is expected to end after it, and a run in
    /// progress is stopped at it.
    pub budget: Duration,
    /// A candidate with this many runs is settled: it runs no more.
    pub max_runs: usize,
    /// The baseline runs again after this many runs of other candidates.
    pub baseline_every: usize,
    /// Fresh runs of the race's leader (and as many of the baseline) that confirm it; 0: none
    /// (a replay screening whose best candidates real runs judge next).
    pub confirm_runs: usize,
}

impl SearchOptions {
    pub fn new(objective: Objective, constraints: Constraints, budget: Duration) -> SearchOptions {
        SearchOptions {
            objective,
            constraints,
            budget,
            max_runs: 10,
            baseline_every: 6,
            confirm_runs: CONFIRM_RUNS,
        }
    }
}

/// Standard errors of the difference beyond which a candidate is clearly worse: after a single run
/// each (the noise then is the pooled one), and once repeated.
pub const DROP_Z_FIRST: f64 = 3.0;
pub const DROP_Z: f64 = 2.0;
/// At most this many settings are combined into one candidate.
const MAX_COMBINED: usize = 3;
/// Fresh runs of the leader confirming it, and the fewest that can (two give a spread of its own):
/// the race keeps room in the budget for the fewest.
pub const CONFIRM_RUNS: usize = 3;
pub const CONFIRM_MIN_RUNS: usize = 2;

/// What the search learned.
pub struct Outcome {
    pub candidates: Vec<Candidate>,
    pub status: Vec<Status>,
    pub trials: Vec<Trial>,
    /// The real runs, in order (results.json `runs`).
    pub runs: Vec<RunRecord>,
    pub events: Vec<Event>,
    pub interrupted: bool,
    pub elapsed_s: f64,
    /// Why the search ended.
    pub stop_reason: String,
    /// What an evaluation was ("run", "replay").
    pub evaluator: &'static str,
    /// The race's leader and its fresh runs; None when the leader was the baseline or confirmation
    /// was not asked for.
    pub confirmation: Option<Confirmation>,
}

impl Outcome {
    /// The figures of a candidate's successful evaluations in the race.
    pub fn figures(&self, candidate: usize) -> Vec<Figures> {
        self.trials
            .iter()
            .filter(|t| t.candidate == candidate && !t.confirmation)
            .filter_map(|t| t.figures)
            .collect()
    }

    /// The estimate of one metric from a candidate's fresh confirmation runs only.
    pub fn fresh_estimate(&self, candidate: usize, metric: Metric) -> Option<Estimate> {
        let values: Vec<f64> = self
            .trials
            .iter()
            .filter(|t| t.candidate == candidate && t.confirmation)
            .filter_map(|t| t.figures?.get(metric))
            .collect();
        Estimate::of(&values)
    }

    /// The estimate of one metric of a candidate.
    pub fn estimate(&self, candidate: usize, metric: Metric) -> Option<Estimate> {
        let values: Vec<f64> = self
            .figures(candidate)
            .iter()
            .filter_map(|f| f.get(metric))
            .collect();
        Estimate::of(&values)
    }

    /// How far a candidate's ratio to the baseline on `metric` is above `limit`, in standard
    /// errors of that ratio (negative below it); None until both have a figure.
    pub fn excess_over_limit(&self, candidate: usize, metric: Metric, limit: f64) -> Option<f64> {
        let e = self.estimate(candidate, metric)?;
        let b = self.estimate(BASELINE, metric)?;
        let noise = self.pooled_noise(metric);
        let se = (e.rel_se(noise).powi(2) + b.rel_se(noise).powi(2)).sqrt();
        Some((e.mean / b.mean / limit).ln() / se)
    }

    /// The relative noise of single runs of a metric, pooled over the repeated candidates.
    pub fn pooled_noise(&self, metric: Metric) -> f64 {
        let estimates: Vec<Estimate> = (0..self.candidates.len())
            .filter_map(|c| self.estimate(c, metric))
            .collect();
        pooled_rel_sd(&estimates)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(
        "the command failed under every variant tried ({tried}): {first}; run it alone to see why"
    )]
    EveryVariantFailed { tried: String, first: String },
    #[error("the command failed under the baseline, glibc's default ({reason}), though it ran under {ran}: tune compares every candidate with the baseline, so it must run")]
    BaselineFailed { reason: String, ran: String },
    #[error("no candidate to search: the space is empty")]
    Empty,
}

/// Progress of the search, for a progress bar.
pub trait SearchObserver {
    fn trial_started(&mut self, _candidate: &Candidate, _elapsed: Duration, _alive: usize) {}
    fn trial_finished(&mut self, _trial: &Trial) {}
    fn event(&mut self, _event: &Event) {}
}

/// A search observer that ignores everything.
pub struct Silent;
impl SearchObserver for Silent {}

/// The search's clock: the time since it started. A real search reads the monotonic clock; the unit
/// tests give one that their evaluator moves, so budgets are exact there.
pub trait Clock {
    fn elapsed(&self) -> Duration;
}

struct Monotonic(Instant);

impl Clock for Monotonic {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

struct Race<'e, 'o> {
    options: &'e SearchOptions,
    evaluator: &'e mut dyn Evaluator,
    observer: &'o mut dyn SearchObserver,
    clock: &'e dyn Clock,
    out: Outcome,
    pass: usize,
    /// In the confirmation, after the race: the budget's reserve is spent.
    confirming: bool,
    /// The race stopped at the reserve with nothing to confirm: the reserve pays more race.
    spend_reserve: bool,
}

/// The search ended early: Ctrl-C or the budget.
enum Stop {
    Interrupted,
    Budget,
}

/// Races `candidates` (the first is the baseline) with `evaluator` until the budget is spent, every
/// candidate left is settled, or Ctrl-C. An error only when nothing can be compared: the command
/// fails under every variant, or under the baseline.
pub fn search(
    candidates: Vec<Candidate>,
    evaluator: &mut dyn Evaluator,
    options: &SearchOptions,
    observer: &mut dyn SearchObserver,
) -> Result<Outcome, SearchError> {
    let clock = Monotonic(Instant::now());
    evaluator.set_deadline(clock.0 + options.budget);
    search_with_clock(candidates, evaluator, options, observer, &clock)
}

/// [`search`] on a given clock.
pub fn search_with_clock(
    candidates: Vec<Candidate>,
    evaluator: &mut dyn Evaluator,
    options: &SearchOptions,
    observer: &mut dyn SearchObserver,
    clock: &dyn Clock,
) -> Result<Outcome, SearchError> {
    if candidates.is_empty() {
        return Err(SearchError::Empty);
    }
    let kind = evaluator.kind();
    let n = candidates.len();
    let mut race = Race {
        options,
        evaluator,
        observer,
        clock,
        confirming: false,
        spend_reserve: false,
        out: Outcome {
            candidates,
            status: vec![Status::Alive; n],
            trials: Vec::new(),
            runs: Vec::new(),
            events: Vec::new(),
            interrupted: false,
            elapsed_s: 0.0,
            stop_reason: String::new(),
            evaluator: kind,
            confirmation: None,
        },
        pass: 0,
    };
    let mut stop = race.run_passes();
    if matches!(stop, Err(Stopped::Early(Stop::Budget)))
        && race.leader().is_none_or(|c| c == BASELINE)
        && race.reserve() > 0.0
    {
        // Nothing to confirm at the reserve: the race goes on with it.
        race.spend_reserve = true;
        stop = race.run_passes();
    }
    match stop {
        Ok(reason) => race.out.stop_reason = reason,
        Err(Stopped::Error(e)) => return Err(e),
        Err(Stopped::Early(Stop::Interrupted)) => {
            race.out.interrupted = true;
            race.out.stop_reason = "interrupted (Ctrl-C)".into();
        }
        Err(Stopped::Early(Stop::Budget)) => {
            race.out.stop_reason = "the budget was spent".into();
        }
    }
    race.confirm_leader();
    race.out.elapsed_s = race.elapsed().as_secs_f64();
    Ok(race.out)
}

enum Stopped {
    Early(Stop),
    Error(SearchError),
}

impl From<Stop> for Stopped {
    fn from(s: Stop) -> Self {
        Stopped::Early(s)
    }
}

const BASELINE: usize = 0;

impl Race<'_, '_> {
    fn elapsed(&self) -> Duration {
        self.clock.elapsed()
    }

    fn alive_others(&self) -> Vec<usize> {
        (1..self.out.candidates.len())
            .filter(|&c| self.out.status[c] == Status::Alive)
            .collect()
    }

    fn successes(&self, c: usize) -> usize {
        self.out
            .trials
            .iter()
            .filter(|t| t.candidate == c && t.figures.is_some())
            .count()
    }

    /// The usual length of an evaluation of `c` (its own, else every candidate's mean).
    fn expected_duration(&self, c: usize) -> Option<f64> {
        let mean = |it: &mut dyn Iterator<Item = f64>| {
            let v: Vec<f64> = it.collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let own = self.out.trials.iter().filter(|t| t.candidate == c);
        mean(&mut own.map(|t| t.took_s))
            .or_else(|| mean(&mut self.out.trials.iter().map(|t| t.took_s)))
    }

    fn run_passes(&mut self) -> Result<String, Stopped> {
        loop {
            let mut order = self.alive_others();
            order.retain(|&c| self.successes(c) < self.options.max_runs);
            if order.is_empty() {
                return Ok(if self.alive_others().is_empty() {
                    "every candidate but the baseline was dropped".into()
                } else {
                    format!("every candidate left has {} runs", self.options.max_runs)
                });
            }
            if self.pass == 0 {
                order = interleave_allocators(&self.out.candidates, &order);
            } else {
                let shift = self.pass % order.len();
                order.rotate_left(shift);
                self.halve_to_fit(&mut order);
            }
            self.run_pass(&order)?;
            if self.pass == 0 {
                self.check_something_runs()?;
                self.combine();
            }
            self.drop_clearly_worse();
            self.pass += 1;
        }
    }

    /// One run of the baseline, then of each candidate of `order`, the baseline again every
    /// `baseline_every` runs.
    fn run_pass(&mut self, order: &[usize]) -> Result<(), Stopped> {
        self.trial(BASELINE)?;
        if self.pass == 0 && self.defaults_in(order) == 0 {
            self.check_something_runs()?;
        }
        for (k, &c) in order.iter().enumerate() {
            if k > 0 && k % self.options.baseline_every == 0 {
                self.trial(BASELINE)?;
            }
            if self.pass == 0 && k + 1 == self.defaults_in(order) {
                self.trial(c)?;
                self.check_something_runs()?;
                continue;
            }
            // Pass 0 taken up again (after the reserve was freed): one run each.
            let ran = self.pass == 0 && self.out.trials.iter().any(|t| t.candidate == c);
            if self.out.status[c] == Status::Alive && !ran {
                self.trial(c)?;
            }
        }
        Ok(())
    }

    /// How many of the first runs of `order` are allocator defaults (they come first in pass 0).
    fn defaults_in(&self, order: &[usize]) -> usize {
        order
            .iter()
            .take_while(|&&c| self.out.candidates[c].origin == Origin::Default)
            .count()
    }

    /// Seconds of the budget the race leaves to the confirmation: the fewest fresh runs of its
    /// slowest candidate still in the race and of the baseline.
    fn reserve(&self) -> f64 {
        if self.confirming || self.spend_reserve || self.options.confirm_runs == 0 {
            return 0.0;
        }
        let slowest = self
            .alive_others()
            .into_iter()
            .filter_map(|c| self.expected_duration(c))
            .fold(0.0, f64::max);
        let baseline = self.expected_duration(BASELINE).unwrap_or(0.0);
        CONFIRM_MIN_RUNS.min(self.options.confirm_runs) as f64 * (slowest + baseline)
    }

    /// One evaluation of `c`, unless the budget (less the confirmation's reserve) cannot pay it.
    fn trial(&mut self, c: usize) -> Result<(), Stop> {
        let elapsed = self.elapsed();
        let budget = self.options.budget.as_secs_f64() - self.reserve();
        if elapsed.as_secs_f64() >= budget {
            return Err(Stop::Budget);
        }
        if let Some(expected) = self.expected_duration(c) {
            if elapsed.as_secs_f64() + expected > budget {
                return Err(Stop::Budget);
            }
        }
        let alive = self.alive_others().len();
        self.observer
            .trial_started(&self.out.candidates[c], elapsed, alive);
        let repeat = self.out.trials.iter().filter(|t| t.candidate == c).count();
        let at = self.elapsed();
        let result = self
            .evaluator
            .evaluate(&self.out.candidates[c].variant, repeat)
            .and_then(|obs| match self.missing_figure(&obs.figures) {
                Some(reason) => Err(EvalError::Failed {
                    reason,
                    record: obs.record,
                }),
                None => Ok(obs),
            });
        let took_s = (self.elapsed() - at).as_secs_f64();
        let mut trial = Trial {
            candidate: c,
            pass: self.pass,
            at_s: at.as_secs_f64(),
            took_s,
            figures: None,
            failure: None,
            run: None,
            confirmation: self.confirming,
        };
        let first_baseline = c == BASELINE && self.successes(BASELINE) == 0;
        let runs = &mut self.out.runs;
        let mut keep_record = |record: Option<Box<RunRecord>>, trial: &mut Trial| {
            if let Some(mut r) = record {
                r.index = runs.len();
                trial.run = Some(r.index);
                runs.push(*r);
            }
        };
        match result {
            Ok(obs) => {
                trial.figures = Some(obs.figures);
                keep_record(obs.record, &mut trial);
                if first_baseline {
                    self.evaluator.set_run_limit(run_limit(took_s));
                }
            }
            Err(EvalError::Interrupted) => return Err(Stop::Interrupted),
            Err(EvalError::Failed { reason, record }) => {
                keep_record(record, &mut trial);
                let budget_end = self.elapsed() >= self.options.budget;
                trial.failure = Some(reason.clone());
                self.out.trials.push(trial.clone());
                self.observer.trial_finished(&trial);
                if budget_end {
                    return Err(Stop::Budget);
                }
                if c != BASELINE && !self.confirming {
                    self.out.status[c] = Status::Failed;
                    self.event(Some(c), "failed", reason);
                } else {
                    self.event(
                        Some(c),
                        "failed",
                        format!("a baseline run failed: {reason}"),
                    );
                }
                return Ok(());
            }
        }
        self.out.trials.push(trial.clone());
        self.observer.trial_finished(&trial);
        Ok(())
    }

    fn event(&mut self, candidate: Option<usize>, kind: &str, why: String) {
        let e = Event {
            at_s: self.elapsed().as_secs_f64(),
            pass: self.pass,
            candidate,
            kind: kind.into(),
            why,
        };
        self.observer.event(&e);
        self.out.events.push(e);
    }

    /// Once the baseline and the defaults have run: an error when nothing ran, or the baseline
    /// did not.
    fn check_something_runs(&self) -> Result<(), Stopped> {
        let tried: Vec<usize> = (0..self.out.candidates.len())
            .filter(|&c| self.out.trials.iter().any(|t| t.candidate == c))
            .collect();
        if self.successes(BASELINE) > 0 {
            return Ok(());
        }
        let first_failure = self
            .out
            .trials
            .iter()
            .find_map(|t| t.failure.clone())
            .unwrap_or_default();
        let ran: Vec<&str> = tried
            .iter()
            .filter(|&&c| self.successes(c) > 0)
            .map(|&c| self.out.candidates[c].variant.label.as_str())
            .collect();
        if ran.is_empty() {
            let labels: Vec<&str> = tried
                .iter()
                .map(|&c| self.out.candidates[c].variant.label.as_str())
                .collect();
            return Err(Stopped::Error(SearchError::EveryVariantFailed {
                tried: labels.join(", "),
                first: format!("under {}: {first_failure}", labels[0]),
            }));
        }
        Err(Stopped::Error(SearchError::BaselineFailed {
            reason: first_failure,
            ran: ran.join(", "),
        }))
    }

    /// Why an evaluation's figures cannot be compared: the objective or a limit needs a figure
    /// it lacks.
    fn missing_figure(&self, figures: &Figures) -> Option<String> {
        let limits = self.options.constraints.limits();
        let needed =
            std::iter::once(self.options.objective.metric()).chain(limits.iter().map(|l| l.0));
        for metric in needed {
            if figures.get(metric).is_some() {
                continue;
            }
            return Some(match metric {
                Metric::MeanPss | Metric::PeakPss => "ended before its memory could be sampled (give a longer-running command, or a shorter --interval)".to_string(),
                Metric::Throughput => "printed no line matching --throughput".to_string(),
                Metric::Wall => "took no measurable time".to_string(),
            });
        }
        None
    }

    fn lower_is_better(&self) -> bool {
        self.options.objective.metric().lower_is_better()
    }

    /// Whether the candidate's point estimates keep every constraint.
    fn feasible(&self, c: usize) -> bool {
        self.options
            .constraints
            .limits()
            .iter()
            .all(|&(metric, limit)| {
                match (
                    self.out.estimate(c, metric),
                    self.out.estimate(BASELINE, metric),
                ) {
                    (Some(e), Some(b)) => e.mean / b.mean <= limit,
                    _ => true,
                }
            })
    }

    /// The best feasible candidate by its mean objective (the baseline included).
    fn leader(&self) -> Option<usize> {
        let metric = self.options.objective.metric();
        std::iter::once(BASELINE)
            .chain(self.alive_others())
            .filter(|&c| self.feasible(c))
            .filter_map(|c| self.out.estimate(c, metric).map(|e| (c, e.mean)))
            .min_by(|a, b| {
                if self.lower_is_better() {
                    a.1.total_cmp(&b.1)
                } else {
                    b.1.total_cmp(&a.1)
                }
            })
            .map(|(c, _)| c)
    }

    /// The racing step: candidates clearly worse than the leader, or clearly outside a
    /// constraint, are dropped.
    fn drop_clearly_worse(&mut self) {
        let z = if self.pass == 0 { DROP_Z_FIRST } else { DROP_Z };
        let metric = self.options.objective.metric();
        let limits = self.options.constraints.limits();
        for c in self.alive_others() {
            let Some(est) = self.out.estimate(c, metric) else {
                continue;
            };
            for &(m, limit) in &limits {
                let (Some(e), Some(b), Some(excess)) = (
                    self.out.estimate(c, m),
                    self.out.estimate(BASELINE, m),
                    self.out.excess_over_limit(c, m, limit),
                ) else {
                    continue;
                };
                if excess > z {
                    let why = format!(
                        "{} {:.2}× the baseline's, above the limit {limit:.2} by {excess:.1} standard errors",
                        m.name(),
                        e.mean / b.mean
                    );
                    self.drop(c, why);
                }
            }
            if self.out.status[c] != Status::Alive {
                continue;
            }
            let Some(leader) = self.leader() else {
                continue;
            };
            if leader == c {
                continue;
            }
            let Some(best) = self.out.estimate(leader, metric) else {
                continue;
            };
            let noise = self.out.pooled_noise(metric);
            let behind = advantage(&best, &est, self.lower_is_better(), noise);
            if behind > z {
                let why = format!(
                    "{} {:.2}× the leader's ({}), worse by {behind:.1} standard errors",
                    metric.name(),
                    est.mean / best.mean,
                    self.out.candidates[leader].variant.label
                );
                self.drop(c, why);
            }
        }
    }

    fn drop(&mut self, c: usize, why: String) {
        self.out.status[c] = Status::Dropped;
        self.event(Some(c), "dropped", why);
    }

    /// Successive halving when the budget left cannot pay a pass: the worse half by mean objective
    /// goes, until one pass fits (or one candidate is left).
    fn halve_to_fit(&mut self, order: &mut Vec<usize>) {
        let left =
            self.options.budget.as_secs_f64() - self.reserve() - self.elapsed().as_secs_f64();
        let metric = self.options.objective.metric();
        loop {
            let cost: f64 = order
                .iter()
                .map(|&c| self.expected_duration(c).unwrap_or(0.0))
                .sum::<f64>()
                + self.expected_duration(BASELINE).unwrap_or(0.0)
                    * (1 + order.len() / self.options.baseline_every) as f64;
            if cost <= left || order.len() <= 1 {
                return;
            }
            let mut ranked: Vec<(usize, f64)> = order
                .iter()
                .map(|&c| {
                    let mean = self.out.estimate(c, metric).map_or(f64::NAN, |e| e.mean);
                    let key = if self.lower_is_better() { mean } else { -mean };
                    // Infeasible ones rank last.
                    (c, if self.feasible(c) { key } else { f64::INFINITY })
                })
                .collect();
            ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
            let keep = order.len().div_ceil(2);
            for &(c, _) in &ranked[keep..] {
                let why = format!(
                    "halving: the budget left ({left:.0}s) does not pay one more run of the {} candidates left; kept the better half by mean {}",
                    order.len(),
                    metric.name()
                );
                self.drop(c, why);
            }
            order.retain(|&c| self.out.status[c] == Status::Alive);
        }
    }

    /// After the race: fresh runs of the leader alternated with fresh runs of the baseline, up to
    /// `confirm_runs` each or the budget's end. The leader is confirmed when its fresh runs beat
    /// the baseline's fresh runs beyond the noise and keep every constraint; its race figures,
    /// picked as the best of many, say nothing either way.
    fn confirm_leader(&mut self) {
        if self.options.confirm_runs == 0 {
            return;
        }
        let Some(leader) = self.leader().filter(|&c| c != BASELINE) else {
            return;
        };
        self.confirming = true;
        let mut why = None;
        if self.out.interrupted {
            why = Some("interrupted before its fresh runs".to_string());
        } else {
            for _ in 0..self.options.confirm_runs {
                match self.trial(leader).and_then(|()| self.trial(BASELINE)) {
                    Ok(()) => {}
                    Err(Stop::Interrupted) => {
                        self.out.interrupted = true;
                        self.out.stop_reason = "interrupted (Ctrl-C)".into();
                        break;
                    }
                    Err(Stop::Budget) => break,
                }
                let failure = self
                    .out
                    .trials
                    .iter()
                    .rev()
                    .find(|t| t.candidate == leader)
                    .and_then(|t| t.failure.clone());
                if let Some(failure) = failure {
                    why = Some(format!("a fresh run failed: {failure}"));
                    break;
                }
            }
        }
        let metric = self.options.objective.metric();
        let fresh = |c: usize, m: Metric| self.out.fresh_estimate(c, m);
        let confirmed = match (fresh(leader, metric), fresh(BASELINE, metric)) {
            _ if why.is_some() => false,
            (Some(f), Some(b)) if f.n >= CONFIRM_MIN_RUNS && b.n >= CONFIRM_MIN_RUNS => {
                let broken = self.options.constraints.limits().into_iter().find(|&(m, limit)| {
                    matches!((fresh(leader, m), fresh(BASELINE, m)), (Some(e), Some(b)) if e.mean / b.mean > limit)
                });
                if let Some((m, limit)) = broken {
                    why = Some(format!(
                        "its fresh runs' {} is above the limit {limit:.2}",
                        m.name()
                    ));
                    false
                } else if beats_beyond_noise(&f, &b, self.lower_is_better()) {
                    true
                } else {
                    why = Some(format!(
                        "its fresh runs do not beat the baseline's beyond the noise ({} {:.2}× in {} runs against {})",
                        metric.name(),
                        f.mean / b.mean,
                        f.n,
                        b.n
                    ));
                    false
                }
            }
            (f, _) => {
                why = Some(format!(
                    "the budget left room for {} fresh runs of it, {CONFIRM_MIN_RUNS} needed",
                    f.map_or(0, |f| f.n)
                ));
                false
            }
        };
        let said = why
            .clone()
            .unwrap_or_else(|| "its fresh runs beat the baseline's beyond the noise".into());
        self.event(
            Some(leader),
            if confirmed {
                "confirmed"
            } else {
                "unconfirmed"
            },
            said,
        );
        self.out.confirmation = Some(Confirmation {
            candidate: leader,
            confirmed,
            why,
        });
    }

    /// After pass 0: for each allocator, the best value of each setting that beat its default
    /// by more than one standard error, combined (at most `MAX_COMBINED`, best first).
    fn combine(&mut self) {
        let metric = self.options.objective.metric();
        let noise = self.out.pooled_noise(metric);
        let n = self.out.candidates.len();
        let mut allocators: Vec<String> = self
            .out
            .candidates
            .iter()
            .map(|c| c.variant.allocator.clone())
            .collect();
        allocators.dedup();
        for allocator in allocators {
            let Some(default) = (0..n).find(|&c| {
                let cand = &self.out.candidates[c];
                cand.variant.allocator == allocator
                    && cand.variant.settings.is_empty()
                    && matches!(cand.origin, Origin::Default | Origin::Baseline)
            }) else {
                continue;
            };
            let Some(base) = self.out.estimate(default, metric) else {
                continue;
            };
            // (advantage, setting, value, candidate), one per setting: its best value.
            let mut best: Vec<(f64, String, String, usize)> = Vec::new();
            for c in 0..n {
                let cand = &self.out.candidates[c];
                if cand.variant.allocator != allocator
                    || cand.origin != Origin::Spread
                    || cand.variant.settings.len() != 1
                    || self.out.status[c] != Status::Alive
                    || !self.feasible(c)
                {
                    continue;
                }
                let Some(est) = self.out.estimate(c, metric) else {
                    continue;
                };
                let adv = advantage(&est, &base, self.lower_is_better(), noise);
                if adv <= 1.0 {
                    continue;
                }
                let (setting, value) = cand.variant.settings[0].clone();
                match best.iter_mut().find(|b| b.1 == setting) {
                    Some(b) if b.0 >= adv => {}
                    Some(b) => *b = (adv, setting, value, c),
                    None => best.push((adv, setting, value, c)),
                }
            }
            best.sort_by(|a, b| b.0.total_cmp(&a.0));
            best.truncate(MAX_COMBINED);
            if best.len() < 2 {
                continue;
            }
            let settings: Vec<String> = best.iter().map(|b| format!("{}={}", b.1, b.2)).collect();
            let spec = format!("{allocator}:{}", settings.join(","));
            let Ok(variant) = parse_variant(&spec) else {
                continue;
            };
            if self
                .out
                .candidates
                .iter()
                .any(|c| c.variant.label == variant.label)
            {
                continue;
            }
            let id = self.out.candidates.len();
            let from: Vec<usize> = best.iter().map(|b| b.3).collect();
            self.out.candidates.push(Candidate {
                id,
                variant,
                origin: Origin::Combined { from },
            });
            self.out.status.push(Status::Alive);
            self.event(
                Some(id),
                "added",
                format!("combines the settings of {allocator} that each beat its default by more than one standard error"),
            );
        }
    }
}

/// Pass 0's order: the allocators' defaults first, then their other candidates taken in turn from
/// each allocator, so no allocator's runs bunch at one end of the pass.
fn interleave_allocators(candidates: &[Candidate], order: &[usize]) -> Vec<usize> {
    let (defaults, rest): (Vec<usize>, Vec<usize>) = order
        .iter()
        .partition(|&&c| candidates[c].origin == Origin::Default);
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for c in rest {
        let a = &candidates[c].variant.allocator;
        match groups.iter_mut().find(|g| &g.0 == a) {
            Some(g) => g.1.push(c),
            None => groups.push((a.clone(), vec![c])),
        }
    }
    let mut out = defaults;
    let longest = groups.iter().map(|g| g.1.len()).max().unwrap_or(0);
    for i in 0..longest {
        for g in &groups {
            if let Some(&c) = g.1.get(i) {
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
