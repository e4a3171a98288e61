//! `alloclens watch`: a program's memory over minutes to weeks, and why its RSS grows.
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use watch::{Target, WatchEnding, WatchEvent, WatchOptions, WatchResults};

use crate::cmd::args;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    alloclens watch --duration 2h -o venice -- ./server --config prod.yaml\n  \
    alloclens watch -a jemalloc:dirty_decay_ms=1000 --trim-probe -o w -- ./cache\n  \
    alloclens watch --pid 4242 --duration 10m -o w")]
pub struct Args {
    /// The allocator variant to run the command under, one (as in `run`: jemalloc,
    /// glibc:arena_max=2, NAME=PATH; to compare several, `run -a A,B`); default: the program's own
    #[arg(
        short = 'a',
        long = "allocator",
        visible_alias = "allocators",
        value_name = "SPEC"
    )]
    allocator: Option<String>,
    /// Time between samples (e.g. 500ms, 1s, 1m; at most 1h)
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    interval: String,
    /// End the watch after this long (e.g. 30s, 2h, 7d; at most 3650d); the program runs on. Default:
    /// until the program exits or Ctrl-C
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// At the end, ask the allocator to give its free memory back once (malloc_trim(0), jemalloc's
    /// arena purge, ...) and measure what it gave: what retention costs
    #[arg(long)]
    trim_probe: bool,
    /// Watch a process already running (and its descendants) instead of starting a command
    #[arg(long, value_name = "PID", conflicts_with_all = ["allocator", "command"])]
    pid: Option<u32>,
    /// With --pid: do not load the agent into the process (its live bytes and allocator statistics
    /// are then not read: /proc figures only)
    #[arg(long, requires = "pid", alias = "no-gdb")]
    no_attach: bool,
    /// Sample the heap by call site as the program runs (an allocation of n bytes is sampled with
    /// probability 1-exp(-n/SIZE)): a table of the live sampled blocks that `alloclens snapshot`
    /// reads at any moment, even after the program died. With --pid, the allocations made from
    /// the attach to the end of the watch (the agent's hooks patched into the process's GOT, put
    /// back at the end). SIZE is the mean bytes between samples [default: 512KiB, as jemalloc
    /// and Go]
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "512KiB",
          conflicts_with = "no_attach")]
    profile: Option<String>,
    /// With --profile: a snapshot (pprof file in DIR/snapshots) every DURATION (e.g. 10m, 1h)
    #[arg(long, value_name = "DURATION", requires = "profile")]
    snapshot_every: Option<String>,
    /// With --profile: a snapshot at each new high-water mark of the RSS (5 % above the last one
    /// that made a snapshot)
    #[arg(long, requires = "profile")]
    snapshot_at_peak: bool,
    /// With --profile: a snapshot when the RSS rises past SIZE (e.g. 2GiB; again after it fell
    /// below)
    #[arg(long, value_name = "SIZE", requires = "profile")]
    snapshot_above: Option<String>,
    /// With --profile: a snapshot when alloclens receives this signal (USR1, USR2, HUP, ...: `kill
    /// -USR2 <alloclens's pid>`; the program's own signals are left alone)
    #[arg(long, value_name = "SIGNAL", requires = "profile")]
    snapshot_on_signal: Option<String>,
    /// With --profile: the snapshots kept in DIR/snapshots (the oldest goes first); one is always
    /// taken at the end of the watch
    #[arg(long, value_name = "N", default_value_t = watch::profiling::DEFAULT_KEEP,
          requires = "profile")]
    snapshots_kept: usize,
    /// Output directory [default: alloclens-watch-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Replace an earlier watch's files in the output directory (only those: a directory holding
    /// anything else, in agent/ too, is refused)
    #[arg(long)]
    force: bool,
    /// The command to watch, after `--`. It keeps alloclens's stdin, stdout and stderr
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "pid")]
    command: Vec<String>,
}

pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(3600);
const AGENT_MIN_INTERVAL: Duration = Duration::from_millis(100);
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 86_400);
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings::from_args(a)?;
    let mut session = Session::open(&settings)?;
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the Ctrl-C handler")?;
    let outcome = watch::watch(&session.options, &interrupted, &mut progress())?;
    let profiled = session.options.profile.is_some().then_some((
        outcome.snapshots_taken,
        outcome.snapshots.len(),
        outcome.root_pid,
    ));
    let (results, written) = session.close(outcome);
    let dir = &session.dir;
    let code = print(&results, written, dir)?;
    if let Some((taken, kept, pid)) = profiled {
        eprintln!(
            "alloclens: heap profile: {taken} snapshots taken, the last {kept} in {} (go tool pprof -top FILE); `alloclens snapshot {}` reads the profile now{}",
            dir.join(watch::profiling::SNAPSHOTS_DIR).display(),
            dir.display(),
            if results.still_running { format!(" while pid {pid} runs") } else { String::new() }
        );
    }
    Ok(code)
}

