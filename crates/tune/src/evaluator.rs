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
        let mut plan_timeout = self.plan.timeout;
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
        };
        let record = self
            .session
            .run(&self.plan, &spec, &mut tail, &self.interrupted);
        let last_line = std::mem::take(&mut tail.last);
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
        // A run too short to sample still has its time: the search fails it only when the
        // objective or a limit needs its memory.
        let sampled = record.memory.samples > 0;
        Ok(Observation {
            figures: Figures {
                mean_pss: if sampled {
                    record.memory.pss.mean
                } else {
                    f64::NAN
                },
                peak_pss: if sampled {
                    record.memory.pss.peak as f64
                } else {
                    f64::NAN
                },
                wall: record.wall,
                throughput: record.throughput,
            },
            record: Some(Box::new(record)),
        })
    }

    fn kind(&self) -> &'static str {
        "run"
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }
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

/// Passes everything on and keeps the last non-empty line the command wrote to stderr.
struct StderrTail<'o> {
    inner: &'o mut dyn RunSink,
    last: String,
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
