//! `alloclens replay`: a recorded trace's allocator calls performed under each allocator variant,
//! with RSS measured against the bytes the program really held (crates/replay, docs/replay.md).
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use replay::results_dir::ReplayDir;
use replay::{Replay, ReplayOptions, Touch, VariantReplay};
use runner::{RunResults, VariantInfo};

use crate::cmd::args;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TouchArg {
    /// Write every byte of each new block
    All,
    /// Write one byte per page of each new block (its pages become resident, as when a program
    /// fills it)
    Pages,
    /// Write nothing: only what the allocator itself writes is resident
    None,
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    alloclens record -o prod.alt -- ./server          # once, where it runs\n  \
    alloclens replay prod.alt                         # on every installed allocator\n  \
    alloclens replay prod.alt -a glibc,jemalloc:dirty_decay_ms=0 -r 3 --phase freed-a")]
pub struct Args {
    /// The trace to replay (`alloclens record -o FILE`)
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Allocator variants, comma-separated, as for `run`: names (jemalloc), `name=/path/lib.so`, or
    /// a variant with settings (`jemalloc:dirty_decay_ms=0`). Default: glibc and every installed
    /// known allocator. Syntax in docs/allocators.md
    #[arg(short, long, visible_alias = "allocator", value_name = "LIST")]
    pub allocators: Option<String>,
    /// Replays per variant, interleaved across variants
    #[arg(
        short,
        long,
        visible_alias = "runs",
        default_value_t = 1,
        value_name = "N"
    )]
    pub repeat: u32,
    /// Replay only this process's images (default: every process image, one after the other)
    #[arg(long, value_name = "PID")]
    pub process: Option<u32>,
    /// Replay up to the end of the first phase with this marker label and measure that phase (the
    /// calls before it rebuild the heap it starts from); `start` is the calls before the first
    /// marker
    #[arg(long, value_name = "LABEL")]
    pub phase: Option<String>,
    /// One thread performs every call in the recorded global order (default: one replay thread per
    /// recorded thread)
    #[arg(long)]
    pub serial: bool,
    /// How new blocks are written
    #[arg(long, value_enum, default_value_t = TouchArg::Pages, value_name = "HOW")]
    pub touch: TouchArg,
    /// Stop a replay that takes longer than this (e.g. 30s, 5m) and report it as a timeout: an
    /// allocator that deadlocks does not stop the other variants
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Do not read the allocator's own statistics at the end (they need the watch agent preloaded,
    /// which counts every call: a few ns per call)
    #[arg(long)]
    pub no_allocator_stats: bool,
    /// The variant ratios are computed against: one of -a's labels [default: glibc, or the first
    /// variant when glibc is not among them]
    #[arg(long, visible_alias = "reference", value_name = "VARIANT")]
    pub baseline: Option<String>,
    /// Results directory [default: alloclens-replay-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace the results of an earlier session in the output directory
    #[arg(long)]
    pub force: bool,
    /// Print every replay's figures as JSON on stdout instead of the tables
    #[arg(long)]
    pub json: bool,
}

/// The hidden subcommand the replay processes run (with the allocator preloaded).
#[derive(clap::Args)]
pub struct DriverArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub fn driver(a: DriverArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::from(replay::driver_main(&a.args) as u8))
}

