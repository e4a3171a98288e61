//! `alloclens live`: glue between the command line, the watch's session (its directory and
//! results, shared with `watch`) and the `live` crate's view. With `--pid` the watch runs in a
//! background collector (`live_collector`, this binary re-executed) and the view reads its
//! directory.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cmd::args;
use crate::cmd::live_collector;
use crate::cmd::watch::{one_variant, Session, Settings, MAX_DURATION, MAX_INTERVAL};

#[derive(clap::Args)]
#[command(
    after_help = "Keys: q quit (ends a program live started; with --pid, asks whether the \
    background collector goes on), s sort the call sites, p pause, o show or hide the program's \
    output.\n\nExamples:\n  \
    alloclens live -- ./server --config prod.yaml\n  \
    alloclens live --output-pane -a jemalloc -- ./cache\n  \
    alloclens live --pid 4242            # again later: the whole history\n  \
    alloclens live --pid 4242 --stop     # end the background collector, write the results"
)]
pub struct Args {
    /// The allocator variant to run the command under, one (as in `watch`); default: the
    /// program's own
    #[arg(short = 'a', long = "allocator", value_name = "SPEC")]
    allocator: Option<String>,
    /// Time between samples (e.g. 500ms, 1s); the screen is redrawn at most once a second
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    interval: String,
    /// The heap profile's mean bytes between samples (the call sites' table; as `watch --profile`)
    #[arg(long, value_name = "SIZE", default_value = "512KiB")]
    profile: String,
    /// Watch a process already running (the agent loaded as by `watch --pid --profile`): a
    /// collector in the background takes the samples, and keeps taking them with no viewer if
    /// asked; the process always runs on
    #[arg(long, value_name = "PID", conflicts_with_all = ["allocator", "command", "output_pane"])]
    pid: Option<u32>,
    /// With --pid: what quitting the view does to the background collector: ask (one key; Enter
    /// stops it), keep (it collects on with no viewer), stop (its watch ends, the results are
    /// written). A viewer whose terminal goes away always leaves it collecting
    #[arg(
        long,
        value_enum,
        default_value = "ask",
        value_name = "WHAT",
        requires = "pid"
    )]
    on_quit: OnQuitArg,
    /// With --pid: end the session's background collector (its results written as `watch`
    /// writes them, the agent's hooks put back) and print its summary; no view
    #[arg(long, requires = "pid")]
    stop: bool,
    /// With --pid: the collector ends after this long (e.g. 30m, 2h, 7d), viewer or not; default:
    /// when the process exits or it is stopped
    #[arg(long, value_name = "DURATION", requires = "pid")]
    duration: Option<String>,
    /// Run as the background collector of a `--pid` session (started by `live --pid` itself)
    #[arg(long = "collector", hide = true, requires = "pid")]
    collector: bool,
    /// Show the program's output in a pane (key o toggles it); it is kept in DIR/program.out
    /// either way
    #[arg(long)]
    output_pane: bool,
    /// Results directory, the same as `watch` writes (`alloclens report DIR` draws it); with
    /// --pid, the process's session: a later `live --pid` with the same DIR shows the history so
    /// far [default: alloclens-live-YYYYmmdd-HHMMSS, with --pid alloclens-live-PID]
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Replace an earlier watch's files in the output directory
    #[arg(long)]
    force: bool,
    /// The command to start and watch, after `--`. Its stdin is /dev/null, its output goes to
    /// DIR/program.out (the terminal is the view's)
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "pid")]
    command: Vec<String>,
}

/// `--on-quit`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum OnQuitArg {
    Ask,
    Keep,
    Stop,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (collector, stop) = (a.collector, a.stop);
    let on_quit = match a.on_quit {
        OnQuitArg::Ask => live::OnQuit::Ask,
        OnQuitArg::Keep => live::OnQuit::Keep,
        OnQuitArg::Stop => live::OnQuit::Stop,
    };
    let settings = settings(a)?;
    match settings.pid {
        Some(pid) if collector => live_collector::run(&settings.watch, pid),
        Some(pid) if stop => stop_collector(&settings, pid),
        Some(pid) => view_collector(&settings, pid, on_quit),
        None => view_command(&settings),
    }
}

