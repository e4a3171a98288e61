//! `alloclens run`: compare allocators on any command, with the memory of its whole process tree.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::ProgressBar;
use procmem::ksm_control::KsmControl;
use runner::results_dir::{self, ResultsDir};
use runner::{
    Execution, MarkerRecord, Observer, OutputStream, Param, RunPlan, RunRecord, RunResults,
    RunSpec, SampleKind, VariantInfo,
};

use crate::cmd::args;
use safe_output::write_whole;

/// How `run --ksm` makes the command's tree mergeable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KsmMechanismChoice {
    /// prctl when the kernel has it and keeps it across exec (Linux >= 6.6), else madvise
    Auto,
    /// prctl(PR_SET_MEMORY_MERGE) before exec: all anonymous memory, inherited by fork and kept
    /// across exec (Linux >= 6.6; 6.4 and 6.5 clear it at exec)
    Prctl,
    /// A preloaded library marks the anonymous private writable mappings MADV_MERGEABLE, rescanning
    /// them every 100 ms (any kernel with KSM; programs that clear LD_PRELOAD are left out)
    Madvise,
}

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
    #[arg(short, long, visible_alias = "allocator", value_name = "LIST")]
    pub allocators: Option<String>,
    /// Sweep a parameter: substitutes {NAME} in the command and --env values (repeatable, once per
    /// NAME)
    #[arg(long = "param", value_name = "NAME=V1,V2,...")]
    pub params: Vec<String>,
    /// Extra environment variable for the command; {NAME} placeholders are substituted (repeatable)
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Runs per variant and parameter point, interleaved across variants
    #[arg(
        short,
        long,
        visible_alias = "runs",
        default_value_t = 3,
        value_name = "N"
    )]
    pub repeat: u32,
    /// Unmeasured runs of each variant at each point before its first measured one (fills the page
    /// cache and the loader's caches)
    #[arg(short, long, default_value_t = 0, value_name = "N")]
    pub warmup: u32,
    /// Shell command run before every run, warmups included (e.g. to drop caches); {NAME}
    /// placeholders are substituted. When it fails or outlasts --timeout, the run is not made and
    /// counts as failed; Ctrl-C or SIGTERM stops it as it stops a run
    #[arg(short, long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Shell command run after the last run of each variant at each parameter point; a failure is
    /// a warning
    #[arg(short, long, value_name = "CMD")]
    pub cleanup: Option<String>,
    /// Time between memory samples (e.g. 100ms, 0.5s, 2s; at most 1h). Before the first one, samples
    /// come 2, 4, 8 ... ms after the start, so a shorter command is seen running
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub interval: String,
    /// Take a sample at each output line matching REGEX, labelled with its first capture group
    #[arg(long, value_name = "REGEX")]
    pub marker: Option<String>,
    /// Read the throughput from the first capture group of the last output line matching REGEX
    /// (default: markers per second). A REGEX without a capture group is refused; runs where it
    /// matched no line have no throughput (a warning says so), and the summary is ranked by
    /// throughput only when some run has one
    #[arg(long, value_name = "REGEX")]
    pub throughput: Option<String>,
    /// The unit of --throughput's figure, shown in the table and exports (e.g. "ops/s",
    /// "requests/s") [default: "/s"]
    #[arg(long, value_name = "UNIT", requires = "throughput")]
    pub throughput_unit: Option<String>,
    /// Stop a run (its whole process tree) after this long (e.g. 30s, 5m, 2h, 1d; at most 365d);
    /// --prepare and --cleanup commands are stopped after it too
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Give the command a pseudo-terminal as stdout, so programs that buffer their output when it is a
    /// pipe (C stdio, Python) print each marker line when it happens. Its output is kept byte for byte
    /// (no "\n" to "\r\n" translation)
    #[arg(long)]
    pub pty: bool,
    /// Re-read PSS and USS at every sample (default: when the process's RSS or the tree changed, and at
    /// least every 10 samples; marker samples are always exact). Costs more CPU on large trees
    #[arg(long)]
    pub exact_pss: bool,
    /// The variant ratios are computed against: one of -a's labels [default: glibc, or the first
    /// variant when glibc is not among them]
    #[arg(long, visible_alias = "reference", value_name = "VARIANT")]
    pub baseline: Option<String>,
    /// Results directory [default: alloclens-run-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace the results of an earlier session in the output directory: its files are removed first.
    /// A directory holding files alloclens did not write is refused
    #[arg(long)]
    pub force: bool,
    /// What to do with the command's own output
    #[arg(long, value_enum, default_value_t = ProgramOutput::Pass)]
    pub program_output: ProgramOutput,
    /// Print the summary as JSON on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// Also write the summary table as Markdown to FILE (the results directory is written as usual;
    /// with --ksm, the PSS saved table too). Each --export-* path is checked before the runs: not a
    /// directory, in a folder that exists and can be written, not one of the results directory's own
    /// files, not another export's
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Also write the summary as JSON to FILE (results.json's `summary`; with --ksm, an object of
    /// `summary` and `ksm_savings`)
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write the summary as CSV to FILE (one row per point and variant, raw numbers; with
    /// --ksm, the ksm=on rows hold the PSS saved in ksm_* columns)
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Kernel samepage merging: make the command's whole tree mergeable (prctl PR_SET_MEMORY_MERGE on
    /// Linux >= 6.6, else a preloaded library: --ksm-mechanism) and run ksmd for the session; every KSM setting is given back afterwards. Needs
    /// root. See docs/ksm.md
    #[arg(long)]
    pub ksm: bool,
    /// A ksmd setting for the session (with --ksm; repeatable): pages_to_scan, sleep_millisecs,
    /// max_page_sharing, merge_across_nodes, use_zero_pages, smart_scan, advisor_mode, ... A
    /// {NAME} placeholder sweeps it with --param NAME=V1,V2 (set before each run); one that is no
    /// --param is refused
    #[arg(long = "ksm-set", value_name = "KNOB=VALUE", requires = "ksm")]
    pub ksm_set: Vec<String>,
    /// With --ksm: how the command's tree is made mergeable (the output says which was used)
    #[arg(long = "ksm-mechanism", value_enum, default_value_t = KsmMechanismChoice::Auto, value_name = "HOW", requires = "ksm")]
    pub ksm_mechanism: KsmMechanismChoice,
    /// With --ksm: when another alloclens drives ksmd (one at a time on a machine), wait for it to
    /// end, up to DURATION (default 10m), instead of stopping at once
    #[arg(long = "ksm-wait", value_name = "DURATION", num_args = 0..=1, default_missing_value = "10m", require_equals = true, requires = "ksm")]
    pub ksm_wait: Option<String>,
    /// The command to run, after `--`. Its stdin is alloclens's own when there is one run (one
    /// variant, one parameter point, --repeat 1) and stdin is not a terminal; otherwise /dev/null
    /// (every run gets the same input: give it inside the command, e.g. sh -c 'prog < input')
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Longer sampling intervals measure nothing useful; the bound keeps the tick arithmetic safe.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 86_400);

/// Typed options of one `run`, shared with `demo`.
pub struct RunOptions {
    pub plan: RunPlan,
    pub baseline: String,
    pub output: PathBuf,
    pub force: bool,
    pub program_output: ProgramOutput,
    /// With --ksm: the ksmd settings to apply for the session (`run=1` is added).
    pub ksm: Option<Vec<(String, String)>>,
    /// With --ksm: how long to wait for another alloclens to give ksmd back (zero: refuse at once).
    pub ksm_wait: Duration,
    /// --throughput-unit.
    pub throughput_unit: Option<String>,
    /// --export-*: the summary table written in each format to each file.
    pub exports: Vec<(report::SummaryFormat, PathBuf)>,
}

impl RunOptions {
    /// The typed options of `alloclens run`: each value checked in the order of the options, with
    /// a message naming the option; then a note on `{x}` left as is, and the command looked up.
    pub fn from_args(a: Args) -> anyhow::Result<RunOptions> {
        let variants = args::variants(a.allocators.as_deref())?;
        let params = a.params.iter().map(|p| args::param(p));
        let mut params = params.collect::<anyhow::Result<Vec<Param>>>()?;
        args::distinct_params(&params)?;
        if a.ksm {
            if params.iter().any(|p| p.name == runner::KSM_PARAM) {
                bail!("--param {}: the name is taken by --ksm (it runs each point with KSM off and on): rename it", runner::KSM_PARAM);
            }
            // Last, so each point runs with KSM off then on, side by side.
            params.push(Param {
                name: runner::KSM_PARAM.into(),
                values: vec!["off".into(), "on".into()],
            });
        }
        let baseline = args::baseline(a.baseline, &variants)?;
        let plan = RunPlan {
            command: a.command,
            variants,
            params,
            env: a
                .env
                .iter()
                .map(|e| args::env_pair(e))
                .collect::<anyhow::Result<_>>()?,
            repeats: match a.repeat {
                0 => bail!("--repeat must be at least 1"),
                n => n,
            },
            warmup: a.warmup,
            prepare: nonempty(a.prepare, "--prepare")?,
            cleanup: nonempty(a.cleanup, "--cleanup")?,
            interval: interval(&a.interval)?,
            marker: args::optional_regex(a.marker.as_deref(), "--marker")?,
            throughput: throughput_regex(a.throughput.as_deref())?,
            timeout: a
                .timeout
                .as_deref()
                .map(|t| args::duration(t, "--timeout", MAX_TIMEOUT))
                .transpose()?,
            exact_pss: a.exact_pss,
            stdout_pty: a.pty,
            pass_stdin: false,
            ksm_merge: None,
            ksm: a.ksm,
        };
        let plan = RunPlan {
            pass_stdin: plan.schedule().len() == 1 && args::stdin_is_input(),
            ..plan
        };
        note_unknown_placeholders(&plan);
        args::check_command_exists(&plan.command[0])?;
        let plan = RunPlan {
            ksm_merge: a.ksm.then(|| ksm_mechanism(a.ksm_mechanism)).transpose()?,
            ..plan
        };
        let ksm = match a.ksm {
            true => Some(
                a.ksm_set
                    .iter()
                    .map(|s| ksm_setting(s, &plan.params))
                    .collect::<anyhow::Result<_>>()?,
            ),
            false => None,
        };
        let output = a.output.unwrap_or_else(|| args::dated_dir("alloclens-run"));
        let exports: Vec<(report::SummaryFormat, PathBuf)> = [
            (report::SummaryFormat::Markdown, a.export_markdown),
            (report::SummaryFormat::Json, a.export_json),
            (report::SummaryFormat::Csv, a.export_csv),
        ]
        .into_iter()
        .filter_map(|(f, p)| p.map(|p| (f, p)))
        .collect();
        let named: Vec<results_dir::Export> = exports
            .iter()
            .map(|(format, path)| {
                let (option, example) = export_option(*format);
                results_dir::Export {
                    option,
                    example,
                    path: path.clone(),
                }
            })
            .collect();
        results_dir::check_exports(&output, &named)?;
        Ok(RunOptions {
            plan,
            baseline,
            output,
            force: a.force,
            program_output: a.program_output,
            ksm,
            ksm_wait: a
                .ksm_wait
                .map(|w| args::duration(&w, "--ksm-wait", MAX_TIMEOUT))
                .transpose()?
                .unwrap_or(Duration::ZERO),
            throughput_unit: nonempty(a.throughput_unit, "--throughput-unit")?,
            exports,
        })
    }
}

/// The option that names an export format, and a file name for it.
fn export_option(format: report::SummaryFormat) -> (&'static str, &'static str) {
    match format {
        report::SummaryFormat::Markdown => ("--export-markdown", "summary.md"),
        report::SummaryFormat::Json => ("--export-json", "summary.json"),
        report::SummaryFormat::Csv => ("--export-csv", "summary.csv"),
    }
}

/// --throughput: the figure is the first capture group, so a regex without one could never give one.
fn throughput_regex(text: Option<&str>) -> anyhow::Result<Option<regex::Regex>> {
    let re = args::optional_regex(text, "--throughput")?;
    if let Some(re) = &re {
        if re.captures_len() < 2 {
            bail!(
                "--throughput '{}' has no capture group: put the number in parentheses, e.g. '{} ([0-9.]+)'",
                re.as_str(),
                re.as_str()
            );
        }
    }
    Ok(re)
}

/// An option's text, refused when blank (an empty --prepare would run nothing, silently).
fn nonempty(text: Option<String>, option: &str) -> anyhow::Result<Option<String>> {
    match text {
        Some(t) if t.trim().is_empty() => bail!("{option} needs a value, got an empty one"),
        t => Ok(t),
    }
}

/// One `--ksm-set KNOB=VALUE`; each `{NAME}` of VALUE must be a `--param` (a ksmd value never has
/// braces of its own, and the kernel's "invalid value" would not say which name is wrong).
fn ksm_setting(text: &str, params: &[Param]) -> anyhow::Result<(String, String)> {
    let (k, v) = match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() && !v.contains(char::is_whitespace) => {
            (k, v)
        }
        _ => bail!("--ksm-set expects KNOB=VALUE (e.g. pages_to_scan=1000), got `{text}`"),
    };
    let swept: Vec<String> = params
        .iter()
        .filter(|p| p.name != runner::KSM_PARAM)
        .map(|p| format!("{{{}}}", p.name))
        .collect();
    let placeholder = regex::Regex::new(r"\{[^{}]*\}").expect("static regex");
    for m in placeholder.find_iter(v) {
        let name = &m.as_str()[1..m.len() - 1];
        if !params
            .iter()
            .any(|p| p.name == name && p.name != runner::KSM_PARAM)
        {
            let known = if swept.is_empty() {
                "there is none: sweep one with --param NAME=V1,V2".to_string()
            } else {
                format!("the --param placeholders are {}", swept.join(", "))
            };
            bail!(
                "--ksm-set {text}: {} is not a --param ({known})",
                m.as_str()
            );
        }
    }
    Ok((k.to_string(), v.to_string()))
}

