//! `alloclens run`: compare allocators on any command, with the memory of its whole process tree.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use report::results_dir::{failure_warnings, marker_warnings};
use report::{ResultsDir, RunResults, VariantInfo};
use runner::{
    Execution, MarkerRecord, Observer, Param, RunPlan, RunRecord, RunSpec, SampleKind, Stream,
};

use crate::cmd::args;

/// What to do with the measured command's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgramOutput {
    /// Pass it through to alloclens's own stdout and stderr
    Pass,
    /// Save it per run under OUTPUT/output/run-N.log
    Save,
    /// Discard it
    Discard,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    alloclens run -a glibc,jemalloc,mimalloc -- ./my-program --input data\n  \
    alloclens run -a glibc,jemalloc:dirty_decay_ms=0 --marker 'event (\\d+)' -- ./reco\n  \
    alloclens run --param threads=1,2,4 -- ./server --threads {threads}")]
pub struct Args {
    /// Allocator variants, comma-separated: names (jemalloc), `name=/path/lib.so`, or a variant with
    /// settings (`jemalloc:dirty_decay_ms=0,background_thread=true`). Default: glibc and every installed
    /// known allocator. Syntax in docs/allocators.md
    #[arg(short, long, value_name = "LIST")]
    pub allocators: Option<String>,
    /// Sweep a parameter: substitutes {NAME} in the command and --env values (repeatable)
    #[arg(long = "param", value_name = "NAME=V1,V2,...")]
    pub params: Vec<String>,
    /// Extra environment variable for the command; {NAME} placeholders are substituted (repeatable)
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Runs per variant and parameter point, interleaved across variants
    #[arg(short, long, default_value_t = 3, value_name = "N")]
    pub repeat: u32,
    /// Time between memory samples (e.g. 100ms, 0.5s, 2s)
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub interval: String,
    /// Take a sample at each output line matching REGEX, labelled with its first capture group
    #[arg(long, value_name = "REGEX")]
    pub marker: Option<String>,
    /// Read the throughput from the first capture group of the last output line matching REGEX
    /// (default: markers per second)
    #[arg(long, value_name = "REGEX")]
    pub throughput: Option<String>,
    /// Stop a run (its whole process tree) after this long (e.g. 30s, 5m)
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Give the command a pseudo-terminal as stdout, so programs that buffer their output when it is a
    /// pipe (C stdio, Python) print each marker line when it happens
    #[arg(long)]
    pub pty: bool,
    /// Re-read PSS and USS at every sample (default: when the process's RSS or the tree changed, and at
    /// least every 10 samples; marker samples are always exact). Costs more CPU on large trees
    #[arg(long)]
    pub exact_pss: bool,
    /// The variant ratios are computed against
    #[arg(long, default_value = "glibc", value_name = "VARIANT")]
    pub baseline: String,
    /// Results directory [default: alloclens-run-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Write into the results directory even if it exists
    #[arg(long)]
    pub force: bool,
    /// What to do with the command's own output
    #[arg(long, value_enum, default_value_t = ProgramOutput::Pass)]
    pub program_output: ProgramOutput,
    /// Print the summary as JSON on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// The command to run, after `--`
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Typed options of one `run`, shared with `demo`.
pub struct RunOptions {
    pub plan: RunPlan,
    pub baseline: String,
    pub output: PathBuf,
    pub force: bool,
    pub program_output: ProgramOutput,
}

impl RunOptions {
    pub fn from_args(a: Args) -> anyhow::Result<RunOptions> {
        let variants = args::variants(a.allocators.as_deref())?;
        let params = a
            .params
            .iter()
            .map(|p| args::param(p))
            .collect::<anyhow::Result<Vec<Param>>>()?;
        let env = a
            .env
            .iter()
            .map(|e| args::env_pair(e))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if a.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let interval = args::duration(&a.interval).context("--interval")?;
        if interval < Duration::from_millis(1) {
            bail!("--interval must be at least 1ms");
        }
        let plan = RunPlan {
            command: a.command,
            variants,
            params,
            env,
            repeats: a.repeat,
            interval,
            marker: a
                .marker
                .as_deref()
                .map(|r| args::regex(r, "--marker"))
                .transpose()?,
            throughput: a
                .throughput
                .as_deref()
                .map(|r| args::regex(r, "--throughput"))
                .transpose()?,
            timeout: a
                .timeout
                .as_deref()
                .map(args::duration)
                .transpose()
                .context("--timeout")?,
            exact_pss: a.exact_pss,
            stdout_pty: a.pty,
        };
        // `{x}` may be literal text (a Python f-string, a shell brace): leave it, but say so.
        let unknown = plan.unknown_placeholders();
        if !unknown.is_empty() {
            eprintln!(
                "alloclens: note: {} in the command is not a --param and is left as is",
                unknown
                    .iter()
                    .map(|u| format!("{{{u}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        args::check_command_exists(&plan.command[0])?;
        Ok(RunOptions {
            plan,
            baseline: a.baseline,
            output: a.output.unwrap_or_else(|| args::dated_dir("alloclens-run")),
            force: a.force,
            program_output: a.program_output,
        })
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let json = a.json;
    let options = RunOptions::from_args(a)?;
    let outcome = execute(&options, true)?;
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, &outcome.summary)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", outcome.table)?;
    }
    drop(stdout);
    for w in &outcome.warnings {
        eprintln!("alloclens: warning: {w}");
    }
    eprintln!("alloclens: results in {}", outcome.dir.display());
    Ok(outcome.exit_code())
}

pub struct Outcome {
    pub execution: Execution,
    pub summary: Vec<runner::Group>,
    pub table: String,
    pub warnings: Vec<String>,
    pub dir: PathBuf,
}

impl Outcome {
    pub fn exit_code(&self) -> ExitCode {
        if self.execution.interrupted {
            ExitCode::from(130)
        } else if self.execution.runs.iter().any(|r| !r.ending.ok()) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// Runs the plan with a progress bar, writes the results directory, and renders the summary.
pub fn execute(options: &RunOptions, progress: bool) -> anyhow::Result<Outcome> {
    let plan = &options.plan;
    let mut dir = ResultsDir::create(
        &options.output,
        options.force,
        &plan.params,
        options.program_output == ProgramOutput::Save,
    )?;
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    let total = plan.schedule().len() as u64;
    let bar = if progress {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}",
        )
        .expect("static template"),
    );
    let mut observer = CliObserver {
        bar: bar.clone(),
        dir: &mut dir,
        plan,
        mode: options.program_output,
        error: None,
    };
    let execution = runner::execute(plan, &mut observer, &interrupted);
    bar.finish_and_clear();
    if let Some(err) = observer.error.take() {
        return Err(err.into());
    }
    let labels: Vec<String> = plan.variants.iter().map(|v| v.label.clone()).collect();
    let summary = runner::summarize(&execution.runs, &labels, Some(&options.baseline));
    let mut warnings = failure_warnings(&execution);
    warnings.extend(verification_warnings(&execution.runs));
    warnings.extend(marker_warnings(&execution));
    if execution.interrupted {
        warnings.push(format!(
            "interrupted: {} of {} runs done; results keep what was gathered",
            execution.runs.len(),
            total
        ));
    }
    let results = RunResults {
        schema_version: report::RESULTS_SCHEMA_VERSION,
        tool: "alloclens",
        tool_version: env!("CARGO_PKG_VERSION"),
        created: chrono::Local::now().to_rfc3339(),
        host: report::HostInfo::current(),
        command: &plan.command,
        params: &plan.params,
        repeats: plan.repeats,
        interval_s: plan.interval.as_secs_f64(),
        marker: plan.marker.as_ref().map(|r| r.as_str().to_string()),
        throughput: plan.throughput.as_ref().map(|r| r.as_str().to_string()),
        baseline: Some(options.baseline.clone()),
        variants: plan.variants.iter().map(variant_info).collect(),
        interrupted: execution.interrupted,
        warnings: warnings.clone(),
        runs: &execution.runs,
        summary: &summary,
    };
    dir.write_results(&results)?;
    let names: Vec<String> = plan.params.iter().map(|p| p.name.clone()).collect();
    let mut table = report::render_run_table(&summary, &names);
    if let Some(markers) = report::render_marker_table(&execution.runs, &labels) {
        table.push_str(&markers);
    }
    Ok(Outcome {
        execution,
        summary,
        table,
        warnings,
        dir: options.output.clone(),
    })
}

fn variant_info(v: &allocators::Variant) -> VariantInfo {
    let version = allocators::discover()
        .into_iter()
        .find(|a| a.name == v.allocator)
        .and_then(|a| a.version);
    VariantInfo {
        label: v.label.clone(),
        allocator: v.allocator.clone(),
        library: v.library.clone(),
        version,
        settings: v.settings.clone(),
        env: v.env.clone(),
    }
}

fn verification_warnings(runs: &[RunRecord]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        let w = match r.allocator_check {
            runner::AllocatorCheck::NotLoaded => format!(
                "variant `{}`: its library was NOT mapped in the command (static binary, setuid program, or LD_PRELOAD reset?): its figures are not {}'s",
                r.variant, r.allocator
            ),
            _ if !r.other_allocators.is_empty() => format!(
                "variant `{}`: other allocator libraries are mapped too ({})",
                r.variant,
                r.other_allocators.join(", ")
            ),
            _ => continue,
        };
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

struct CliObserver<'a> {
    bar: ProgressBar,
    dir: &'a mut ResultsDir,
    plan: &'a RunPlan,
    mode: ProgramOutput,
    error: Option<report::ResultsDirError>,
}

impl CliObserver<'_> {
    fn keep(&mut self, r: Result<(), report::ResultsDirError>) {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }

    fn label(&self, spec: &RunSpec) -> &str {
        &self.plan.variants[spec.variant].label
    }
}

impl Observer for CliObserver<'_> {
    fn run_started(&mut self, spec: &RunSpec, _command: &[String]) {
        let point: Vec<String> = spec
            .assignment
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.bar.set_message(format!(
            "{} {} (repeat {})",
            self.label(spec),
            point.join(" "),
            spec.repeat + 1
        ));
    }

    fn output(&mut self, spec: &RunSpec, stream: Stream, line: &[u8]) {
        match self.mode {
            ProgramOutput::Pass => self.bar.suspend(|| {
                let _ = match stream {
                    Stream::Stdout => std::io::stdout().write_all(line),
                    Stream::Stderr => std::io::stderr().write_all(line),
                };
            }),
            ProgramOutput::Save => {
                let r = self.dir.write_output(spec, line);
                self.keep(r);
            }
            ProgramOutput::Discard => {}
        }
    }

    fn sample(
        &mut self,
        spec: &RunSpec,
        t: Duration,
        kind: &SampleKind,
        label: Option<&str>,
        sample: &procmem::TreeSample,
    ) {
        let variant = self.plan.variants[spec.variant].label.clone();
        let r = self
            .dir
            .write_sample(spec, &variant, t.as_secs_f64(), kind, label, sample);
        self.keep(r);
    }

    fn marker(&mut self, spec: &RunSpec, marker: &MarkerRecord) {
        let variant = self.plan.variants[spec.variant].label.clone();
        let r = self.dir.write_marker(spec, &variant, marker);
        self.keep(r);
    }

    fn run_finished(&mut self, _spec: &RunSpec, _record: &RunRecord) {
        let r = self.dir.flush();
        self.keep(r);
        self.bar.inc(1);
    }
}
