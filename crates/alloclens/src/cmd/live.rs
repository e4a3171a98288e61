//! `alloclens live`: glue between the command line, the watch's session (its directory and
//! results, shared with `watch`) and the `live` crate's view.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cmd::args;
use crate::cmd::watch::{one_variant, Session, Settings, MAX_INTERVAL};

#[derive(clap::Args)]
#[command(
    after_help = "Keys: q quit (ends a program live started; an attached one runs on), s sort \
    the call sites, p pause, o show or hide the program's output.\n\nExamples:\n  \
    alloclens live -- ./server --config prod.yaml\n  \
    alloclens live --output-pane -a jemalloc -- ./cache\n  \
    alloclens live --pid 4242"
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
    /// Watch a process already running (the agent loaded as by `watch --pid --profile`); quitting
    /// leaves it running
    #[arg(long, value_name = "PID", conflicts_with_all = ["allocator", "command", "output_pane"])]
    pid: Option<u32>,
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

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let settings = settings(a)?;
    // Before the directory is made: a refusal leaves nothing behind.
    live::check_terminal()?;
    let resume = match settings.pid {
        Some(pid) => earlier_session(&settings.dir, pid, settings.force)?,
        None => None,
    };
    let history = resume.as_ref().map_or(Vec::new(), |r| r.samples.clone());
    let mut session = Session::open_resuming(&settings, resume)?;
    let dir = session.dir.clone();
    let tables = dir.join(watch::AGENT_DIR);
    let options = live::LiveOptions {
        watch: session.options.clone(),
        base: session.base.clone(),
        title: match settings.pid {
            Some(pid) => format!("attached to {pid}"),
            None => settings.command.join(" "),
        },
        tables: Some(tables),
        output: match settings.pid {
            Some(_) => live::OutputShown::NotOurs,
            None => live::OutputShown::File {
                path: dir.join(watch::PROGRAM_OUTPUT),
                pane: settings.output_pane,
            },
        },
        started_here: settings.pid.is_none(),
        results_dir: dir.clone(),
        history,
    };
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    // A hang-up (the ssh session dropped, the terminal closed) ends the watch as SIGTERM does:
    // the results are written, an attached process runs on, and the next viewer has its history.
    signal_hook::flag::register(
        signal_hook::consts::SIGHUP,
        std::sync::Arc::clone(&interrupted),
    )
    .context("cannot catch SIGHUP")?;
    let mut written = None;
    let results = live::run(options, &interrupted, &mut |outcome| {
        let (results, w) = session.close(outcome);
        written = Some(w);
        results
    })?;
    let code = crate::cmd::watch::print(&results, written.unwrap_or(Ok(())), &dir)?;
    if settings.pid.is_none() {
        eprintln!(
            "alloclens: the program's output is in {}",
            dir.join(watch::PROGRAM_OUTPUT).display()
        );
    }
    Ok(code)
}

/// `live --pid PID` again: the samples of the earlier viewers of this process kept in DIR, when
/// DIR holds a watch of the same process (the pid, and a process that started before that watch:
/// not a later one that reused the pid). Another process's watch there is refused unless
/// `--force`.
fn earlier_session(dir: &Path, pid: u32, force: bool) -> anyhow::Result<Option<watch::Resume>> {
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
    if let Some(pid) = a.pid {
        watch::check_pid(pid)?;
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
            duration: None,
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
                Some(pid) => PathBuf::from(format!("alloclens-live-{pid}")),
                None => args::dated_dir("alloclens-live"),
            }),
            force: a.force,
            output_aside: a.pid.is_none(),
        },
    })
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
