//! The one interface the search measures candidates through, and its implementation by real runs.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allocators::Variant;
use runner::{Observer, OutputStream, RunPlan, RunRecord, RunSpec, SampleKind, Session};

use crate::objective::Figures;

/// The figures of one evaluation of a candidate, and the run behind them when there was one.
#[derive(Debug, Clone)]
pub struct Observation {
    pub figures: Figures,
    /// The measured run (a real run); None for an evaluation without one (a replay).
    pub record: Option<Box<RunRecord>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The candidate did not give figures: its run failed (crash, exit status, timeout). The
    /// search drops it and goes on.
    #[error("{reason}")]
    Failed {
        reason: String,
        record: Option<Box<RunRecord>>,
    },
    /// Ctrl-C: the search stops and reports what it has.
    #[error("interrupted")]
    Interrupted,
}

/// Measures a candidate once. The search knows no more of how figures are made: by a real run of
/// the command ([`RunEvaluator`]) or by replaying a trace.
pub trait Evaluator {
    /// One evaluation of `candidate`; `repeat` counts its earlier evaluations (0 for the first).
    fn evaluate(&mut self, candidate: &Variant, repeat: usize) -> Result<Observation, EvalError>;

    /// What an evaluation is, for the summary ("run", "replay").
    fn kind(&self) -> &'static str;

    /// The latest moment an evaluation may last until (the budget's end); evaluators that can
    /// stop one in progress do so then.
    fn set_deadline(&mut self, _deadline: Instant) {}

    /// The longest one evaluation may take unless the user gave a limit (`--timeout`): the search
    /// sets it from the baseline's first one, so a candidate that hangs does not eat the budget.
    fn set_run_limit(&mut self, _limit: Duration) {}
}

/// Sees every real run, as `run`'s observer does, and learns each variant's index in the plan
/// (a `RunSpec` names its variant by index) when it is first run.
pub trait RunSink: Observer {
    fn variant_added(&mut self, _index: usize, _variant: &Variant) {}
}

/// Real runs of the command, measured by the runner as `alloclens run` measures them: the tree's
/// time-weighted mean and peak PSS, the wall time, the throughput from `--throughput`.
pub struct RunEvaluator<'a> {
    plan: RunPlan,
    session: Session,
    observer: &'a mut dyn RunSink,
    interrupted: Arc<AtomicBool>,
    /// Runs made so far: the next run's index.
    runs: usize,
    deadline: Option<Instant>,
    /// The search's per-run limit, when the plan has no `--timeout`.
    run_limit: Option<Duration>,
}

/// The last line of a failed run's stderr is shown with its failure (kept short).
const FAILURE_LINE_MAX: usize = 160;

impl<'a> RunEvaluator<'a> {
    /// `plan` gives the command and how to observe it (interval, throughput regex, timeout); its
    /// variants are ignored: each evaluation runs the candidate it is given. `observer` sees every
    /// run (samples, output) as `run`'s does.
    pub fn new(
        plan: RunPlan,
        observer: &'a mut dyn RunSink,
        interrupted: Arc<AtomicBool>,
    ) -> RunEvaluator<'a> {
        RunEvaluator {
            plan: RunPlan {
                variants: Vec::new(),
                repeats: 1,
                ..plan
            },
            session: Session::start(),
            observer,
            interrupted,
            runs: 0,
            deadline: None,
            run_limit: None,
        }
    }

    /// The plan with every variant run so far (results.json lists them).
    pub fn plan(&self) -> &RunPlan {
        &self.plan
    }

    fn variant_index(&mut self, candidate: &Variant) -> usize {
        match self
            .plan
            .variants
            .iter()
            .position(|v| v.label == candidate.label)
        {
            Some(i) => i,
            None => {
                self.plan.variants.push(candidate.clone());
                let index = self.plan.variants.len() - 1;
                self.observer.variant_added(index, candidate);
                index
            }
        }
    }
}