/// How the tree will be made mergeable, checked before anything changes: the prctl is probed on
/// alloclens itself (PR_GET_MEMORY_MERGE fails with EINVAL before Linux 6.4), then across an exec.
fn ksm_mechanism(choice: KsmMechanismChoice) -> anyhow::Result<runner::KsmMechanism> {
    use procmem::ksm_control::KSM_SYSFS;
    if !std::path::Path::new(KSM_SYSFS).join("run").exists() {
        bail!("--ksm: this kernel has no KSM ({KSM_SYSFS} does not exist): use a kernel built with CONFIG_KSM=y");
    }
    // SAFETY: PR_GET_MEMORY_MERGE only reads a flag of this process.
    let has_prctl = unsafe { libc::prctl(libc::PR_GET_MEMORY_MERGE, 0, 0, 0, 0) } >= 0;
    let madvise = || -> anyhow::Result<runner::KsmMechanism> {
        let library = super::ksm_library::path()
            .context("--ksm-mechanism madvise: cannot install the KSM preload library")?;
        Ok(runner::KsmMechanism::Madvise { library })
    };
    // Linux 6.4 and 6.5 have the prctl but clear it at exec: the command would not be mergeable.
    let prctl_works = has_prctl && runner::prctl_merge_kept_across_exec();
    match choice {
        KsmMechanismChoice::Prctl if !has_prctl => bail!(
            "--ksm-mechanism prctl: this kernel has no prctl PR_SET_MEMORY_MERGE (Linux >= 6.4, running {}): use --ksm-mechanism madvise (or auto)",
            kernel_release()
        ),
        KsmMechanismChoice::Prctl if !prctl_works => bail!(
            "--ksm-mechanism prctl: this kernel clears PR_SET_MEMORY_MERGE at exec (Linux 6.4 and 6.5; kept from 6.6), running {}: use --ksm-mechanism madvise (or auto)",
            kernel_release()
        ),
        KsmMechanismChoice::Prctl => Ok(runner::KsmMechanism::Prctl),
        KsmMechanismChoice::Auto if prctl_works => Ok(runner::KsmMechanism::Prctl),
        KsmMechanismChoice::Auto | KsmMechanismChoice::Madvise => madvise(),
    }
}