/// `live -- CMD`: the watch runs here, beside the view; quitting ends it and the program.
fn view_command(settings: &LiveSettings) -> anyhow::Result<ExitCode> {
    // Before the directory is made: a refusal leaves nothing behind.
    live::check_terminal()?;
    let mut session = Session::open(settings)?;
    let dir = session.dir.clone();
    let options = live::LiveOptions {
        source: live::Source::Engine(Box::new(session.options.clone())),
        base: session.base.clone(),
        title: settings.command.join(" "),
        tables: Some(dir.join(watch::AGENT_DIR)),
        output: live::OutputShown::File {
            path: dir.join(watch::PROGRAM_OUTPUT),
            pane: settings.output_pane,
        },
        started_here: true,
        results_dir: dir.clone(),
        notes: Vec::new(),
    };
    let interrupted = interrupt_flag()?;
    let mut written = None;
    let left = live::run(options, &interrupted, &mut |outcome| {
        let (results, w) = session.close(outcome);
        written = Some(w);
        results
    })?;
    let live::Left::Results(results) = left else {
        unreachable!("a watch run here leaves with its results")
    };
    let code = crate::cmd::watch::print(&results, written.unwrap_or(Ok(())), &dir)?;
    eprintln!(
        "alloclens: the program's output is in {}",
        dir.join(watch::PROGRAM_OUTPUT).display()
    );
    Ok(code)
}

