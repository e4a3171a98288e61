//! `alloclens tune`: glue between the command line and the tune library (docs/tune.md).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::ProgressBar;
use runner::results_dir::ResultsDir;
use runner::{Observer, OutputStream, RunPlan, RunRecord, RunResults, RunSpec, SampleKind};
use tune::{
    build_space, parse_space_file, Candidate, Constraints, Objective, RunSink, SearchObserver,
    SearchOptions, SpaceSelection,
};

use crate::cmd::args;
use crate::cmd::run::ProgramOutput;

/// What tune optimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ObjectiveChoice {
    /// Time-weighted mean PSS of the command's whole process tree
    Memory,
    /// Peak PSS of the tree
    Peak,
    /// Wall time
    Time,
    /// The throughput read with --throughput (higher is better); a replay's calls per second when
    /// only a TRACE is given
    Throughput,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    alloclens tune -- ./server --bench\n  \
    alloclens tune --max-time-ratio 1.05 --budget 30m -o tuned -- ./reco events.root\n  \
    alloclens tune --objective time -a jemalloc,mimalloc,tcmalloc -- ./athena --threads 8\n  \
    alloclens tune --objective throughput --throughput 'ops: ([0-9.]+)' -- ./larson 5")]
pub struct Args {
    /// A trace of `alloclens record`: the space is screened by replaying it (`alloclens replay`,
    /// seconds per candidate) instead of running the program; with a COMMAND too, the best few of
    /// the screening are confirmed with real runs
    #[arg(value_name = "TRACE")]
    pub trace: Option<PathBuf>,
    /// What to optimise
    #[arg(long, value_enum, default_value_t = ObjectiveChoice::Memory, value_name = "OBJ")]
    pub objective: ObjectiveChoice,
    /// The search space: allocator names bring their default and a spread of their settings
    /// (docs/tune.md); a variant with settings or a library (`jemalloc:narenas=2`, `mine=/path.so`)
    /// is tried as it is. Default: every installed known allocator. glibc's default, the baseline,
    /// is always in
    #[arg(
        short,
        long,
        visible_alias = "allocator",
        value_name = "LIST",
        conflicts_with = "space"
    )]
    pub allocators: Option<String>,
    /// The search space, explicitly: one variant spec per line (the syntax of -a), `#` comments
    #[arg(long, value_name = "FILE")]
    pub space: Option<PathBuf>,
    /// Wall time the whole search may take (e.g. 90s, 10m, 1h); no run starts that is expected to
    /// end after it, and a run in progress is stopped at it
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub budget: String,
    /// A candidate with this many runs is settled and runs no more
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub max_runs: u32,
    /// Keep only candidates at most this much slower than the baseline (1.05: 5 % slower)
    #[arg(long, value_name = "RATIO")]
    pub max_time_ratio: Option<f64>,
    /// Keep only candidates whose mean PSS is at most this ratio of the baseline's
    #[arg(long, value_name = "RATIO")]
    pub max_memory_ratio: Option<f64>,
    /// Read the throughput from the first capture group of the last output line matching REGEX
    /// (needed by --objective throughput; as in `run`)
    #[arg(long, value_name = "REGEX")]
    pub throughput: Option<String>,
    /// Time between memory samples (e.g. 50ms, 100ms, 1s); before the first one, samples come 2, 4,
    /// 8 ... ms after the start, as in `run`
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub interval: String,
    /// Stop a run (its whole process tree) after this long: it counts as failed
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Results directory [default: alloclens-tune-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace the results of an earlier session in the output directory
    #[arg(long)]
    pub force: bool,
    /// What to do with the command's own output
    #[arg(long, value_enum, default_value_t = ProgramOutput::Discard)]
    pub program_output: ProgramOutput,
    /// Print the search's record (results.json `tune`) as JSON on stdout instead of the summary
    #[arg(long)]
    pub json: bool,
    /// The command to tune, after `--`; it reads /dev/null
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "trace")]
    pub command: Vec<String>,
}