/// Takes ksmd for the session (the mechanism was checked by [`ksm_mechanism`]).
fn start_ksm(
    plan: &RunPlan,
    settings: &[(String, String)],
    wait: Duration,
    interrupted: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<KsmControl> {
    use procmem::ksm_control::{default_state_path, KSM_SYSFS};
    let sysfs = std::path::Path::new(KSM_SYSFS);
    let schedule = plan.schedule();
    let first = schedule
        .first()
        .map(|s| s.assignment.clone())
        .unwrap_or_default();
    let initial: Vec<(String, String)> = settings
        .iter()
        .map(|(k, v)| (k.clone(), runner::substitute(v, &first)))
        .collect();
    // Every value a sweep will use is tried at the start, so a value the kernel rejects is
    // refused before any run.
    let every_value: Vec<(String, String)> = schedule
        .iter()
        .flat_map(|spec| ksm_settings_for(settings, spec))
        .collect();
    let mut told = false;
    let control = KsmControl::start_session(
        sysfs,
        &default_state_path(),
        &initial,
        &every_value,
        wait,
        |busy| {
            if let (false, procmem::ksm_control::KsmError::Busy { holder, .. }) = (told, busy) {
                eprintln!(
                    "alloclens: KSM: another alloclens{holder} is driving ksmd: waiting for it to end (--ksm-wait, up to {} s)",
                    wait.as_secs()
                );
                told = true;
            }
            !interrupted.load(std::sync::atomic::Ordering::Relaxed)
        },
    )?;
    for (k, v) in control.recovered() {
        eprintln!("alloclens: note: gave back KSM setting {k}={v} left by a killed alloclens");
    }
    let applied: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let how = match &plan.ksm_merge {
        Some(runner::KsmMechanism::Madvise { .. }) => {
            "madvise(MADV_MERGEABLE) from a preloaded library"
        }
        _ => "prctl(PR_SET_MEMORY_MERGE)",
    };
    eprintln!(
        "alloclens: KSM: the command's tree is made mergeable with {how} in the ksm=on runs; ksmd run=1{}{} (restored at the end)",
        if applied.is_empty() { "" } else { " " },
        applied.join(" ")
    );
    Ok(control)
}

/// The --ksm-set values of run `spec`, its placeholders substituted.
fn ksm_settings_for(settings: &[(String, String)], spec: &RunSpec) -> Vec<(String, String)> {
    settings
        .iter()
        .map(|(k, v)| (k.clone(), runner::substitute(v, &spec.assignment)))
        .collect()
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "an unknown kernel".into())
}

