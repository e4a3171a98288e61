//! `alloclens record`: trace every allocator call of a command and its descendants.
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use recorder::supervisor::{Outcome, Side};

#[derive(clap::Args)]
pub struct Args {
    /// Run the command under this allocator variant (as in `run`: jemalloc, tcmalloc:..., NAME=PATH)
    #[arg(
        short = 'a',
        long = "allocator",
        visible_alias = "allocators",
        value_name = "SPEC"
    )]
    allocator: Option<String>,
    /// Turn output lines that match REGEX into phase markers (label: first capture group, else the match)
    #[arg(long, value_name = "REGEX")]
    marker: Option<String>,
    /// Trace file to write: a new file (refused if it exists, unless --force), written as the
    /// recording goes so that a crash still leaves a readable trace [default:
    /// alloclens.PROGRAM.PID.alt in the current directory, PID alloclens's own, as heaptrack names
    /// its files; the name is printed]
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Replace FILE if it exists: record into .FILE.PID.partial beside it, renamed over it when
    /// the recording ends (FILE is left as it was if the command never starts)
    #[arg(long)]
    force: bool,
    /// Seconds to keep following descendants after the command itself exited (at most a week,
    /// 604800)
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    linger: f64,
    /// Store heap addresses. Without, blocks are known by the seq of their allocation: the same
    /// reports from traces several times smaller when blocks live long (docs/trace-format.md)
    #[arg(long)]
    addresses: bool,
    /// Record call stacks, for per-call-site statistics (docs/recording.md, "Sampled stacks"):
    /// `--stacks` takes the stacks of a sample of the allocations, by bytes (--stack-sample;
    /// calls, bytes and lifetimes stay exact, per-site figures are estimates), `--stacks=all`
    /// every allocation's and realloc's. Needs libunwind (Debian: libunwind8)
    #[arg(
        long,
        value_name = "WHICH",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "sampled",
        hide_possible_values = true
    )]
    stacks: Option<StacksArg>,
    /// With --stacks: the mean requested bytes between two allocations whose stack is taken,
    /// per thread (an allocation of S bytes is sampled with probability 1 - exp(-S/BYTES));
    /// 4096, 64K, 1M, ...; 0 takes every stack, as --stacks=all
    #[arg(long, value_name = "BYTES", default_value = "16K", requires = "stacks")]
    stack_sample: String,
    /// With --stacks: the most frames kept per stack, innermost first (1 to 256)
    #[arg(long, value_name = "N", default_value = "64", requires = "stacks")]
    stack_depth: String,
    /// With --stacks=all: the call stacks of frees too
    #[arg(long, requires = "stacks")]
    free_stacks: bool,
    /// How often to read each traced process's heap/file/stack split and PSS from
    /// /proc/PID/smaps (its RSS five times as often) into the trace, for `analyze`'s original
    /// memory figures and `replay`'s fidelity (docs/trace-format.md, "Memory samples"); the reads
    /// slow down to stay under about 5 % of a core; 0 takes none
    #[arg(long, value_name = "MS", default_value_t = 100)]
    memory_interval: u64,
    /// Do not print the summary line, nor the progress line (drawn only when stderr is a terminal)
    #[arg(short, long)]
    quiet: bool,
    /// At the command's exit, before its memory is gone, hold it (ptrace) and classify every
    /// block still allocated as memcheck does: definitely, indirectly or possibly lost, or still
    /// reachable, with the root holding it; `analyze` prints them by call site (docs/leaks.md).
    /// Where ptrace is refused, blocks are only "not freed at exit", and a warning says so
    #[arg(long, conflicts_with = "pid")]
    leaks: bool,
    /// Record process PID, already running, from now until --duration, Ctrl-C or SIGTERM; it
    /// runs on after (no restart, no debugger; blocks allocated before the attach are not in the
    /// trace: docs/attach.md)
    #[arg(long, value_name = "PID", conflicts_with_all = ["allocator", "marker", "command"])]
    pid: Option<u32>,
    /// With --pid: seconds to record before detaching [default: until Ctrl-C or SIGTERM]
    #[arg(long, value_name = "SECONDS", requires = "pid")]
    duration: Option<f64>,
    /// The command to record and its arguments (after `--`)
    #[arg(
        required_unless_present = "pid",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// heaptrack's naming: `alloclens.PROGRAM.PID.alt`, PROGRAM the command's file name.