/// `live --pid PID`: the view of the session's background collector, started when none runs.
fn view_collector(
    settings: &LiveSettings,
    pid: u32,
    on_quit: live::OnQuit,
) -> anyhow::Result<ExitCode> {
    live::check_terminal()?;
    let (collector, notes) = match live::Collector::find(&settings.dir) {
        Some(running) => (running, Vec::new()),
        None => live::Collector::spawn(collector_command(settings, pid)?, &settings.dir)?,
    };
    let dir = settings
        .dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", settings.dir.display()))?;
    let base = live::base_results(&dir)
        .with_context(|| format!("cannot read {}", dir.join(watch::WATCH_JSON).display()))?;
    if base.pid != Some(pid) {
        bail!(
            "{} is the session of another process (pid {}), whose collector (pid {}) runs: give another -o",
            dir.display(),
            base.pid.map_or("?".into(), |p| p.to_string()),
            collector.pid
        );
    }
    let collector_pid = collector.pid;
    let options = live::LiveOptions {
        source: live::Source::Collector { collector, on_quit },
        base,
        title: format!("attached to {pid}, collector {collector_pid}"),
        tables: Some(dir.join(watch::AGENT_DIR)),
        output: live::OutputShown::NotOurs,
        started_here: false,
        results_dir: dir.clone(),
        notes,
    };
    let interrupted = interrupt_flag()?;
    let left = live::run(options, &interrupted, &mut |_| {
        unreachable!("the collector writes the results")
    })?;
    match left {
        live::Left::Results(results) => crate::cmd::watch::print(&results, Ok(()), &dir),
        live::Left::Collecting(collector) => {
            eprintln!(
                "alloclens: the collector (pid {collector}) goes on collecting into {} with no viewer: `alloclens live --pid {pid}{}` shows the whole history, `... --stop` ends it",
                dir.display(),
                dir_option(settings, pid)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `live --pid PID --stop`: the session's collector ends its watch and writes its results; its
/// summary is printed here. Ending it on request is a success (0), not an interrupt.
fn stop_collector(settings: &LiveSettings, pid: u32) -> anyhow::Result<ExitCode> {
    let dir = &settings.dir;
    let Some(mut collector) = live::Collector::find(dir) else {
        bail!(
            "no background collector runs in {} (it ended, its results are there, or `alloclens live --pid {pid}{}` starts one)",
            dir.display(),
            dir_option(settings, pid)
        );
    };
    collector
        .stop()
        .with_context(|| format!("cannot stop the collector (pid {})", collector.pid))?;
    let ended = wait_until(STOP_GRACE, || collector.has_ended());
    if !ended {
        bail!(
            "the collector (pid {}) did not end within {} s: see {}",
            collector.pid,
            STOP_GRACE.as_secs(),
            dir.join(watch::COLLECTOR_LOG).display()
        );
    }
    let results = live::final_results(dir).with_context(|| {
        format!(
            "the collector ended without writing its results: see {}",
            dir.join(watch::COLLECTOR_LOG).display()
        )
    })?;
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
    let code = crate::cmd::watch::print(&results, Ok(()), &dir)?;
    Ok(if code == ExitCode::from(130) {
        ExitCode::SUCCESS
    } else {
        code
    })
}

/// The collector's watch ends within its interval, then puts the agent's hooks back.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// Polls `done` every 50 ms until it holds or `limit` passes.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// ` -o DIR` when DIR is not the default one, for the lines that say what to run next.
fn dir_option(settings: &LiveSettings, pid: u32) -> String {
    if settings.dir == default_session_dir(pid) {
        String::new()
    } else {
        format!(" -o {}", settings.dir.display())
    }
}

/// This binary again, as the session's collector: the same settings, detached (see
/// `live::Collector::spawn`). A re-executed alloclens rather than a forked thread: the collector
/// must outlive the viewer, its terminal and its signals, and a fork of a process with threads
/// (the view's) may only exec.
fn collector_command(settings: &LiveSettings, pid: u32) -> anyhow::Result<std::process::Command> {
    let exe = std::env::current_exe().context("cannot find the alloclens executable")?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("live")
        .arg(live::collector::COLLECTOR_ARG)
        .args(["--pid", &pid.to_string()])
        .args([
            "--interval",
            &format!("{}ms", settings.interval.as_millis()),
        ])
        .arg("-o")
        .arg(&settings.dir);
    if let Some(profile) = &settings.profile {
        command.args(["--profile", &profile.sample_bytes.to_string()]);
    }
    if let Some(d) = settings.duration {
        command.args(["--duration", &format!("{}ms", d.as_millis())]);
    }
    if settings.force {
        command.arg("--force");
    }
    Ok(command)
}

/// Ctrl-C, SIGTERM and a hang-up (the ssh session dropped, the terminal closed) set it: a watch
/// run here ends as after SIGTERM (results written); a collector's view is left, the collector
/// collecting on for the next viewer.
fn interrupt_flag() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    signal_hook::flag::register(
        signal_hook::consts::SIGHUP,
        std::sync::Arc::clone(&interrupted),
    )
    .context("cannot catch SIGHUP")?;
    Ok(interrupted)
}

/// `live --pid PID` again: the samples of the earlier viewers of this process kept in DIR, when
/// DIR holds a watch of the same process (the pid, and a process that started before that watch:
/// not a later one that reused the pid). Another process's watch there is refused unless
/// `--force`.
pub(crate) fn earlier_session(
    dir: &Path,
    pid: u32,
    force: bool,
) -> anyhow::Result<Option<watch::Resume>> {
    if !dir.join(watch::WATCH_JSON).exists() {
        return Ok(None);
    }
    let earlier = watch::WatchDir::load(dir)
        .with_context(|| format!("cannot read the earlier session in {}", dir.display()))?;
    let started = procmem::start_unix_ms(pid)
        .with_context(|| format!("cannot read when process {pid} started"))?;
    let same = earlier.results.pid == Some(pid)
        && started <= earlier.results.started_unix_ms + PROCESS_START_SLACK_MS;
    if same {
        return Ok(Some(watch::Resume {
            samples: earlier.samples,
            started_unix_ms: earlier.results.started_unix_ms,
        }));
    }
    if force {
        return Ok(None);
    }
    bail!(
        "{} holds the session of another process than {pid} (or of an earlier process with its pid): give another -o, or --force to replace it",
        dir.display()
    )
}

/// /proc's start time is in clock ticks and the earlier watch's in ms: a process that started
/// within this of the earlier watch's start is taken for the one it watched.
const PROCESS_START_SLACK_MS: u64 = 1000;

/// The watch `live` runs: `watch --profile` with the program's output aside.
fn settings(a: Args) -> anyhow::Result<LiveSettings> {
    let interval = args::duration(&a.interval, "--interval", MAX_INTERVAL)?;
    if interval < Duration::from_millis(10) {
        bail!("--interval must be at least 10ms");
    }
    let duration = a
        .duration
        .as_deref()
        .map(|d| args::duration(d, "--duration", MAX_DURATION))
        .transpose()?;
    if let Some(pid) = a.pid {
        // `--stop` ends a collector whose process may be gone already.
        if !a.stop {
            watch::check_pid(pid)?;
        }
    } else {
        args::check_command_exists(&a.command[0])?;
    }
    let sample_bytes = allocators::settings::parse_size(a.profile.trim())
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--profile: '{}' is not a size (e.g. 512KiB, 1MiB)",
                a.profile
            )
        })?;
    Ok(LiveSettings {
        output_pane: a.output_pane,
        watch: Settings {
            interval,
            duration,
            variant: a.allocator.as_deref().map(one_variant).transpose()?,
            pid: a.pid,
            command: a.command,
            trim_probe: false,
            attach: a.pid.is_some(),
            profile: Some(watch::profiling::ProfileSettings {
                sample_bytes,
                triggers: Default::default(),
                keep: watch::profiling::DEFAULT_KEEP,
            }),
            // A process's session has a name of its own, so the next viewer finds its history.
            dir: a.output.unwrap_or_else(|| match a.pid {
                Some(pid) => default_session_dir(pid),
                None => args::dated_dir("alloclens-live"),
            }),
            force: a.force,
            output_aside: a.pid.is_none(),
        },
    })
}

fn default_session_dir(pid: u32) -> PathBuf {
    PathBuf::from(format!("alloclens-live-{pid}"))
}

struct LiveSettings {
    watch: Settings,
    output_pane: bool,
}

impl std::ops::Deref for LiveSettings {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.watch
    }
}