const MAX_BUDGET: Duration = Duration::from_secs(30 * 86_400);

struct Options {
    /// Trace mode: the trace to replay.
    trace: Option<PathBuf>,
    /// None in trace mode without a command.
    plan: Option<RunPlan>,
    search: SearchOptions,
    candidates: Vec<Candidate>,
    notes: Vec<String>,
    output: PathBuf,
    force: bool,
    program_output: ProgramOutput,
}

fn options(a: Args) -> anyhow::Result<Options> {
    if let Some(trace) = &a.trace {
        if !trace.is_file() {
            bail!(
                "'{}' is not a trace file (record one with `alloclens record -o FILE -- CMD`)",
                trace.display()
            );
        }
    }
    let objective = match a.objective {
        ObjectiveChoice::Memory => Objective::Memory,
        ObjectiveChoice::Peak => Objective::Peak,
        ObjectiveChoice::Time => Objective::Time,
        ObjectiveChoice::Throughput => Objective::Throughput,
    };
    // A replay's throughput is its calls per second: only real runs need a regex to read one.
    if a.throughput.is_some() && a.command.is_empty() {
        bail!("--throughput reads the output of real runs, and a TRACE alone is only replayed (a replay's throughput is its calls per second): leave it out, or give the command after `--`");
    }
    if objective == Objective::Throughput && a.throughput.is_none() && !a.command.is_empty() {
        bail!("--objective throughput needs --throughput REGEX, the output line holding the figure (e.g. --throughput 'ops: ([0-9.]+)')");
    }
    let ratio = |value: Option<f64>, option: &str| -> anyhow::Result<Option<f64>> {
        match value {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                bail!("{option} must be a ratio above 0 (1.05: at most 5 % above the baseline), got {r}")
            }
            r => Ok(r),
        }
    };
    let constraints = Constraints {
        max_time_ratio: ratio(a.max_time_ratio, "--max-time-ratio")?,
        max_memory_ratio: ratio(a.max_memory_ratio, "--max-memory-ratio")?,
    };
    let budget = args::duration(&a.budget, "--budget", MAX_BUDGET)?;
    if budget < Duration::from_secs(1) {
        bail!("--budget must be at least 1s");
    }
    if a.max_runs < 2 {
        bail!("--max-runs must be at least 2 (a single run has no spread)");
    }
    let selection = match (&a.space, &a.allocators) {
        (Some(file), _) => SpaceSelection {
            allocators: Vec::new(),
            given: parse_space_file(file)?,
        },
        (None, list) => selection(list.as_deref())?,
    };
    let (candidates, notes) = build_space(&selection)?;
    let interval = args::duration(&a.interval, "--interval", Duration::from_secs(3600))?;
    if interval < Duration::from_millis(1) {
        bail!("--interval must be at least 1ms");
    }
    let plan = RunPlan {
        command: a.command,
        variants: Vec::new(),
        params: Vec::new(),
        env: Vec::new(),
        repeats: 1,
        warmup: 0,
        prepare: None,
        cleanup: None,
        interval,
        marker: None,
        throughput: args::optional_regex(a.throughput.as_deref(), "--throughput")?,
        timeout: a
            .timeout
            .as_deref()
            .map(|t| args::duration(t, "--timeout", MAX_BUDGET))
            .transpose()?,
        exact_pss: false,
        stdout_pty: false,
        pass_stdin: false,
        ksm_merge: None,
        ksm: false,
    };
    let plan = if plan.command.is_empty() {
        None
    } else {
        args::check_command_exists(&plan.command[0])?;
        Some(plan)
    };
    let mut search = SearchOptions::new(objective, constraints, budget);
    search.max_runs = a.max_runs as usize;
    Ok(Options {
        trace: a.trace,
        plan,
        search,
        candidates,
        notes,
        output: a
            .output
            .unwrap_or_else(|| args::dated_dir("alloclens-tune")),
        force: a.force,
        program_output: a.program_output,
    })
}