/// A watch's directory and options, from its start (watch.json written, saying what is watched)
/// to its end (the results assembled and written): shared by `watch` and `live`.
pub(crate) struct Session {
    prepared: watch::WatchDirectory,
    pub dir: PathBuf,
    pub options: WatchOptions,
    pub base: WatchResults,
    variant_allocator: Option<String>,
}

impl Session {
    pub(crate) fn open(settings: &Settings) -> anyhow::Result<Session> {
        Session::open_resuming(settings, None)
    }

    /// A session that goes on with an earlier watch of the same process in its directory
    /// (`live --pid` again), or a new one.
    pub(crate) fn open_resuming(
        settings: &Settings,
        resume: Option<watch::Resume>,
    ) -> anyhow::Result<Session> {
        let prepared = match resume {
            Some(_) => watch::WatchDirectory::reopen(&settings.dir)?,
            None => watch::WatchDirectory::prepare(&settings.dir, settings.force)?,
        };
        let dir = settings
            .dir
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", settings.dir.display()))?;
        let (mut options, base) = settings.watch_options(&dir)?;
        options.resume = resume;
        // Written first, so a watch killed later still says what it watched; replaced at the end.
        watch::write_results(&dir, &base)
            .with_context(|| format!("cannot write {}", dir.join(watch::WATCH_JSON).display()))?;
        for w in &base.warnings {
            eprintln!("alloclens: warning: {w}");
        }
        Ok(Session {
            prepared,
            dir,
            options,
            base,
            variant_allocator: settings.variant.as_ref().map(|v| v.allocator.clone()),
        })
    }

    /// The results of the watch that ran, written to watch.json (`written` says whether they
    /// were).
    pub(crate) fn close(
        &mut self,
        outcome: watch::WatchOutcome,
    ) -> (WatchResults, std::io::Result<()>) {
        // The watch ran: from here on, its directory stays whatever happens.
        self.prepared.keep();
        let results = watch::assemble(
            self.base.clone(),
            outcome,
            &args::installed_allocators(),
            self.variant_allocator.as_deref(),
        );
        let written = watch::write_results(&self.dir, &results);
        (results, written)
    }
}

/// The command line, checked: what to watch, how, and where the files go.
pub(crate) struct Settings {
    pub interval: Duration,
    pub duration: Option<Duration>,
    pub variant: Option<allocators::Variant>,
    pub pid: Option<u32>,
    pub command: Vec<String>,
    pub trim_probe: bool,
    pub attach: bool,
    pub profile: Option<watch::profiling::ProfileSettings>,
    pub dir: PathBuf,
    pub force: bool,
    /// The program's stdout and stderr to DIR/program.out (`live`: the terminal is the view's).
    pub output_aside: bool,
}

