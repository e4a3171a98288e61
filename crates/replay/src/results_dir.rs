//! A replay session's results directory: what `run` writes (results.json, samples.csv), so
//! `report`, `diff` and `report --compare` read it as a run whose wall time is the replay's and
//! whose memory is the replay's anonymous RSS, plus the replay's own files ([`crate::files`]).
//!
//! results.json is written when the directory is made and again after every replay, marked cut
//! (`interrupted`, with a warning saying how many replays it holds), and rewritten whole at the
//! end: a replay killed before its end (SIGKILL, a crash of alloclens) leaves a directory that
//! `report` reads and that says what is in it.
use std::path::Path;

use runner::results_dir::{ResultsDir, ResultsDirError};
use runner::{
    AllocatorCheck, CommandExit, Ending as RunEnding, MemorySummary, RunRecord, RunResults,
    RunSpec, SampleKind, SeriesStats,
};

use crate::{Ending, VariantReplay};

pub struct ReplayDir {
    dir: ResultsDir,
    /// results.json as it stands: the session's header and the runs so far.
    results: RunResults,
    /// Replays the session will make.
    planned: u64,
}

impl ReplayDir {
    /// Makes the directory (as `run` does: refused when it exists, unless `force`) and writes
    /// results.json with no replay yet. `header` is the session's results.json without runs.
    pub fn create(
        path: &Path,
        force: bool,
        header: RunResults,
        planned: u64,
    ) -> Result<ReplayDir, ResultsDirError> {
        let dir = ResultsDir::create(path, force, &[], false, false)?;
        let mut d = ReplayDir {
            dir,
            results: header,
            planned,
        };
        d.write_cut();
        Ok(d)
    }

    /// Adds a replay that ended: its samples, its run record, results.json (still marked cut).
    pub fn add(&mut self, r: &VariantReplay, trace: &Path) {
        let index = self.results.runs.len();
        let spec = RunSpec {
            index,
            variant: self
                .results
                .variants
                .iter()
                .position(|v| v.label == r.variant)
                .unwrap_or(0),
            assignment: Default::default(),
            repeat: r.repeat,
        };
        for s in r.images.iter().flat_map(|i| &i.samples) {
            let sample = procmem::TreeSample {
                at: std::time::Instant::now(),
                processes: Vec::new(),
                total: procmem::MemoryTotals {
                    processes: 1,
                    rss: s.rss,
                    anonymous: s.rss,
                    ..Default::default()
                },
                unreadable: 0,
                stale_processes: 0,
                ksm: None,
            };
            self.dir.write_sample(
                &spec,
                &r.variant,
                s.t_s,
                &SampleKind::Interval,
                None,
                &sample,
            );
        }
        self.dir.finish_run(index);
        self.results.runs.push(run_record(index, r, trace));
        self.write_cut();
    }

    /// results.json as a session cut here would leave it.
    fn write_cut(&mut self) {
        let mut cut = self.results.clone();
        cut.interrupted = true;
        cut.warnings.push(format!(
            "the replay was cut before its end: {} of {} replays are in this directory (results.json is rewritten after each replay)",
            cut.runs.len(),
            self.planned
        ));
        cut.summary = self.summary();
        self.dir.write_results(&mut cut);
    }

    fn summary(&self) -> Vec<runner::Group> {
        let labels: Vec<String> = self
            .results
            .variants
            .iter()
            .map(|v| v.label.clone())
            .collect();
        runner::summarize(
            &self.results.runs,
            &labels,
            self.results.baseline.as_deref(),
            runner::Ranking::Wall,
        )
    }

    /// The end of the session: results.json whole (with `warnings` and whether Ctrl-C stopped
    /// it), then the replay's files. Returns results.json as written and one line per file that
    /// misses something.
    pub fn finish(
        mut self,
        runs: &[VariantReplay],
        warnings: Vec<String>,
        interrupted: bool,
    ) -> (RunResults, Vec<String>) {
        self.results.interrupted = interrupted;
        self.results.warnings = warnings;
        self.results.summary = self.summary();
        let mut results = self.results.clone();
        self.dir.write_results(&mut results);
        // results.json first (it matters most on a full disk), then replay's own files; one that
        // fails is listed in results.json too, so a reader of the directory knows it is incomplete.
        let problems = crate::files::write(self.dir.path(), runs);
        if !problems.is_empty() {
            for p in problems {
                self.dir.note_problem(p);
            }
            self.dir.write_results(&mut results);
        }
        (results, self.dir.problems())
    }
}

/// A replay as `run` records a run: wall = replay time, throughput = calls per second, memory =
/// the replay's anonymous RSS, its mean weighted by the original's time.
fn run_record(index: usize, r: &VariantReplay, trace: &Path) -> RunRecord {
    let samples: Vec<&crate::Sample> = r.images.iter().flat_map(|i| &i.samples).collect();
    let stats = SeriesStats {
        peak: r.figures.peak_rss,
        mean: r.figures.mean_rss,
        last: samples.last().map_or(0, |s| s.rss),
    };
    let exit = |code, signal| CommandExit { code, signal };
    let (status, timed_out) = match r.images.last().map(|i| &i.ending) {
        Some(Ending::Signal(s)) => (exit(None, Some(*s)), false),
        Some(Ending::Exit(c)) => (exit(Some(*c), None), false),
        Some(Ending::Timeout) => (CommandExit::default(), true),
        _ => (exit(Some(0), None), false),
    };
    RunRecord {
        index,
        variant: r.variant.clone(),
        allocator: r.allocator.clone(),
        repeat: r.repeat,
        command: vec!["replay".into(), trace.display().to_string()],
        ending: RunEnding {
            status: Some(status),
            timed_out,
            ..RunEnding::default()
        },
        wall: r.seconds,
        user: r.user_s,
        sys: r.sys_s,
        // The replay's memory is anonymous and private (the driver does not fork): its PSS and USS
        // are its RSS.
        memory: MemorySummary {
            samples: samples.len() as u64,
            rss: stats,
            anon: stats,
            pss: stats,
            uss: stats,
            max_processes: 1,
            distinct_processes: r.images.len() as u32,
            ..MemorySummary::default()
        },
        throughput: (r.calls_per_s > 0.0).then_some(r.calls_per_s),
        throughput_source: Some("replay".into()),
        allocator_check: allocator_check(r),
        ..RunRecord::default()
    }
}

/// Whether the allocator that served the replay is the variant's, by the agent's word (the library
/// that really serves malloc).
fn allocator_check(r: &VariantReplay) -> AllocatorCheck {
    let served = r
        .images
        .iter()
        .find_map(|i| i.allocator_stats.as_ref().map(|s| s.name.clone()));
    match served {
        _ if r.allocator == allocators::GLIBC => AllocatorCheck::NotApplicable,
        Some(s) if s == r.allocator => AllocatorCheck::Loaded,
        Some(s) if s == "unknown" => AllocatorCheck::Unverified,
        Some(_) => AllocatorCheck::NotLoaded,
        None => AllocatorCheck::Unverified,
    }
}