fn default_output(command: &[OsString]) -> PathBuf {
    let program = command
        .first()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "command".into());
    PathBuf::from(format!("alloclens.{program}.{}.alt", std::process::id()))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let output = match &args.output {
        Some(path) => path.clone(),
        None => {
            let path = match args.pid {
                Some(pid) => attached_output(pid),
                None => default_output(&args.command),
            };
            eprintln!("alloclens: recording into {}", path.display());
            path
        }
    };
    let mut options = recorder::RecordOptions::new(args.command, output.clone());
    if args.force {
        options.existing = recorder::Existing::Replace;
    }
    if let Some(spec) = &args.allocator {
        let variant = allocators::parse_variant(spec)?;
        options.env = variant.environment(std::env::var_os("LD_PRELOAD").as_deref());
        options.allocator = variant.label.clone();
    }
    if let Some(re) = &args.marker {
        options.marker =
            Some(regex::Regex::new(re).with_context(|| format!("invalid --marker regex '{re}'"))?);
    }
    options.linger = linger(args.linger)?;
    options.addresses = args.addresses;
    options.leaks = args.leaks;
    options.memory_interval =
        (args.memory_interval > 0).then(|| Duration::from_millis(args.memory_interval));
    if let Some(which) = args.stacks {
        let sample_bytes = match which {
            StacksArg::All => 0,
            StacksArg::Sampled => stack_sample(&args.stack_sample)?,
        };
        options.stacks = Some(recorder::StackOptions {
            depth: stack_depth(&args.stack_depth)?,
            frees: args.free_stacks,
            sample_bytes,
        });
    }
    recorder::check_stacks(&options)?;
    if let Some(pid) = args.pid {
        let duration = args.duration.map(duration).transpose()?;
        return record_attached(&options, pid, duration, args.quiet);
    }

    // From here on two processes: this one waits, its child records (recorder::supervisor, which
    // also sets what signals do to both).
    // SAFETY: no thread has been started yet (argument parsing and checks only so far).
    let side = unsafe { recorder::supervisor::split() };
    match side.context("cannot start the recorder process")? {
        Side::Recorder(link) => options.supervisor = Some(link),
        Side::Supervisor(Outcome::Exited(code)) => return Ok(ExitCode::from(code as u8)),
        Side::Supervisor(Outcome::RecorderDied {
            signal,
            command,
            rename_error,
        }) => {
            let kept = match rename_error {
                None => format!("{} keeps what was written before", output.display()),
                Some(where_) => format!("what was written before is in {where_}"),
            };
            eprintln!(
                "alloclens: error: the recorder died (signal {signal}, {}); the command ran on \
                 untraced, and {kept}",
                recorder::signal_name(signal),
            );
            return Ok(command.map_or(ExitCode::FAILURE, exit_code));
        }
    }
    // Only on this side of the split: the supervisor starts no thread.
    let counters = std::sync::Arc::new(recorder::RecordProgress::default());
    options.progress = Some(std::sync::Arc::clone(&counters));
    let bar = (!args.quiet).then(|| super::progress::RecordingBar::start(counters));
    let summary = recorder::record(&options);
    drop(bar);
    let summary = summary?;

    print_summary(&summary, &output, args.quiet);
    Ok(exit_code(summary.status))
}

/// `record --pid`: attach, record until the end condition, detach; the process runs on.
fn record_attached(
    options: &recorder::RecordOptions,
    pid: u32,
    duration: Option<Duration>,
    quiet: bool,
) -> anyhow::Result<ExitCode> {
    let counters = std::sync::Arc::new(recorder::RecordProgress::default());
    let mut options = options.clone();
    options.progress = Some(std::sync::Arc::clone(&counters));
    if !quiet {
        eprintln!(
            "alloclens: attaching to pid {pid} to record {}",
            match duration {
                Some(d) => format!("for {:.1} s", d.as_secs_f64()),
                None => "until Ctrl-C or SIGTERM".into(),
            }
        );
    }
    let mut bar = None;
    let recorded = recorder::record_pid(&options, pid, duration, &mut |i| {
        if !quiet {
            eprintln!(
                "alloclens: attached to pid {pid} at {} in {:.1} ms (seize to detach; each thread is stopped only to set and clear its breakpoints), that thread ran alloclens's calls {:.1} ms",
                i.safe_point,
                i.total.as_secs_f64() * 1e3,
                i.borrowed.as_secs_f64() * 1e3,
            );
            bar = Some(super::progress::RecordingBar::start(counters.clone()));
        }
    });
    drop(bar);
    let (summary, attached) = recorded?;
    if !quiet && attached.exited {
        eprintln!("alloclens: pid {pid} exited; the trace ends with it");
    } else if !quiet {
        eprintln!(
            "alloclens: detached from pid {pid} ({}); it runs on",
            attached.ended_by
        );
    }
    print_summary(&summary, &options.output, quiet);
    Ok(ExitCode::SUCCESS)
}