fn interval(text: &str) -> anyhow::Result<Duration> {
    let interval = args::duration(text, "--interval", MAX_INTERVAL)?;
    if interval < Duration::from_millis(1) {
        bail!("--interval must be at least 1ms");
    }
    Ok(interval)
}

/// `{x}` may be literal text (a Python f-string, a shell brace): it is left, but said so.
fn note_unknown_placeholders(plan: &RunPlan) {
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
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let json = a.json;
    let options = RunOptions::from_args(a)?;
    let runs = options.plan.schedule().len();
    if runs > 1 && args::stdin_is_input() {
        eprintln!(
            "alloclens: warning: stdin is not passed on: each of the {runs} runs reads /dev/null (give the input inside the command: sh -c 'prog < file')"
        );
    }
    let outcome = execute(&options, true)?;
    if outcome.open_lines[1] {
        eprintln!();
    }
    // A reader that went away (`| head`) has what it wanted: the warnings, the results' place and
    // the runs' status below still count. Another failure (a full disk) is an error, said before
    // them: the table is lost, the results directory has it all.
    let mut lost_table = false;
    if let Err(err) = print_summary(&outcome, json) {
        if err.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("alloclens: error: {err}");
            lost_table = true;
        }
    }
    for w in &outcome.warnings {
        eprintln!("alloclens: warning: {w}");
    }
    for p in &outcome.write_problems {
        eprintln!("alloclens: error: {p}");
    }
    eprintln!("alloclens: results in {}", outcome.dir.display());
    match outcome.exit_code() {
        code if lost_table && code == ExitCode::SUCCESS => Ok(ExitCode::FAILURE),
        code => Ok(code),
    }
}

