//! `alloclens replay`: a recorded trace's allocator calls performed under each allocator variant,
//! with RSS measured against the bytes the program really held (crates/replay, docs/replay.md).
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};
use replay::{Replay, ReplayOptions, Touch, VariantReplay};
use runner::results_dir::ResultsDir;
use runner::{
    Ending, MemorySummary, RunRecord, RunResults, RunSpec, SampleKind, SeriesStats, VariantInfo,
};

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
    /// calls before it rebuild the heap it starts from)
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
    let options = ReplayOptions {
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
    };
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
    let mut dir = ResultsDir::create(&output, a.force, &[], false, false)?;
    let runs = execute(&replay, &variants, a.repeat, &interrupted)?;
    let interrupted = interrupted.load(Ordering::Relaxed);

    let labels: Vec<String> = variants.iter().map(|v| v.label.clone()).collect();
    let records: Vec<RunRecord> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| run_record(i, r, &a.trace))
        .collect();
    for (i, r) in runs.iter().enumerate() {
        let spec = RunSpec {
            index: i,
            variant: labels.iter().position(|l| *l == r.variant).unwrap_or(0),
            assignment: Default::default(),
            repeat: r.repeat,
        };
        for image in &r.images {
            for s in &image.samples {
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
                dir.write_sample(
                    &spec,
                    &r.variant,
                    s.t_s,
                    &SampleKind::Interval,
                    None,
                    &sample,
                );
            }
        }
        dir.finish_run(i);
    }
    let summary = runner::summarize(&records, &labels, Some(&baseline), runner::Ranking::Wall);
    let mut warnings = Vec::new();
    for r in runs.iter().filter(|r| !r.ok) {
        let why = r.images.iter().find_map(|i| i.error.clone());
        warnings.push(format!(
            "variant `{}` (repeat {}): the replay ended with {}{}",
            r.variant,
            r.repeat + 1,
            r.ending,
            why.map(|w| format!(": {w}")).unwrap_or_default()
        ));
    }
    warnings.extend(replay.warnings.iter().cloned());
    let mut results = RunResults {
        command: vec![
            "alloclens".into(),
            "replay".into(),
            a.trace.display().to_string(),
        ],
        params: Vec::new(),
        repeats: a.repeat,
        interval_s: 0.0,
        marker: None,
        throughput: Some("replay: calls per second".into()),
        throughput_unit: Some("calls/s".into()),
        warmup: 0,
        prepare: None,
        cleanup: None,
        baseline: Some(baseline.clone()),
        variants: VariantInfo::of_variants(&variants),
        interrupted,
        warnings: warnings.clone(),
        incomplete_files: Vec::new(),
        runs: records,
        summary: summary.clone(),
        ksm: None,
        ksm_savings: Vec::new(),
        tune: None,
        ..RunResults::stamped()
    };
    dir.write_results(&mut results);
    // results.json first (it matters most on a full disk), then replay's own files; one that
    // fails is listed in results.json too, so a reader of the directory knows it is incomplete.
    let replay_problems = write_replay_files(&output, &runs);
    if !replay_problems.is_empty() {
        for p in replay_problems {
            dir.note_problem(p);
        }
        dir.write_results(&mut results);
    }
    let problems = dir.problems();

    if a.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &runs)?;
        writeln!(out)?;
    } else {
        let mut table = report::render_run_table(&summary, &[], Some("calls/s"));
        table.push_str(&replay_table(&runs, &labels, &replay));
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
            "alloclens: interrupted: {} of {} replays done; the results keep them",
            runs.len(),
            variants.len() as u64 * u64::from(a.repeat)
        );
    }
    eprintln!("alloclens: results in {}", output.display());
    Ok(super::session_status(
        interrupted,
        !(runs.iter().all(|r| r.ok) && problems.is_empty()),
    ))
}

/// Every variant and repeat, interleaved (repeat 1 of each variant, then repeat 2, ...), with a
/// progress bar on calls, until `interrupted` is set.
fn execute(
    replay: &Replay,
    variants: &[allocators::Variant],
    repeats: u32,
    interrupted: &AtomicBool,
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
            out.push(r);
        }
    }
    bar.finish_and_clear();
    Ok(out)
}