/// `-a LIST`: bare allocator names bring their spread; variants with settings or a library are
/// tried as they are.
fn selection(list: Option<&str>) -> anyhow::Result<SpaceSelection> {
    let Some(list) = list else {
        return Ok(SpaceSelection {
            allocators: args::installed_allocators(),
            given: Vec::new(),
        });
    };
    let mut out = SpaceSelection::default();
    for variant in args::variants(Some(list))? {
        let bare = variant.settings.is_empty()
            && variant.env.is_empty()
            && variant.label == variant.allocator
            && allocators::known_names()
                .split(", ")
                .any(|n| n == variant.allocator)
            && (variant.library.is_none() || variant.allocator != allocators::GLIBC);
        let custom_library = variant.library.is_some()
            && allocators::discover()
                .iter()
                .find(|a| a.name == variant.allocator)
                .is_none_or(|a| a.library.as_ref() != variant.library.as_ref());
        if bare && !custom_library {
            out.allocators.push(variant.allocator);
        } else {
            out.given.push(variant);
        }
    }
    Ok(out)
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    // The budget is the whole command's, reading the trace included.
    let started = std::time::Instant::now();
    let json = a.json;
    let options = options(a)?;
    let mut dir = ResultsDir::create(
        &options.output,
        options.force,
        &[],
        options.program_output == ProgramOutput::Save,
        false,
    )?;
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    let bar = progress_bar(options.search.budget);
    let request = tune::Request {
        trace: options.trace.clone(),
        plan: options.plan.clone(),
        search: options.search.clone(),
        candidates: options.candidates.clone(),
        started,
    };
    let mut files = FilesObserver {
        dir: &mut dir,
        mode: options.program_output,
        bar: bar.clone(),
        labels: Vec::new(),
    };
    let tuned = tune::tune(
        &request,
        &mut files,
        &mut Progress { bar: bar.clone() },
        interrupted,
    );
    bar.finish_and_clear();
    match tuned {
        Ok(tuned) => finish(dir, &options, &request, tuned, json),
        Err(e) => Err(give_up(dir, &options, e.into())),
    }
}

/// Nothing to compare: the directory holds only failed runs' samples, and goes.
fn give_up(dir: ResultsDir, _options: &Options, e: anyhow::Error) -> anyhow::Error {
    dir.discard();
    e
}