/// The table, or the summary as JSON, on stdout.
fn print_summary(outcome: &Outcome, json: bool) -> std::io::Result<()> {
    let mut stdout = super::stdout();
    // The command's last line may lack its newline: ours start on a line of their own.
    if outcome.open_lines[0] {
        writeln!(stdout)?;
    }
    if json {
        serde_json::to_writer_pretty(&mut stdout, &outcome.summary)?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", outcome.table)?;
    }
    stdout.flush()
}

pub struct Outcome {
    pub execution: Execution,
    pub summary: Vec<runner::Group>,
    pub table: String,
    pub warnings: Vec<String>,
    /// One line per results file that misses something (a full disk): the measurements are all in
    /// `execution` and the table, the files hold what fitted.
    pub write_problems: Vec<String>,
    pub dir: PathBuf,
    /// Whether the command's passed-through stdout and stderr end in the middle of a line.
    pub open_lines: [bool; 2],
}

impl Outcome {
    pub fn exit_code(&self) -> ExitCode {
        super::session_status(
            self.execution.interrupted,
            !self.write_problems.is_empty() || self.execution.runs.iter().any(|r| !r.ending.ok()),
        )
    }
}

/// Runs the plan with a progress bar, writes the results directory, and renders the summary.
pub fn execute(options: &RunOptions, progress: bool) -> anyhow::Result<Outcome> {
    let plan = &options.plan;
    // Before ksmd is touched: a refused output directory must change nothing on the machine.
    ResultsDir::check(&options.output, options.force)?;
    // Before ksmd is driven: a Ctrl-C from here on raises the flag (the runs stop, and the KSM
    // settings are given back when `ksm` drops) instead of killing alloclens with them changed.
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    // First, so a refusal changes nothing (no results directory either); given back when it drops,
    // whatever way this function ends.
    let ksm = options
        .ksm
        .as_deref()
        .map(|settings| start_ksm(plan, settings, options.ksm_wait, &interrupted))
        .transpose()?;
    let mut dir = ResultsDir::create(
        &options.output,
        options.force,
        &plan.params,
        options.program_output == ProgramOutput::Save,
        plan.ksm,
    )?;
    let total = plan.schedule().len() as u64;
    let bar = super::progress::counted(
        total,
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs (ETA {eta})  {msg}",
        progress,
    );
    let mut observer = CliObserver {
        bar: bar.clone(),
        dir: &mut dir,
        plan,
        mode: options.program_output,
        open_lines: [false; 2],
        ksm: ksm.as_ref().zip(options.ksm.as_deref()),
        ksm_problems: Vec::new(),
    };
    let mut execution = runner::execute(plan, &mut observer, &interrupted);
    bar.finish_and_clear();
    let open_lines = observer.open_lines;
    let ksm_problems = std::mem::take(&mut observer.ksm_problems);
    let ksm_session = ksm.as_ref().map(|k| runner::KsmSession {
        mechanism: plan.ksm_merge.as_ref().map_or("", |m| m.name()).to_string(),
        settings: options.ksm.clone().unwrap_or_default(),
        previous: k.saved().to_vec(),
    });
    let ksm_restore = ksm.map(|k| k.restore());
    let labels: Vec<String> = plan.variants.iter().map(|v| v.label.clone()).collect();
    let names: Vec<String> = plan.params.iter().map(|p| p.name.clone()).collect();
    // Ranked by throughput only when there is one to rank by.
    let ranking =
        if plan.throughput.is_some() && execution.runs.iter().any(|r| r.throughput.is_some()) {
            runner::Ranking::Throughput
        } else {
            runner::Ranking::Wall
        };
    let summary = runner::summarize(&execution.runs, &labels, Some(&options.baseline), ranking);
    let warnings = runner::run_warnings(
        plan,
        &execution,
        &summary,
        total,
        ksm_problems,
        ksm_restore.as_ref(),
    );
    let mut results = RunResults {
        command: plan.command.clone(),
        params: plan.params.clone(),
        repeats: plan.repeats,
        interval_s: plan.interval.as_secs_f64(),
        marker: plan.marker.as_ref().map(|r| r.as_str().to_string()),
        throughput: plan.throughput.as_ref().map(|r| r.as_str().to_string()),
        throughput_unit: options.throughput_unit.clone(),
        warmup: plan.warmup,
        prepare: plan.prepare.clone(),
        cleanup: plan.cleanup.clone(),
        baseline: Some(options.baseline.clone()),
        variants: VariantInfo::of_variants(&plan.variants),
        interrupted: execution.interrupted,
        warnings: warnings.clone(),
        incomplete_files: Vec::new(),
        // Lent, not copied: a run may hold many marker records.
        ksm: ksm_session,
        ksm_savings: runner::ksm_savings(&execution.runs),
        runs: std::mem::take(&mut execution.runs),
        summary: summary.clone(),
        tune: None,
        ..RunResults::stamped()
    };
    dir.write_results(&mut results);
    execution.runs = results.runs;
    let mut write_problems = dir.problems();
    write_problems.extend(write_exports(
        options,
        &summary,
        &names,
        &results.ksm_savings,
    ));
    let mut table = report::render_run_table(&summary, &names, options.throughput_unit.as_deref());
    if let Some(markers) = report::render_marker_table(&execution.runs, &labels) {
        table.push_str(&markers);
    }
    table.push_str(&report::render_ksm_table(
        &results.ksm_savings,
        &names,
        results.ksm.as_ref().map(|k| k.mechanism.as_str()),
    ));
    Ok(Outcome {
        execution,
        summary,
        table,
        warnings,
        write_problems,
        dir: options.output.clone(),
        open_lines,
    })
}