impl Settings {
    fn from_args(a: Args) -> anyhow::Result<Settings> {
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
            watch::check_pid(pid)?;
        } else {
            args::check_command_exists(&a.command[0])?;
        }
        let variant = a.allocator.as_deref().map(one_variant).transpose()?;
        let profile = a
            .profile
            .as_deref()
            .map(|size| profile_settings(size, &a))
            .transpose()?;
        Ok(Settings {
            interval,
            duration,
            variant,
            pid: a.pid,
            command: a.command,
            trim_probe: a.trim_probe,
            attach: a.pid.is_some() && !a.no_attach,
            profile,
            dir: a
                .output
                .unwrap_or_else(|| args::dated_dir("alloclens-watch")),
            force: a.force,
            output_aside: false,
        })
    }

    /// The watch's options and watch.json as known before the start. A command gets the agent
    /// preloaded, its snapshots in `dir`/agent; when it cannot be, that is a warning.
    fn watch_options(&self, dir: &Path) -> anyhow::Result<(WatchOptions, WatchResults)> {
        let mut base = WatchResults {
            schema_version: watch::results::SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            created: chrono::Local::now().to_rfc3339(),
            command: self.command.clone(),
            pid: self.pid,
            variant: self.variant.as_ref().map(|v| v.label.clone()),
            interval_s: self.interval.as_secs_f64(),
            duration_s: self.duration.map(|d| d.as_secs_f64()),
            ..Default::default()
        };
        // --pid --profile: the attached agent's tables, kept after the attach in DIR/agent.
        let mut attach_tables = None;
        let target = match self.pid {
            Some(pid) => {
                if self.attach && self.profile.is_some() {
                    let tables = dir.join(watch::AGENT_DIR);
                    std::fs::create_dir_all(&tables)
                        .with_context(|| format!("cannot create {}", tables.display()))?;
                    attach_tables = Some(tables);
                }
                Target::Pid(pid)
            }
            None => {
                let agent_dir = dir.join(watch::AGENT_DIR);
                std::fs::create_dir_all(&agent_dir)
                    .with_context(|| format!("cannot create {}", agent_dir.display()))?;
                let profile_bytes = self.profile.as_ref().map(|p| p.sample_bytes);
                let (env, agent) = environment(
                    self.variant.as_ref(),
                    &agent_dir,
                    self.interval,
                    profile_bytes,
                );
                if let Err(e) = &agent {
                    base.warnings.push(format!(
                        "the agent cannot be preloaded ({e}): live bytes and allocator statistics are not measured, /proc figures only"
                    ));
                }
                Target::Command {
                    argv: self.command.clone(),
                    env,
                    agent_dir: agent.ok().map(|_| agent_dir),
                    output: self.output_aside.then(|| dir.join(watch::PROGRAM_OUTPUT)),
                }
            }
        };
        let options = WatchOptions {
            target,
            interval: self.interval,
            duration: self.duration,
            samples_csv: Some(dir.join(watch::SAMPLES_CSV)),
            capacity: watch::DEFAULT_CAPACITY,
            trim_probe: self.trim_probe,
            attach: self.attach,
            profile: self
                .profile
                .clone()
                .map(|p| (p, dir.join(watch::profiling::SNAPSHOTS_DIR))),
            attach_tables,
            resume: None,
        };
        if options.profile.is_some() {
            let ring = dir.join(watch::profiling::SNAPSHOTS_DIR);
            std::fs::create_dir_all(&ring)
                .with_context(|| format!("cannot create {}", ring.display()))?;
        }
        Ok((options, base))
    }
}

/// On a terminal, one line a minute says the watch is alive (the program shares the terminal, so
/// no progress bar redrawn over its output); notes always.
fn progress() -> impl FnMut(WatchEvent<'_>) {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_line: Option<f64> = None;
    move |event| match event {
        WatchEvent::Started { .. } => {}
        WatchEvent::Note(text) => eprintln!("alloclens: {text}"),
        WatchEvent::Sample(s) if tty && last_line.is_none_or(|t| s.t_s - t >= 60.0) => {
            last_line = Some(s.t_s);
            let live = s.live_bytes.map_or(String::new(), |l| {
                format!(", live {}", trace::human_bytes(l))
            });
            let free = s.free_resident.map_or(String::new(), |f| {
                format!(", allocator free {}", trace::human_bytes(f))
            });
            eprintln!(
                "alloclens: watching for {:.0} s: RSS {}, heap {}{live}{free}",
                s.t_s,
                trace::human_bytes(s.rss),
                trace::human_bytes(s.heap)
            );
        }
        WatchEvent::Sample(_) => {}
    }
}

/// The summary on stdout, then the warnings, what could not be written (watch.json at the end,
/// `written`, among them) and where the results are, on stderr.
pub(crate) fn print(
    results: &WatchResults,
    written: std::io::Result<()>,
    dir: &Path,
) -> anyhow::Result<ExitCode> {
    let mut problems = results.incomplete_files.clone();
    if let Err(e) = written {
        problems.push(format!(
            "cannot write {}: {e}",
            dir.join(watch::WATCH_JSON).display()
        ));
    }
    print_summary(results)?;
    for w in &results.warnings {
        eprintln!("alloclens: warning: {w}");
    }
    for p in &problems {
        eprintln!("alloclens: error: {p}");
    }
    eprintln!("alloclens: results in {}", dir.display());
    Ok(exit_code(results, !problems.is_empty()))
}

/// `-a SPEC`: one variant. A list (`glibc,jemalloc`, which `run` compares) is refused with the
/// ways to get what was meant, rather than read as one unknown allocator's name.
pub(crate) fn one_variant(spec: &str) -> anyhow::Result<allocators::Variant> {
    let list = allocators::split_variant_list(spec);
    if list.len() > 1 {
        bail!(
            "watch takes one allocator variant, -a '{spec}' gives {} ({}): run one watch per variant (each with its own -o), or compare them with `alloclens run -a {spec}`",
            list.len(),
            list.join(", ")
        );
    }
    Ok(allocators::parse_variant(spec)?)
}