impl Evaluator for RunEvaluator<'_> {
    fn evaluate(&mut self, candidate: &Variant, repeat: usize) -> Result<Observation, EvalError> {
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(EvalError::Interrupted);
        }
        let variant = self.variant_index(candidate);
        let spec = RunSpec {
            index: self.runs,
            variant,
            assignment: Default::default(),
            repeat: repeat as u32,
        };
        self.runs += 1;
        // A run may not outlast the budget: it is stopped at its end, as --timeout stops it.
        let mut plan_timeout = self.plan.timeout.or(self.run_limit);
        if let Some(deadline) = self.deadline {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(100));
            plan_timeout = Some(plan_timeout.map_or(left, |t| t.min(left)));
        }
        let user_timeout = std::mem::replace(&mut self.plan.timeout, plan_timeout);
        let mut tail = StderrTail {
            inner: &mut *self.observer as &mut dyn RunSink,
            last: String::new(),
            complaint: None,
        };
        let record = self
            .session
            .run(&self.plan, &spec, &mut tail, &self.interrupted);
        let last_line = std::mem::take(&mut tail.last);
        let complaint = tail.complaint.take();
        self.plan.timeout = user_timeout;
        // Interrupted while --prepare ran: not a run, and the search stops.
        let Ok(record) = record else {
            return Err(EvalError::Interrupted);
        };
        self.observer.run_finished(&spec, &record);
        if record.ending.interrupted && self.interrupted.load(Ordering::Relaxed) {
            return Err(EvalError::Interrupted);
        }
        if !record.ending.ok() {
            let mut reason = match &record.ending.spawn_error {
                Some(e) => e.clone(),
                None if record.ending.timed_out
                    && self
                        .deadline
                        .is_some_and(|d| Instant::now() + Duration::from_millis(200) >= d) =>
                {
                    "stopped at the end of the budget".to_string()
                }
                None if record.ending.timed_out && self.plan.timeout.is_none() => {
                    format!(
                        "stopped at the per-run limit, {:.1}s ({RUN_LIMIT_FACTOR} × the baseline's first run, at least {}s; --timeout sets another)",
                        self.run_limit.unwrap_or_default().as_secs_f64(),
                        RUN_LIMIT_MIN.as_secs()
                    )
                }
                None => describe_failure(&record),
            };
            if !last_line.is_empty() {
                reason.push_str(&format!(" (its last stderr line: {last_line})"));
            }
            return Err(EvalError::Failed {
                reason,
                record: Some(Box::new(record)),
            });
        }
        // The allocator said it did not take a setting as given (jemalloc clamps `narenas` and
        // says so): the figures are of another variant than the candidate's name.
        if let Some(line) = complaint {
            return Err(EvalError::Failed {
                reason: format!("the allocator did not take its settings as given: {line}"),
                record: Some(Box::new(record)),
            });
        }
        Ok(Observation {
            figures: figures_of_run(&record),
            record: Some(Box::new(record)),
        })
    }

    fn kind(&self) -> &'static str {
        "run"
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    fn set_run_limit(&mut self, limit: Duration) {
        self.run_limit = Some(limit);
    }
}

/// The per-run limit without `--timeout`: this many times the baseline's first run, and at least
/// `RUN_LIMIT_MIN` (docs/tune.md, "Budget").
pub const RUN_LIMIT_FACTOR: u32 = 10;
pub const RUN_LIMIT_MIN: Duration = Duration::from_secs(5);

/// The per-run limit for a baseline whose first evaluation took `baseline_s`.
pub fn run_limit(baseline_s: f64) -> Duration {
    Duration::from_secs_f64(baseline_s * RUN_LIMIT_FACTOR as f64).max(RUN_LIMIT_MIN)
}

/// The figures of a real run. A run too short to sample still has its time: the search fails it
/// only when the objective or a limit needs its memory. The peak is the samples' highest PSS
/// unless the kernel saw a higher RSS than any sample (the samples missed the peak): then the
/// kernel's high-water mark, as `run` shows its peak RSS.
fn figures_of_run(record: &RunRecord) -> Figures {
    let memory = &record.memory;
    let sampled = memory.samples > 0;
    let peak = match memory.kernel_peak_rss {
        Some(kernel) if memory.peak_rss_is_kernel() => kernel as f64,
        _ if sampled => memory.pss.peak as f64,
        _ => f64::NAN,
    };
    Figures {
        mean_pss: if sampled { memory.pss.mean } else { f64::NAN },
        peak_pss: peak,
        wall: record.wall,
        throughput: record.throughput,
    }
}

/// Whether a line of stderr is the allocator's complaint about its settings (jemalloc writes
/// `<jemalloc>: Invalid conf value: ...`, `<jemalloc>: Reducing narenas to limit (4094)`).
fn allocator_complaint(line: &str) -> bool {
    line.starts_with("<jemalloc>:")
}