/// --export-*: each file written in its format; one line per file that could not be.
fn write_exports(
    options: &RunOptions,
    summary: &[runner::Group],
    names: &[String],
    ksm_savings: &[runner::KsmSaving],
) -> Vec<String> {
    let context = report::SummaryContext {
        param_names: names,
        throughput_unit: options.throughput_unit.as_deref(),
        ksm_savings,
    };
    let mut problems = Vec::new();
    for (format, path) in &options.exports {
        let written = write_whole(path, |out| {
            report::export_summary(*format, summary, &context, out)
        });
        if let Err(e) = written {
            problems.push(format!(
                "cannot write the summary to '{}': {e} (the results directory has it all)",
                path.display()
            ));
        }
    }
    problems
}

struct CliObserver<'a> {
    bar: ProgressBar,
    dir: &'a mut ResultsDir,
    plan: &'a RunPlan,
    mode: ProgramOutput,
    /// Pass mode: whether the last bytes passed to stdout and stderr ended without a newline.
    open_lines: [bool; 2],
    /// With --ksm: ksmd and the --ksm-set settings, set before each run (they may be swept).
    ksm: Option<(&'a KsmControl, &'a [(String, String)])>,
    /// Settings that could not be set before a run (its figures are then not the setting's).
    ksm_problems: Vec<String>,
}