/// The summary on stdout; a reader that went away (`| head`) is not an error.
fn print_summary(results: &WatchResults) -> anyhow::Result<()> {
    let text = report::render_watch_summary(results);
    let mut stdout = super::stdout();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// As `record`: the command's status when it ended during the watch (or in the grace after an
/// interrupt); 130 after Ctrl-C with the program still running; 1 when a file misses something.
fn exit_code(results: &WatchResults, problems: bool) -> ExitCode {
    if problems {
        return ExitCode::FAILURE;
    }
    match (results.ending, results.exit) {
        (_, Some(e)) => match (e.code, e.signal) {
            (Some(c), _) => ExitCode::from(c.clamp(0, 255) as u8),
            (_, Some(s)) => ExitCode::from((128 + s).clamp(0, 255) as u8),
            _ => ExitCode::SUCCESS,
        },
        (Some(WatchEnding::Interrupted), None) => ExitCode::from(130),
        _ => ExitCode::SUCCESS,
    }
}

/// The command's added environment: the variant's variables, and the agent's with LD_PRELOAD
/// composed (agent first, then the allocator's library, then what was preloaded already).
fn environment(
    variant: Option<&allocators::Variant>,
    agent_dir: &Path,
    interval: Duration,
    profile_bytes: Option<u64>,
) -> (Vec<(OsString, OsString)>, Result<(), agent::AgentError>) {
    let inherited = std::env::var_os("LD_PRELOAD");
    let mut env = variant
        .map(|v| v.environment(inherited.as_deref()))
        .unwrap_or_default();
    let config = agent::AgentConfig {
        dir: agent_dir.to_path_buf(),
        // Reading the allocator's statistics takes its locks (glibc's malloc_info walks every
        // arena): never more often than 10 times a second, whatever --interval says.
        interval: interval.max(AGENT_MIN_INTERVAL),
        profile_bytes,
    };
    let allocator_preload = env
        .iter()
        .find(|(k, _)| k == "LD_PRELOAD")
        .map(|(_, v)| v.clone())
        .or(inherited);
    match config.preload(allocator_preload.as_deref()) {
        Ok(preload) => {
            env.retain(|(k, _)| k != "LD_PRELOAD");
            env.push(("LD_PRELOAD".into(), preload));
            env.extend(config.env());
            (env, Ok(()))
        }
        Err(e) => (env, Err(e)),
    }
}

/// `--profile[=SIZE]` and its triggers. The signal's handler only sets a flag the watch reads at
/// its next sample.
fn profile_settings(size: &str, a: &Args) -> anyhow::Result<watch::profiling::ProfileSettings> {
    let sample_bytes = allocators::settings::parse_size(size.trim())
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            anyhow::anyhow!("--profile: '{size}' is not a size (e.g. 512KiB, 1MiB, 65536)")
        })?;
    let every = a
        .snapshot_every
        .as_deref()
        .map(|d| args::duration(d, "--snapshot-every", MAX_DURATION))
        .transpose()?;
    let above = a
        .snapshot_above
        .as_deref()
        .map(|s| {
            allocators::settings::parse_size(s.trim()).ok_or_else(|| {
                anyhow::anyhow!("--snapshot-above: '{s}' is not a size (e.g. 2GiB, 512MiB)")
            })
        })
        .transpose()?;
    let signal = match a.snapshot_on_signal.as_deref() {
        None => None,
        Some(name) => {
            let number = snapshot_signal(name)?;
            let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            signal_hook::flag::register(number, std::sync::Arc::clone(&flag))
                .with_context(|| format!("cannot catch SIG{name}"))?;
            Some(flag)
        }
    };
    if a.snapshots_kept == 0 {
        bail!("--snapshots-kept must be at least 1");
    }
    Ok(watch::profiling::ProfileSettings {
        sample_bytes,
        triggers: watch::profiling::Triggers {
            every,
            at_peak: a.snapshot_at_peak,
            above,
            signal,
        },
        keep: a.snapshots_kept,
    })
}

/// The signal `--snapshot-on-signal` names: one alloclens may catch without changing what the
/// watch does with the others (INT and TERM end it; CHLD, KILL and STOP are not the user's).
fn snapshot_signal(name: &str) -> anyhow::Result<i32> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    let number = match bare {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        _ => bail!(
            "--snapshot-on-signal: '{name}' cannot be used (USR1, USR2, HUP, WINCH or URG: INT and TERM end the watch)"
        ),
    };
    Ok(number)
}