/// A replay as `run` records a run, so `report`, `diff` and `report --compare` read the directory:
/// wall = replay time, throughput = calls per second, memory = the replay's anonymous RSS.
fn run_record(index: usize, r: &VariantReplay, trace: &std::path::Path) -> RunRecord {
    let samples: Vec<&replay::Sample> = r.images.iter().flat_map(|i| &i.samples).collect();
    let stats = SeriesStats {
        peak: r.figures.peak_rss,
        mean: r.figures.mean_rss,
        last: samples.last().map_or(0, |s| s.rss),
    };
    let (status, timed_out) = match r.images.last().map(|i| &i.ending) {
        Some(replay::Ending::Signal(s)) => (
            runner::CommandExit {
                code: None,
                signal: Some(*s),
            },
            false,
        ),
        Some(replay::Ending::Exit(c)) => (
            runner::CommandExit {
                code: Some(*c),
                signal: None,
            },
            false,
        ),
        Some(replay::Ending::Timeout) => (runner::CommandExit::default(), true),
        _ => (
            runner::CommandExit {
                code: Some(0),
                signal: None,
            },
            false,
        ),
    };
    RunRecord {
        index,
        variant: r.variant.clone(),
        allocator: r.allocator.clone(),
        repeat: r.repeat,
        command: vec!["replay".into(), trace.display().to_string()],
        ending: Ending {
            status: Some(status),
            timed_out,
            ..Ending::default()
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
fn allocator_check(r: &VariantReplay) -> runner::AllocatorCheck {
    let served = r
        .images
        .iter()
        .find_map(|i| i.allocator_stats.as_ref().map(|s| s.name.clone()));
    match served {
        _ if r.allocator == allocators::GLIBC => runner::AllocatorCheck::NotApplicable,
        Some(s) if s == r.allocator => runner::AllocatorCheck::Loaded,
        Some(s) if s == "unknown" => runner::AllocatorCheck::Unverified,
        Some(_) => runner::AllocatorCheck::NotLoaded,
        None => runner::AllocatorCheck::Unverified,
    }
}

/// replay.json (every figure of every replay) and replay.csv (RSS and live bytes on the call axis).
fn write_replay_files(dir: &std::path::Path, runs: &[VariantReplay]) -> Vec<String> {
    let mut problems = Vec::new();
    let json = serde_json::to_vec_pretty(runs).map_err(std::io::Error::other);
    if let Err(e) = json.and_then(|j| std::fs::write(dir.join("replay.json"), j)) {
        problems.push(format!("replay.json: not written: {e}"));
    }
    let csv = (|| -> Result<(), Box<dyn std::error::Error>> {
        let mut w = csv::Writer::from_path(dir.join("replay.csv"))?;
        w.write_record([
            "variant",
            "repeat",
            "pid",
            "exec_index",
            "seq",
            "t_s",
            "rss",
            "live",
        ])?;
        for r in runs {
            for i in &r.images {
                for s in &i.samples {
                    w.write_record([
                        r.variant.clone(),
                        r.repeat.to_string(),
                        i.pid.to_string(),
                        i.exec_index.to_string(),
                        s.seq.to_string(),
                        format!("{:.6}", s.t_s),
                        s.rss.to_string(),
                        s.live.to_string(),
                    ])?;
                }
            }
        }
        w.flush()?;
        Ok(())
    })();
    if let Err(e) = csv {
        problems.push(format!("replay.csv: not written: {e}"));
    }
    // The original run's readings, once per image (they are the trace's, not a replay's).
    let mut original = String::from("pid,exec_index,seq,t_s,rss,anon,pss,heap\n");
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mut any = false;
    for i in runs.first().map_or(&[][..], |r| &r.images[..]) {
        for s in &i.original_memory {
            any = true;
            let _ = writeln!(
                original,
                "{},{},{},{:.6},{},{},{},{}",
                i.pid,
                i.exec_index,
                s.seq,
                s.t_ns as f64 / 1e9,
                s.rss,
                s.anon,
                opt(s.pss),
                opt(s.heap)
            );
        }
    }
    if any {
        if let Err(e) = std::fs::write(dir.join("original.csv"), original) {
            problems.push(format!("original.csv: not written: {e}"));
        }
    }
    problems
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / (1u64 << 20) as f64)
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The replay's own figures per variant (means over the repeats that ended well), the calls left
/// out, and per phase RSS against live bytes.
fn replay_table(runs: &[VariantReplay], labels: &[String], replay: &Replay) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nReplay of {} ({} calls, {} process image{}): RSS against the live requested bytes",
        replay.path().display(),
        trace::human_count(replay.calls()),
        replay.images(),
        if replay.images() == 1 { "" } else { "s" }
    );
    let headers = [
        "variant",
        "peak RSS",
        "ideal peak",
        "frag@peak",
        "frag mean",
        "end RSS",
        "end live",
        "calls/s",
    ];
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    for label in labels {
        let ok: Vec<&VariantReplay> = runs
            .iter()
            .filter(|r| &r.variant == label && r.ok)
            .collect();
        if ok.is_empty() {
            let ending = runs
                .iter()
                .find(|r| &r.variant == label)
                .map_or("not run".to_string(), |r| r.ending.clone());
            rows.push(vec![label.clone()]);
            notes.push(vec![ending]);
            continue;
        }
        let f = |g: fn(&VariantReplay) -> f64| mean(ok.iter().map(|r| g(r)));
        let opt = |g: fn(&VariantReplay) -> Option<f64>| {
            let v: Vec<f64> = ok.iter().filter_map(|r| g(r)).collect();
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}x", mean(v.into_iter()))
            }
        };
        rows.push(vec![
            label.clone(),
            mib(f(|r| r.figures.peak_rss as f64)),
            mib(f(|r| r.figures.ideal_peak as f64)),
            opt(|r| r.figures.fragmentation_at_peak),
            opt(|r| r.figures.fragmentation_mean),
            mib(f(|r| r.figures.end_rss as f64)),
            mib(f(|r| r.figures.end_live as f64)),
            trace::human_count(f(|r| r.calls_per_s) as u64),
        ]);
        notes.push(Vec::new());
    }
    t.push_str(&report::render_terminal_table(
        headers.iter().map(|h| h.to_string()).collect(),
        rows,
        &notes,
    ));
    let s = replay.skipped();
    if s.total() > 0 || s.unknown_reallocs_as_malloc > 0 {
        let _ = writeln!(
            t,
            "Left out: {} frees of unknown blocks, {} double frees, {} calls that failed in the trace; {} reallocs of unknown blocks replayed as malloc",
            s.unknown_frees, s.double_frees, s.failed_in_trace, s.unknown_reallocs_as_malloc
        );
    }
    // The replay's row shows the image that held the most, so the original beside it is the image
    // that held the most too, not the first one read (a wrapper shell's, for a traced script). Its
    // count of readings says how far to trust it: a short program may have two.
    let originals: Vec<&replay::ImageReplay> = runs
        .first()
        .map(|r| {
            r.images
                .iter()
                .filter(|i| i.original_summary.is_some())
                .collect()
        })
        .unwrap_or_default();
    if let Some((image, o)) = originals
        .iter()
        .filter_map(|i| Some((*i, i.original_summary.as_ref()?)))
        .max_by_key(|(_, o)| o.rss.peak)
    {
        let of = if replay.images() > 1 {
            format!(" (process {}, the image that held the most)", image.pid)
        } else {
            String::new()
        };
        let heap = o.heap.map_or("not read".to_string(), |h| {
            format!("peak {}, mean {}", mib(h.peak as f64), mib(h.mean))
        });
        let _ = writeln!(
            t,
            "Original run (recorded with the trace, {} readings){of}: RSS peak {}, anonymous peak {} mean {}, heap {heap}: compare with the replay's peak RSS and frag columns (the replay's RSS is its anonymous memory)",
            o.rss.samples,
            mib(o.rss.peak as f64),
            mib(o.anon.peak as f64),
            mib(o.anon.mean),
        );
    }
    if let Some(first) = runs.iter().find(|r| r.ok) {
        let phases: Vec<&replay::PhaseFigures> =
            first.images.iter().flat_map(|i| &i.phases).collect();
        if !phases.is_empty() {
            let _ = writeln!(
                t,
                "\nPer phase: RSS / live bytes at the phase's end (retained MiB)"
            );
            let headers = std::iter::once("variant".to_string())
                .chain(phases.iter().map(|p| p.label.clone()))
                .collect();
            let rows = labels
                .iter()
                .filter_map(|label| runs.iter().find(|r| &r.variant == label && r.ok))
                .map(|r| {
                    std::iter::once(r.variant.clone())
                        .chain(r.images.iter().flat_map(|i| &i.phases).map(|p| {
                            format!(
                                "{} ({:.1})",
                                p.figures
                                    .retention_ratio
                                    .map_or("-".into(), |x| format!("{x:.2}x")),
                                p.figures.retained as f64 / (1u64 << 20) as f64
                            )
                        }))
                        .collect()
                })
                .collect();
            t.push_str(&report::render_terminal_table(headers, rows, &[]));
        }
    }
    t
}
