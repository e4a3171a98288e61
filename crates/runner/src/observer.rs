//! How callers watch a plan execute: progress, live output, raw samples. The runner never prints.
use std::time::Duration;

use procmem::TreeSample;

use crate::plan::RunSpec;
use crate::results::{MarkerRecord, RunRecord, SampleKind};

/// Which output stream of the command a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

/// Callbacks, all made from the thread that called `execute`, in order.
pub trait Observer {
    /// Warmup run `n` (counted from 1) of the variant and point of `spec` is about to start; its
    /// output, samples and record are not reported.
    fn warmup_started(&mut self, _spec: &RunSpec, _n: u32) {}
    fn run_started(&mut self, _spec: &RunSpec, _command: &[String]) {}
    /// One line of the command's output, newline included when it had one.
    fn output(&mut self, _spec: &RunSpec, _stream: OutputStream, _line: &[u8]) {}
    /// `t` is the time since the run started; `label` is the marker's label for marker samples.
    fn sample(
        &mut self,
        _spec: &RunSpec,
        _t: Duration,
        _kind: &SampleKind,
        _label: Option<&str>,
        _sample: &TreeSample,
    ) {
    }
    fn marker(&mut self, _spec: &RunSpec, _marker: &MarkerRecord) {}
    fn run_finished(&mut self, _spec: &RunSpec, _record: &RunRecord) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}