/// heaptrack's naming for an attach: `alloclens.PROGRAM.PID.alt`, PID the process's.
fn attached_output(pid: u32) -> PathBuf {
    let program = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().replace('/', "_"))
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "process".into());
    PathBuf::from(format!("alloclens.{program}.{pid}.alt"))
}

/// `--duration` as a duration: a positive number of seconds, at most a year.
fn duration(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 365.0 * 24.0 * 3600.0) {
        anyhow::bail!(
            "--duration must be a positive number of seconds (at most a year), not {seconds:?}"
        );
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The warnings and the summary line of a recording.
fn print_summary(summary: &recorder::RecordSummary, output: &std::path::Path, quiet: bool) {
    for w in &summary.warnings {
        eprintln!("alloclens: warning: {w}");
    }
    if let Some(leaks) = &summary.leaks {
        eprintln!("alloclens: {}", analyze::leaks::totals_line(leaks));
    }
    if !summary.untraced.is_empty() {
        let n = summary.untraced.len();
        eprintln!(
            "alloclens: warning: {n} program{} not traced (none of {} calls are in the trace):",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" }
        );
        for u in &summary.untraced {
            eprintln!("alloclens: warning:   {}", analyze::describe_untraced(u));
        }
    }
    if !quiet {
        let truncated = summary
            .processes
            .iter()
            .filter(|p| !p.end.is_some_and(|e| e.is_clean()))
            .count();
        let per_event = if summary.events > 0 {
            summary.bytes as f64 / summary.events as f64
        } else {
            0.0
        };
        let unwritten = if summary.events_intercepted > summary.events {
            format!(
                " (of {} intercepted; writing failed)",
                trace::human_count(summary.events_intercepted)
            )
        } else {
            String::new()
        };
        eprintln!(
            "alloclens: recorded {} events{unwritten} from {} process image(s){}{} into {} ({}, {:.2} B/event)",
            trace::human_count(summary.events),
            summary.processes.len(),
            if truncated > 0 { format!(" ({truncated} truncated)") } else { String::new() },
            match summary.untraced.len() {
                0 => String::new(),
                n => format!(", {n} program(s) not traced"),
            },
            output.display(),
            trace::human_bytes(summary.bytes),
            per_event
        );
    }
}

/// `--linger` as a duration: a number of seconds from 0 to `MAX_LINGER_S` (a much larger one
/// would overflow `Duration`, and no descendant needs more than a week).
fn linger(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds.is_finite() && (0.0..=MAX_LINGER_S).contains(&seconds)) {
        anyhow::bail!(
            "--linger must be a number of seconds from 0 to {MAX_LINGER_S}, not {seconds:?}"
        );
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| anyhow::anyhow!("--linger {seconds}: {e}"))
}

/// The longest `--linger`: a week.
const MAX_LINGER_S: f64 = 7.0 * 24.0 * 3600.0;

/// The command's status as ours: its exit code, or 128 + the signal that killed it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code as u8),
        (None, Some(sig)) => {
            eprintln!(
                "alloclens: the command was killed by signal {sig} ({})",
                recorder::signal_name(sig)
            );
            ExitCode::from((128 + sig) as u8)
        }
        _ => ExitCode::from(1),
    }
}

/// `--stack-depth`, read here rather than by clap so that any text out of 1 to the shim's deepest
/// (a negative number, one beyond u32) gets the one-line error with the range.
/// `--stacks[=WHICH]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum StacksArg {
    /// A sample of the allocations, by bytes (`--stack-sample`): the default
    Sampled,
    /// Every allocation and realloc
    All,
}

fn stack_sample(text: &str) -> anyhow::Result<u64> {
    match allocators::settings::parse_size(text.trim()) {
        Some(n) => Ok(n),
        None => anyhow::bail!(
            "--stack-sample must be a number of bytes (4096, 64K, 1M; 0 for every stack), got \
             `{text}`"
        ),
    }
}

fn stack_depth(text: &str) -> anyhow::Result<u32> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=recorder::MAX_STACK_DEPTH).contains(&n) => Ok(n),
        _ => anyhow::bail!(
            "--stack-depth must be a whole number from 1 to {}, got `{text}`",
            recorder::MAX_STACK_DEPTH
        ),
    }
}