/// "exit 3", "killed by signal 11 (SIGSEGV)", "timeout".
fn describe_failure(record: &RunRecord) -> String {
    let signal = record.ending.status.and_then(|s| s.signal);
    match signal {
        Some(sig) => format!("killed by signal {sig} ({})", signal_name(sig)),
        None => record.ending.describe(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// Passes everything on and keeps the last non-empty line the command wrote to stderr, and the
/// allocator's first complaint about its settings.
struct StderrTail<'o> {
    inner: &'o mut dyn RunSink,
    last: String,
    complaint: Option<String>,
}

impl Observer for StderrTail<'_> {
    fn warmup_started(&mut self, spec: &RunSpec, n: u32) {
        self.inner.warmup_started(spec, n);
    }

    fn run_started(&mut self, spec: &RunSpec, command: &[String]) {
        self.inner.run_started(spec, command);
    }

    fn output(&mut self, spec: &RunSpec, stream: OutputStream, line: &[u8]) {
        if stream == OutputStream::Stderr {
            let text = String::from_utf8_lossy(line);
            let text = text.trim();
            if !text.is_empty() {
                self.last = text.chars().take(FAILURE_LINE_MAX).collect();
                if self.complaint.is_none() && allocator_complaint(text) {
                    self.complaint = Some(self.last.clone());
                }
            }
        }
        self.inner.output(spec, stream, line);
    }

    fn sample(
        &mut self,
        spec: &RunSpec,
        t: Duration,
        kind: &SampleKind,
        label: Option<&str>,
        sample: &procmem::TreeSample,
    ) {
        self.inner.sample(spec, t, kind, label, sample);
    }

    fn marker(&mut self, spec: &RunSpec, marker: &runner::MarkerRecord) {
        self.inner.marker(spec, marker);
    }

    fn run_finished(&mut self, spec: &RunSpec, record: &RunRecord) {
        self.inner.run_finished(spec, record);
    }
}

/// Replays of a recorded trace (`alloclens replay`): the recorded calls performed under the
/// candidate in a replay process, seconds per candidate instead of the program's run. Memory is
/// the replay process's RSS, averaged over the recorded call axis (so a faster allocator is not
/// credited with less memory for finishing sooner); time is the replay's duration; throughput its
/// calls per second.
pub struct ReplayEvaluator {
    replay: replay::Replay,
    interrupted: Arc<AtomicBool>,
}

impl ReplayEvaluator {
    /// Decodes the trace once; every evaluation replays it.
    pub fn open(
        trace: &std::path::Path,
        options: &replay::ReplayOptions,
        interrupted: Arc<AtomicBool>,
    ) -> Result<ReplayEvaluator, replay::ReplayError> {
        Ok(ReplayEvaluator {
            replay: replay::Replay::open(trace, options)?,
            interrupted,
        })
    }

    /// What could not be read of the trace.
    pub fn warnings(&self) -> &[String] {
        &self.replay.warnings
    }
}

impl Evaluator for ReplayEvaluator {
    fn evaluate(&mut self, candidate: &Variant, repeat: usize) -> Result<Observation, EvalError> {
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(EvalError::Interrupted);
        }
        let result = self.replay.run(candidate, repeat as u32, &mut |_, _| {});
        // Ctrl-C reaches the replay process too: its end is not the candidate's fault.
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(EvalError::Interrupted);
        }
        let r = result.map_err(|e| EvalError::Failed {
            reason: e.to_string(),
            record: None,
        })?;
        if !r.ok {
            return Err(EvalError::Failed {
                reason: format!("the replay ended with {}", r.ending),
                record: None,
            });
        }
        Ok(Observation {
            figures: Figures {
                // Weighted by the original's time, as `replay` reports it (docs/replay.md).
                mean_pss: r.figures.mean_rss,
                peak_pss: r.figures.peak_rss as f64,
                wall: r.seconds,
                throughput: Some(r.calls_per_s),
            },
            record: None,
        })
    }

    fn kind(&self) -> &'static str {
        "replay"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose samples missed its peak (a short burst between two samples): the kernel's
    /// high-water mark, five times the sampled PSS peak, is the peak tune optimises.
    #[test]
    fn the_kernels_peak_stands_where_the_samples_missed_it() {
        let mut record = RunRecord {
            wall: 0.2,
            ..Default::default()
        };
        record.memory.samples = 3;
        record.memory.pss.mean = 8e6;
        record.memory.pss.peak = 10_000_000;
        record.memory.rss.peak = 12_000_000;
        record.memory.kernel_peak_rss = Some(50_000_000);
        assert_eq!(figures_of_run(&record).peak_pss, 50e6);
        // Samples that saw the peak keep their PSS (RSS counts shared pages in full).
        record.memory.kernel_peak_rss = Some(11_000_000);
        assert_eq!(figures_of_run(&record).peak_pss, 10e6);
        // No sample, the kernel's figure only: the peak, not the mean.
        record.memory.samples = 0;
        record.memory.kernel_peak_rss = Some(4_000_000);
        let f = figures_of_run(&record);
        assert_eq!((f.peak_pss, f.mean_pss.is_nan()), (4e6, true));
    }

    #[test]
    fn the_run_limit_is_ten_baselines_and_at_least_five_seconds() {
        assert_eq!(run_limit(0.1), RUN_LIMIT_MIN);
        assert_eq!(run_limit(3.0), Duration::from_secs(30));
        assert!(allocator_complaint(
            "<jemalloc>: Reducing narenas to limit (4094)"
        ));
        assert!(!allocator_complaint("jemalloc is fine"));
    }
}