impl CliObserver<'_> {
    fn label(&self, spec: &RunSpec) -> &str {
        &self.plan.variants[spec.variant].label
    }
}

impl Observer for CliObserver<'_> {
    fn warmup_started(&mut self, spec: &RunSpec, n: u32) {
        self.bar.set_message(format!(
            "{} (warmup {n} of {})",
            self.label(spec),
            self.plan.warmup
        ));
    }

    fn run_started(&mut self, spec: &RunSpec, _command: &[String]) {
        if let Some((control, settings)) = self.ksm {
            for (k, v) in ksm_settings_for(settings, spec) {
                if let Err(e) = control.set(&k, &v) {
                    self.ksm_problems.push(format!(
                        "run {}: KSM setting {k}={v} not applied: {e}",
                        spec.index
                    ));
                }
            }
        }
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

    fn output(&mut self, spec: &RunSpec, stream: OutputStream, line: &[u8]) {
        let passed = super::results_observer::program_output(
            self.dir, self.mode, &self.bar, spec, stream, line,
        );
        if let Some(open) = passed {
            match stream {
                OutputStream::Stdout => self.open_lines[0] = open,
                OutputStream::Stderr => self.open_lines[1] = open,
            }
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
        self.dir
            .write_sample(spec, &variant, t.as_secs_f64(), kind, label, sample);
    }

    fn marker(&mut self, spec: &RunSpec, marker: &MarkerRecord) {
        let variant = self.plan.variants[spec.variant].label.clone();
        self.dir.write_marker(spec, &variant, marker);
    }

    fn run_finished(&mut self, spec: &RunSpec, _record: &RunRecord) {
        self.dir.finish_run(spec.index);
        self.bar.inc(1);
    }
}
