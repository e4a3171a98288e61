//! `alloclens gate`: limits a CI job fails on (docs/gate.md). The figures of a run's results
//! directory (RSS, PSS) and of a trace (allocations, not-freed bytes, growth per iteration, per
//! call site with stacks) are checked against hard limits and limits relative to a baseline file
//! kept in the repository; the verdict is an exit status per class of failure and text,
//! Markdown, JUnit XML or GitHub annotations.
mod baseline;
mod check;
mod error;
mod limits;
mod measure;
mod metric;
pub mod output;

use std::path::PathBuf;

pub use baseline::Baseline;
pub use check::{exit_status, Outcome, Status};
pub use error::GateError;
pub use limits::{Bound, Growth, Limits, Rule, Suppression};
pub use measure::{Figure, Measurements, Site};
pub use metric::{Class, Metric};

/// What `alloclens gate` was asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub limits: PathBuf,
    pub baseline: Option<PathBuf>,
    /// Write the measured figures to `baseline` before judging (the "+N%" limits then pass).
    pub update_baseline: bool,
    /// Results directories of `run` and traces of `record`.
    pub inputs: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Verdict {
    pub outcomes: Vec<Outcome>,
    /// 0, or 16 | one bit per failed class.
    pub status: i32,
    pub notes: Vec<String>,
    /// Figures written to the baseline (with `update_baseline`).
    pub baseline_written: Option<usize>,
}

pub fn gate(request: &Request) -> Result<Verdict, GateError> {
    let limits = Limits::read(&request.limits)?;
    let measured = measure::measure(&request.inputs, &limits.growth, &limits.suppressions)?;
    let mut baseline_written = None;
    let baseline = match (&request.baseline, request.update_baseline) {
        (Some(path), true) => {
            let baseline = Baseline::new(check::baseline_figures(&limits, &measured));
            baseline.write(path)?;
            baseline_written = Some(baseline.figures.len());
            Some(baseline)
        }
        (Some(path), false) => Some(Baseline::read(path)?),
        (None, _) if limits.needs_baseline() => return Err(GateError::NoBaseline),
        (None, _) => None,
    };
    if limits.rules.iter().any(|r| r.site.is_some()) && measured.sites.is_none() {
        return Err(GateError::NeedsStacks("a [[site]] limit"));
    }
    let outcomes = check::check(&limits, &measured, baseline.as_ref());
    Ok(Verdict {
        status: exit_status(&outcomes),
        outcomes,
        notes: measured.notes,
        baseline_written,
    })
}