fn progress_bar(budget: Duration) -> ProgressBar {
    let bar = super::progress::counted(
        budget.as_secs().max(1),
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}s of the budget (ETA {eta})  {msg}",
        true,
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Writes results.json (every real run, the search in `tune`) and candidates.csv, prints the
/// summary.
fn finish(
    mut dir: ResultsDir,
    options: &Options,
    request: &tune::Request,
    tuned: tune::Tuned,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut warnings = options.notes.clone();
    warnings.extend(tuned.warnings.iter().cloned());
    let record = tuned.record(request, options.notes.clone());
    let trace = options
        .trace
        .as_ref()
        .map(|t| t.display().to_string())
        .unwrap_or_default();
    let outcome = tuned.outcome;
    let run_variants = tuned.run_variants;
    let mut variants: Vec<allocators::Variant> = outcome
        .candidates
        .iter()
        .map(|c| c.variant.clone())
        .collect();
    for v in run_variants {
        if !variants.iter().any(|x| x.label == v.label) {
            variants.push(v);
        }
    }
    let order: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    let baseline = outcome.candidates[0].variant.label.clone();
    let throughput = options.plan.as_ref().and_then(|p| p.throughput.as_ref());
    let ranking = if throughput.is_some() {
        runner::Ranking::Throughput
    } else {
        runner::Ranking::Wall
    };
    let summary = runner::summarize(&outcome.runs, &order, Some(&baseline), ranking);
    if outcome.interrupted {
        warnings.push(format!(
            "interrupted: {} evaluations done; the answer and the files keep what was gathered",
            outcome.trials.len()
        ));
    }
    let command = match &options.plan {
        Some(p) => p.command.clone(),
        None => vec!["alloclens".into(), "replay".into(), trace],
    };
    let mut results = RunResults {
        command,
        params: Vec::new(),
        repeats: 0,
        interval_s: options
            .plan
            .as_ref()
            .map_or(0.0, |p| p.interval.as_secs_f64()),
        marker: None,
        throughput: record.throughput.clone(),
        throughput_unit: None,
        warmup: 0,
        prepare: None,
        cleanup: None,
        baseline: Some(baseline),
        variants: runner::VariantInfo::of_variants(&variants),
        interrupted: outcome.interrupted,
        warnings: warnings.clone(),
        incomplete_files: Vec::new(),
        runs: outcome.runs.clone(),
        summary,
        ksm: None,
        ksm_savings: Vec::new(),
        tune: Some(record.clone()),
        ..RunResults::stamped()
    };
    dir.write_results(&mut results);
    let written = dir.results_written();
    let mut problems = dir.problems();
    let csv_path = options.output.join("candidates.csv");
    if let Err(e) = std::fs::File::create(&csv_path)
        .map_err(csv::Error::from)
        .and_then(|f| tune::record::write_csv(&record, std::io::BufWriter::new(f)))
    {
        problems.push(format!("cannot write '{}': {e}", csv_path.display()));
    }
    let printed = if json {
        serde_json::to_string_pretty(&record).map(|s| s + "\n")?
    } else {
        report::render_tune_summary(&record)
    };
    if let Err(err) = std::io::stdout().lock().write_all(printed.as_bytes()) {
        if err.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(err.into());
        }
    }
    for w in &warnings {
        eprintln!("alloclens: warning: {w}");
    }
    for p in &problems {
        eprintln!("alloclens: error: {p}");
    }
    if written {
        eprintln!(
            "alloclens: results in {} (`alloclens report {}` draws them)",
            options.output.display(),
            options.output.display()
        );
    }
    Ok(super::session_status(
        outcome.interrupted,
        !problems.is_empty(),
    ))
}

/// Writes every run's samples and (with --program-output save) output into the results directory.
struct FilesObserver<'a> {
    dir: &'a mut ResultsDir,
    mode: ProgramOutput,
    bar: ProgressBar,
    /// Variant labels by index of the evaluator's plan (as they were first run).
    labels: Vec<String>,
}

impl Observer for FilesObserver<'_> {
    fn run_started(&mut self, _spec: &RunSpec, _command: &[String]) {}

    fn output(&mut self, spec: &RunSpec, stream: OutputStream, line: &[u8]) {
        let _ = super::results_observer::program_output(
            self.dir, self.mode, &self.bar, spec, stream, line,
        );
    }

    fn sample(
        &mut self,
        spec: &RunSpec,
        t: Duration,
        kind: &SampleKind,
        label: Option<&str>,
        sample: &procmem::TreeSample,
    ) {
        let variant = self.labels.get(spec.variant).cloned().unwrap_or_default();
        self.dir
            .write_sample(spec, &variant, t.as_secs_f64(), kind, label, sample);
    }

    fn run_finished(&mut self, spec: &RunSpec, _record: &RunRecord) {
        self.dir.finish_run(spec.index);
    }
}

impl RunSink for FilesObserver<'_> {
    fn variant_added(&mut self, index: usize, variant: &allocators::Variant) {
        if self.labels.len() <= index {
            self.labels.resize(index + 1, String::new());
        }
        self.labels[index] = variant.label.clone();
    }
}

/// The progress bar: the budget's seconds, the candidate running, how many are left.
struct Progress {
    bar: ProgressBar,
}

impl SearchObserver for Progress {
    fn trial_started(&mut self, candidate: &Candidate, elapsed: Duration, alive: usize) {
        self.bar.set_position(elapsed.as_secs());
        self.bar.set_message(format!(
            "{} candidates left · {}",
            alive, candidate.variant.label
        ));
    }

    fn trial_finished(&mut self, trial: &tune::Trial) {
        self.bar.set_position((trial.at_s + trial.took_s) as u64);
    }
}