const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 86_400);

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let variants = args::variants(a.allocators.as_deref())?;
    let baseline = args::baseline(a.baseline.clone(), &variants)?;
    if a.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let options = options(&a)?;
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| args::dated_dir("alloclens-replay"));
    // Ctrl-C while the trace is decoded ends alloclens at once (nothing is measured yet); once the
    // replays start, it stops after those that ended (a second one exits at once) and what they
    // measured is written like a finished replay's, as `run` does.
    let replay = Replay::open(&a.trace, &options)?;
    super::warn(&replay.warnings);
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    let planned = variants.len() as u64 * u64::from(a.repeat);
    let header = results_header(&a, &variants, &baseline);
    let mut dir = ReplayDir::create(&output, a.force, header, planned)?;
    let runs = execute(&replay, &variants, a.repeat, &interrupted, &mut |r| {
        dir.add(r, &a.trace)
    })?;
    let interrupted = interrupted.load(Ordering::Relaxed);
    let mut warnings = replay::replay_warnings(&runs, options.serial);
    warnings.extend(replay.warnings.iter().cloned());
    let (results, problems) = dir.finish(&runs, warnings.clone(), interrupted);

    if a.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &runs)?;
        writeln!(out)?;
    } else {
        let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
        let mut table = report::render_run_table(&results.summary, &[], Some("calls/s"));
        table.push_str(&report::render_replay_tables(&runs, &labels, &replay));
        print!("{table}");
    }
    // The trace's own warnings were printed when it was decoded; results.json keeps them all.
    for w in warnings.iter().filter(|w| !replay.warnings.contains(w)) {
        eprintln!("alloclens: warning: {w}");
    }
    for p in &problems {
        eprintln!("alloclens: error: {p}");
    }
    if interrupted {
        eprintln!(
            "alloclens: interrupted: {} of {planned} replays done; the results keep them",
            runs.len(),
        );
    }
    eprintln!("alloclens: results in {}", output.display());
    Ok(super::session_status(
        interrupted,
        !(runs.iter().all(|r| r.ok) && problems.is_empty()),
    ))
}

fn options(a: &Args) -> anyhow::Result<ReplayOptions> {
    Ok(ReplayOptions {
        serial: a.serial,
        process: a.process,
        phase: a.phase.clone(),
        touch: match a.touch {
            TouchArg::All => Touch::All,
            TouchArg::Pages => Touch::Pages,
            TouchArg::None => Touch::None,
        },
        timeout: a
            .timeout
            .as_deref()
            .map(|t| args::duration(t, "--timeout", MAX_TIMEOUT))
            .transpose()?,
        allocator_stats: !a.no_allocator_stats,
        driver: None,
        samples: 1000,
    })
}

/// results.json before any replay: the session's command, machine and variants.
fn results_header(a: &Args, variants: &[allocators::Variant], baseline: &str) -> RunResults {
    RunResults {
        command: vec![
            "alloclens".into(),
            "replay".into(),
            a.trace.display().to_string(),
        ],
        repeats: a.repeat,
        throughput: Some("replay: calls per second".into()),
        throughput_unit: Some("calls/s".into()),
        baseline: Some(baseline.to_string()),
        variants: VariantInfo::of_variants(variants),
        ..RunResults::stamped()
    }
}

/// Every variant and repeat, interleaved (repeat 1 of each variant, then repeat 2, ...), with a
/// progress bar on calls, until `interrupted` is set.
fn execute(
    replay: &Replay,
    variants: &[allocators::Variant],
    repeats: u32,
    interrupted: &AtomicBool,
    ended: &mut dyn FnMut(&VariantReplay),
) -> anyhow::Result<Vec<VariantReplay>> {
    let per_run = replay.calls().max(1);
    let total = per_run * variants.len() as u64 * u64::from(repeats);
    let bar = super::progress::counted(
        total,
        "{spinner} [{elapsed_precise}] {bar:30} {percent}% of the calls (ETA {eta})  {msg}",
        true,
    );
    let mut out = Vec::new();
    let mut base = 0u64;
    'replays: for repeat in 0..repeats {
        for v in variants {
            if interrupted.load(Ordering::Relaxed) {
                break 'replays;
            }
            bar.set_message(format!("{} #{}", v.label, repeat + 1));
            let r = replay
                .run(v, repeat, &mut |done, _| bar.set_position(base + done))
                .with_context(|| format!("replaying under `{}`", v.label))?;
            // Ctrl-C on a terminal reaches the replay process too: its end is not the variant's.
            if interrupted.load(Ordering::Relaxed) {
                break 'replays;
            }
            base += per_run;
            bar.set_position(base);
            ended(&r);
            out.push(r);
        }
    }
    bar.finish_and_clear();
    Ok(out)
}
