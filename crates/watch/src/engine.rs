//! The watch loop: start the command (or find the process), sample its tree every interval, end
//! on its exit, the duration, or an interrupt, then the optional trim probe.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::agents::{exe_of, preloaded_agent, same_image, AgentTracker};
use crate::history::{History, WatchSample};
use crate::probes::{attach_agent, trim_probe};
pub use crate::probes::{trim_call, AttachReading, GdbReading, TrimProbe};
use crate::profiling::{ProfileSettings, Profiling, Reason};
use crate::residency::{HeapReadings, ResidencyQuote};

/// What is watched.
#[derive(Debug, Clone)]
pub enum Target {
    /// A command started by the watch, with the variables to add to its environment (the
    /// allocator variant's and the agent's, LD_PRELOAD composed).
    Command {
        argv: Vec<String>,
        env: Vec<(OsString, OsString)>,
        /// The agent's directory, when the agent is preloaded.
        agent_dir: Option<PathBuf>,
        /// Where the program's stdout and stderr go (a file made here, its stdin /dev/null), for
        /// a caller that owns the terminal (`alloclens live`); None: the terminal's, as they are.
        output: Option<PathBuf>,
    },
    /// A process already running (and its descendants).
    Pid(u32),
}

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub target: Target,
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// DIR/samples.csv; None keeps the samples in memory only.
    pub samples_csv: Option<PathBuf>,
    pub capacity: usize,
    /// At the end, ask the allocator to give free memory back, and measure what it gave.
    pub trim_probe: bool,
    /// `--pid`: load the agent into the running process (crates/attach; no debugger).
    pub attach: bool,
    /// `--profile`: the agent samples the heap; snapshots by these triggers go to this ring.
    pub profile: Option<(ProfileSettings, PathBuf)>,
    /// `--pid --profile`: where the attached agent makes its heap profile tables (DIR/agent),
    /// which outlive the attach.
    pub attach_tables: Option<PathBuf>,
    /// An earlier watch of the same process to go on with (`alloclens live --pid` again): its
    /// samples come first in the history, and the clock is its clock.
    pub resume: Option<Resume>,
}

/// The samples and the start of an earlier watch of the same process.
#[derive(Debug, Clone)]
pub struct Resume {
    pub samples: Vec<WatchSample>,
    pub started_unix_ms: u64,
}

/// Why the watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WatchEnding {
    /// The command (or the watched process) exited.
    Exited,
    /// `--duration` elapsed; the program runs on.
    Duration,
    /// Ctrl-C or SIGTERM; the program runs on unless the signal reached it too.
    Interrupted,
}

/// The command's exit, when it was ours and ended during the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// The last figures of one process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessFigures {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    pub rss: u64,
    pub pss: u64,
    pub split: procmem::SmapsSplit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<agent::Snapshot>,
    /// /proc/PID/exe at the sample: which image the snapshot must describe.
    #[serde(skip)]
    pub exe: Option<String>,
}

/// Everything the watch gathered. `samples` is the (thinned) history; `warnings` say what could
/// not be measured.
#[derive(Debug)]
pub struct WatchOutcome {
    pub root_pid: u32,
    pub started_unix_ms: u64,
    pub ending: WatchEnding,
    pub exit: Option<ProgramExit>,
    /// Whether the program still ran when the watch ended.
    pub still_running: bool,
    pub samples: Vec<WatchSample>,
    /// Samples taken in all (some may have been thinned away).
    pub samples_taken: u64,
    pub processes: Vec<ProcessFigures>,
    pub attach: Option<AttachReading>,
    pub trim: Vec<TrimProbe>,
    pub warnings: Vec<String>,
    /// What could not be written to samples.csv.
    pub write_problems: Vec<String>,
    /// alloclens's own CPU time for the watch, s.
    pub cpu_s: f64,
    /// Ticks of the interval passed without a sample (alloclens stopped, or a sample that took
    /// longer than the interval): skipped, not made up in a burst.
    pub ticks_skipped: u64,
    /// `--profile`: the heap profile snapshots kept on disk, oldest first, and how many were taken.
    pub snapshots: Vec<PathBuf>,
    pub snapshots_taken: u64,
    /// Why live bytes are missing for processes of the tree (one sentence each), when known.
    pub live_missing: Vec<String>,
    /// The heap's resident pages that hold no live block, when known (boxed: the outcome travels
    /// in enums).
    pub residency: Option<Box<ResidencyQuote>>,
}

/// Errors that stop a watch before it starts; after the start, problems become warnings.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("no process {0}: check the pid (ps -p {0})")]
    NoSuchPid(u32),
    #[error("process {pid} may not be read ({path}: permission denied): run alloclens as the process's user or as root")]
    PidUnreadable { pid: u32, path: String },
    #[error("process {0} has exited (a zombie its parent has not reaped): nothing to watch")]
    Exited(u32),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Proc(#[from] procmem::Error),
}

/// A progress report to the caller (the CLI prints it; this crate never prints).
pub enum WatchEvent<'a> {
    /// The program runs (started, or found and attached to): the root of its tree.
    Started {
        root_pid: u32,
    },
    Sample(&'a WatchSample),
    Note(String),
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Checks that `pid` exists and its memory may be read, with one sentence each. A process whose
/// main thread has exited (pthread_exit) is read through a live thread ([`procmem::process_dir`]):
/// its own /proc/PID/smaps_rollup fails (ESRCH, or EACCES for a user other than root).
pub fn check_pid(pid: u32) -> Result<(), WatchError> {
    let path = procmem::process_dir(pid).join("smaps_rollup");
    let unreadable = |path: &Path| WatchError::PidUnreadable {
        pid,
        path: path.display().to_string(),
    };
    match std::fs::File::open(&path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(WatchError::NoSuchPid(pid)),
        Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => Err(WatchError::NoSuchPid(pid)),
        // A zombie: it has exited, its parent has not reaped it yet.
        Err(_) if !procmem::is_alive(pid) => Err(WatchError::Exited(pid)),
        Err(_) => Err(unreadable(&path)),
    }
}

/// Watches as `options` say until the program exits, the duration elapses or `interrupted` is
/// set, then makes the end probes. `on_event` hears of each sample and note.
pub fn watch(
    options: &WatchOptions,
    interrupted: &AtomicBool,
    on_event: &mut dyn FnMut(WatchEvent),
) -> Result<WatchOutcome, WatchError> {
    let mut watch = Watch::start(options, on_event)?;
    while !watch.tick(interrupted, on_event) {}
    watch.after_interrupt();
    watch.end_probes(on_event);
    Ok(watch.finish())
}

/// One watch in progress: the loop of [`watch`] as a state machine, a method per phase.
struct Watch<'o> {
    options: &'o WatchOptions,
    root: u32,
    /// The watch started the command: it is our child, reaped here.
    ours: bool,
    agent_dir: Option<PathBuf>,
    /// Where the agents' heap profile tables are: the agent's directory, or for an attach the
    /// one that outlives it.
    tables_dir: Option<PathBuf>,
    sampler: procmem::TreeSampler,
    history: History,
    agents: AgentTracker,
    /// The agent loaded into a `--pid` process: its directory goes when the watch ends.
    attached: Option<agent::AttachedAgent>,
    /// `--profile`: the triggers and the ring of snapshots.
    profiling: Option<Profiling>,
    /// Which of the heap's resident pages hold no live block (glibc: walked from outside).
    heap_readings: HeapReadings,
    /// Time 0 of the samples and of `--duration`.
    start: Instant,
    /// The next tick of the interval.
    next: Instant,
    cpu_start: Duration,
    outcome: WatchOutcome,
}

impl<'o> Watch<'o> {
    /// Opens samples.csv, starts the command (or checks the process and attaches the agent).
    fn start(
        options: &'o WatchOptions,
        on_event: &mut dyn FnMut(WatchEvent),
    ) -> Result<Watch<'o>, WatchError> {
        let cpu_start = procmem::own_cpu_time();
        let mut started_unix_ms = unix_ms();
        let mut history =
            History::new(options.samples_csv.as_deref(), options.capacity).map_err(|source| {
                WatchError::Create {
                    path: options.samples_csv.clone().unwrap_or_default(),
                    source,
                }
            })?;
        // Time 0 of the samples: an earlier watch's start when going on with it.
        let mut since_start = Duration::ZERO;
        if let Some(resume) = &options.resume {
            for sample in &resume.samples {
                history.push(sample.clone());
            }
            since_start =
                Duration::from_millis(started_unix_ms.saturating_sub(resume.started_unix_ms));
            started_unix_ms = resume.started_unix_ms;
        }
        let mut attached = None;
        let mut attach_reading = None;
        let (root, ours, agent_dir) = match &options.target {
            Target::Pid(pid) => {
                check_pid(*pid)?;
                let mut dir = None;
                if options.attach {
                    let profile = attach_profile(options);
                    let (agent, reading) =
                        attach_agent(*pid, options.interval, profile.as_ref(), on_event);
                    dir = agent.as_ref().map(|a| a.dir.clone());
                    attached = agent;
                    attach_reading = Some(reading);
                }
                (*pid, false, dir)
            }
            Target::Command {
                argv,
                env,
                agent_dir,
                output,
            } => (
                spawn(argv, env, output.as_deref())?,
                true,
                agent_dir.clone(),
            ),
        };
        on_event(WatchEvent::Started { root_pid: root });
        let sampler = procmem::TreeSampler::new(
            root,
            procmem::SamplerOptions {
                include_reparented_to_self: ours,
                pss_refresh: procmem::PssRefresh::EverySample,
                ..Default::default()
            },
        )?;
        let now = Instant::now();
        let start = now.checked_sub(since_start).unwrap_or(now);
        let watch = Watch {
            options,
            root,
            ours,
            agents: AgentTracker::new(agent_dir.clone(), preloaded_agent(&options.target)),
            tables_dir: match options.target {
                Target::Pid(_) => options.attach_tables.clone(),
                Target::Command { .. } => agent_dir.clone(),
            },
            agent_dir,
            attached,
            sampler,
            history,
            profiling: options
                .profile
                .as_ref()
                .map(|(settings, dir)| Profiling::new(settings, dir.clone())),
            heap_readings: HeapReadings::new(),
            start,
            next: now,
            cpu_start,
            outcome: WatchOutcome {
                root_pid: root,
                started_unix_ms,
                ending: WatchEnding::Exited,
                exit: None,
                still_running: false,
                samples: Vec::new(),
                samples_taken: options
                    .resume
                    .as_ref()
                    .map_or(0, |r| r.samples.len() as u64),
                processes: Vec::new(),
                attach: attach_reading,
                trim: Vec::new(),
                warnings: Vec::new(),
                write_problems: Vec::new(),
                cpu_s: 0.0,
                ticks_skipped: 0,
                live_missing: Vec::new(),
                snapshots: Vec::new(),
                snapshots_taken: 0,
                residency: None,
            },
        };
        Ok(watch)
    }

    /// One tick: a sample, then the wait for the next tick. True when the watch ended (the ending
    /// is in the outcome).
    fn tick(&mut self, interrupted: &AtomicBool, on_event: &mut dyn FnMut(WatchEvent)) -> bool {
        if let Some((sample, processes)) =
            take_sample(&mut self.sampler, self.root, self.start, &mut self.agents)
        {
            on_event(WatchEvent::Sample(&sample));
            let due = self
                .profiling
                .as_mut()
                .and_then(|p| p.due(sample.t_s, sample.rss));
            let unix_ms = sample.unix_ms;
            self.heap_readings.on_sample(sample.t_s, &processes, false);
            self.history.push(sample);
            self.outcome.samples_taken += 1;
            self.outcome.processes = processes;
            if let Some(reason) = due {
                self.snapshot(reason, unix_ms, on_event);
            }
        }
        let (next, skipped) = next_tick(self.next, Instant::now(), self.options.interval);
        self.next = next;
        self.outcome.ticks_skipped += skipped;
        match self.wait_for_tick(interrupted) {
            Some(ending) => {
                self.outcome.ending = ending;
                true
            }
            None => false,
        }
    }

    /// Waits for the next tick, watching for the end: the program's exit, an interrupt, the
    /// duration.
    fn wait_for_tick(&mut self, interrupted: &AtomicBool) -> Option<WatchEnding> {
        loop {
            if self.ours {
                if let Some(status) = reap(self.root) {
                    self.outcome.exit = Some(status);
                    return Some(WatchEnding::Exited);
                }
            } else if !procmem::is_alive(self.root) {
                return Some(WatchEnding::Exited);
            }
            if interrupted.load(Ordering::Relaxed) {
                return Some(WatchEnding::Interrupted);
            }
            if self
                .options
                .duration
                .is_some_and(|d| self.start.elapsed() >= d)
            {
                return Some(WatchEnding::Duration);
            }
            let now = Instant::now();
            if now >= self.next {
                return None;
            }
            std::thread::sleep((self.next - now).min(Duration::from_millis(20)));
        }
    }

    /// Ctrl-C from the terminal reaches the command too (same process group): give it a moment
    /// to exit so its exit status and final snapshot are kept. Then notes whether it still runs.
    fn after_interrupt(&mut self) {
        if self.outcome.ending == WatchEnding::Interrupted && self.ours {
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(2) {
                if let Some(status) = reap(self.root) {
                    self.outcome.exit = Some(status);
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.outcome.still_running = self.outcome.exit.is_none() && procmem::is_alive(self.root);
    }

    /// What is read once the watch ended: the agent's final snapshots and what it could not
    /// measure, the trim probe; then an attached agent is let go.
    fn end_probes(&mut self, on_event: &mut dyn FnMut(WatchEvent)) {
        // The heap as the watch leaves it, before a trim probe changes it.
        if self.outcome.still_running {
            let t_s = self.start.elapsed().as_secs_f64();
            self.heap_readings
                .on_sample(t_s, &self.outcome.processes, true);
        }
        if self.profiling.is_some() {
            self.snapshot(Reason::End, unix_ms(), on_event);
        }
        if let Some(dir) = self.agent_dir.clone() {
            self.final_snapshots(&dir);
            self.agent_warnings(&dir);
            if self.options.trim_probe {
                if self.outcome.still_running {
                    let processes = self.outcome.processes.clone();
                    trim_probe(&dir, &processes, self.options, &mut self.outcome, on_event);
                } else {
                    self.outcome
                        .warnings
                        .push("trim probe not made: the program had exited".into());
                }
            }
        }
        self.attached_profile_warning();
        // Its directory removed, the attached agent's thread ends at its next interval.
        self.attached.take();
        let root = self.root;
        if !self.ours && self.outcome.ending == WatchEnding::Exited {
            self.outcome.warnings.push(format!(
                "process {root} exited during the watch: the figures up to then are kept"
            ));
        }
    }

    /// A heap profile snapshot of the processes of the last sample (the tables of their current
    /// images) into the ring. A failure is a note: the watch goes on.
    fn snapshot(&mut self, reason: Reason, unix_ms: u64, on_event: &mut dyn FnMut(WatchEvent)) {
        let (Some(profiling), Some(tables_dir)) = (self.profiling.as_mut(), &self.tables_dir)
        else {
            return;
        };
        let pids: Vec<u32> = self.outcome.processes.iter().map(|p| p.pid).collect();
        match profiling.snapshot(reason, unix_ms, tables_dir, &pids) {
            Ok(true) => {
                self.outcome.snapshots = profiling.kept().to_vec();
                self.outcome.snapshots_taken += 1;
            }
            Ok(false) => {}
            Err(e) => on_event(WatchEvent::Note(format!(
                "heap profile snapshot ({}) not written: {e}",
                reason.name()
            ))),
        }
    }

    /// `--pid --profile`: why the attached process has no heap profile table, when it has none.
    fn attached_profile_warning(&mut self) {
        let (Some(agent), Some(tables)) = (&self.attached, &self.tables_dir) else {
            return;
        };
        if self.options.profile.is_none()
            || !crate::profiling::tables_of(tables, &[self.root]).is_empty()
        {
            return;
        }
        let why = agent.profile_refused.clone().unwrap_or_else(|| {
            "the agent could not make its table or patch the process's GOT (a full disk? a \
             statically linked allocator?)"
                .into()
        });
        self.outcome
            .warnings
            .push(format!("no heap profile of process {}: {why}", self.root));
    }

    /// The final snapshots (written at exit) of the processes seen last, when they describe the
    /// image seen then (not one an exec replaced). A program shorter than one interval has only
    /// this one.
    fn final_snapshots(&mut self, dir: &Path) {
        let Ok(snaps) = agent::read_snapshots(dir) else {
            return;
        };
        let root = self.root;
        let processes = &mut self.outcome.processes;
        // A command that ended before the first sample: its root's final snapshot is all there
        // is of it.
        if processes.is_empty() {
            if let Some(s) = snaps.iter().find(|s| s.pid == root && s.is_final) {
                processes.push(ProcessFigures {
                    pid: root,
                    ppid: s.ppid,
                    comm: s.exe.rsplit('/').next().unwrap_or_default().to_string(),
                    rss: s.rss,
                    pss: 0,
                    split: procmem::SmapsSplit::default(),
                    snapshot: None,
                    exe: Some(s.exe.clone()),
                });
            }
        }
        for p in processes.iter_mut() {
            if let Some(s) = snaps
                .iter()
                .find(|s| s.pid == p.pid && s.is_final && same_image(s, p.exe.as_deref()))
            {
                p.snapshot = Some(s.clone());
                self.agents.seen = true;
            }
        }
    }

    /// What the agent could not measure, and why, as warnings.
    fn agent_warnings(&mut self, dir: &Path) {
        let outcome = &mut self.outcome;
        outcome.warnings.extend(self.agents.stopped_warnings());
        outcome.live_missing = self.agents.missing_reasons();
        if self.agents.seen && !outcome.live_missing.is_empty() {
            outcome.warnings.push(format!(
                "live bytes are not measured for {}",
                outcome.live_missing.join("; ")
            ));
        }
        if !self.agents.seen {
            let why = if outcome.live_missing.is_empty() {
                "a static or set-ID program, or one that resets LD_PRELOAD?".to_string()
            } else {
                outcome.live_missing.join("; ")
            };
            outcome.warnings.push(format!(
                "the agent wrote no snapshot in {}: live bytes and allocator statistics are missing ({why})",
                dir.display()
            ));
        }
    }

    fn finish(mut self) -> WatchOutcome {
        self.outcome.write_problems = self.history.problems().to_vec();
        self.outcome.samples = self.history.rows().to_vec();
        self.outcome.residency = self.heap_readings.quote().map(Box::new);
        self.outcome.cpu_s = (procmem::own_cpu_time().saturating_sub(self.cpu_start)).as_secs_f64();
        self.outcome
    }
}

/// The heap profile an attach starts: `--profile` with the directory of its tables.
fn attach_profile(options: &WatchOptions) -> Option<agent::AttachProfile> {
    let ((settings, _), table_dir) = options
        .profile
        .as_ref()
        .zip(options.attach_tables.as_ref())?;
    Some(agent::AttachProfile {
        sample_bytes: settings.sample_bytes,
        table_dir: table_dir.clone(),
    })
}

/// Starts the command with its added environment. Orphans of the command stay in the tree (and
/// are reaped here) while we live; if we die, they go to init like any orphan.
fn spawn(
    argv: &[String],
    env: &[(OsString, OsString)],
    output: Option<&Path>,
) -> Result<u32, WatchError> {
    let _ = procmem::become_child_subreaper();
    // The terminal's stdin, stdout and stderr, or a file: never pipes of ours, so the program
    // never blocks on us nor gets SIGPIPE when we are gone.
    let (stdin, stdout, stderr) = match output {
        None => (Stdio::inherit(), Stdio::inherit(), Stdio::inherit()),
        Some(path) => {
            let create = |source| WatchError::Create {
                path: path.to_path_buf(),
                source,
            };
            // Made here, never an existing file opened: alloclens writes only what it created.
            let file = std::fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .open(path)
                .map_err(create)?;
            let again = file.try_clone().map_err(create)?;
            (Stdio::null(), Stdio::from(file), Stdio::from(again))
        }
    };
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|source| WatchError::Spawn {
            program: argv[0].clone(),
            source,
        })?;
    Ok(child.id())
}

/// The tick after `next` (the one just due), and how many ticks were skipped: ticks already past
/// at `now` (alloclens was stopped, or the sample took longer than the interval) are skipped, not
/// taken in a burst.
fn next_tick(next: Instant, now: Instant, interval: Duration) -> (Instant, u64) {
    let next = next + interval;
    if next > now {
        return (next, 0);
    }
    let behind = (now - next).as_nanos() / interval.as_nanos().max(1);
    let skip = behind as u32 + 1;
    (next + interval * skip, u64::from(skip))
}

/// Reaps every exited child (orphans reparented to us included); the root's status if it was one.
fn reap(root: u32) -> Option<ProgramExit> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG only reads our children's state.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid as u32 == root {
            found = Some(if libc::WIFEXITED(status) {
                ProgramExit {
                    code: Some(libc::WEXITSTATUS(status)),
                    signal: None,
                }
            } else {
                ProgramExit {
                    code: None,
                    signal: Some(libc::WTERMSIG(status)),
                }
            });
        }
    }
}

fn sum(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.fold(None, |acc, v| match (acc, v) {
        (a, None) => a,
        (None, Some(v)) => Some(v),
        (Some(a), Some(v)) => Some(a + v),
    })
}

fn take_sample(
    sampler: &mut procmem::TreeSampler,
    root: u32,
    start: Instant,
    agents: &mut AgentTracker,
) -> Option<(WatchSample, Vec<ProcessFigures>)> {
    let tree = sampler.sample().ok()?;
    // The command has exited (its last process with it): that is not a sample of it.
    if tree.processes.is_empty() {
        return None;
    }
    let t_s = tree.at.saturating_duration_since(start).as_secs_f64();
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut split_total = procmem::SmapsSplit::default();
    let snaps = agents
        .dir
        .as_deref()
        .and_then(|d| agent::read_snapshots(d).ok())
        .unwrap_or_default();
    // The agent leaves one file per process; those of descendants that are gone are removed, so
    // a program that forks short workers for weeks does not fill the directory (their figures
    // are in the samples already).
    if let Some(dir) = &agents.dir {
        for s in snaps
            .iter()
            .filter(|s| s.pid != root && !procmem::is_alive(s.pid))
        {
            let _ = std::fs::remove_file(dir.join(format!("{}.snap", s.pid)));
        }
    }
    let pids: Vec<u32> = tree.processes.iter().map(|p| p.pid).collect();
    agents.prune(&pids);
    let mut processes = Vec::with_capacity(tree.processes.len());
    let mut rss_unmeasured = 0;
    // A process caught exiting (its address space gone between the RSS read and the smaps read)
    // is left out of the sample: its figures would be half of one and half of the other.
    let mut exiting = false;
    for p in &tree.processes {
        let split = match procmem::smaps_split(p.pid) {
            Ok(split) if split.rss() > 0 || p.rss == 0 => split,
            _ => {
                exiting = true;
                continue;
            }
        };
        split_total.add(&split);
        let exe = exe_of(p.pid);
        let snapshot = if agents.dir.is_some() {
            agents.pick(&snaps, p.pid, &p.comm, exe.as_deref(), now_ns, t_s)
        } else {
            None
        };
        if snapshot.is_none() {
            rss_unmeasured += p.rss;
        }
        processes.push(ProcessFigures {
            pid: p.pid,
            ppid: p.ppid,
            comm: p.comm.clone(),
            rss: p.rss,
            pss: p.pss,
            split,
            snapshot,
            exe,
        });
    }
    if processes.is_empty() {
        return None;
    }
    let live: Vec<&agent::Snapshot> = processes
        .iter()
        .filter_map(|p| p.snapshot.as_ref())
        .collect();
    let stats =
        |f: fn(&agent::AllocatorStats) -> Option<u64>| sum(live.iter().map(|s| f(&s.allocator)));
    let sample = WatchSample {
        t_s,
        unix_ms: unix_ms(),
        processes: processes.len() as u32,
        rss: if exiting {
            processes.iter().map(|p| p.rss).sum()
        } else {
            tree.total.rss
        },
        pss: if exiting {
            processes.iter().map(|p| p.pss).sum()
        } else {
            tree.total.pss
        },
        heap: split_total.heap,
        file: split_total.file,
        stack: split_total.stack,
        other: split_total.other,
        agent_processes: live.len() as u32,
        live_bytes: sum(live.iter().map(|s| s.live_bytes())),
        live_blocks: sum(live.iter().map(|s| s.live_blocks())),
        handed_out: stats(|a| a.handed_out),
        free_resident: stats(|a| a.free_resident),
        returned: stats(|a| a.returned),
        metadata: stats(|a| a.metadata),
        heap_total: stats(|a| a.heap_total),
        free_chunks: stats(|a| a.free_chunks),
        rss_unmeasured: agents.dir.is_some().then_some(rss_unmeasured),
        cpu_s: procmem::cpu_seconds(&pids),
    };
    Some((sample, processes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The watch reaps any exited child: tests that start commands run one at a time.
    static CHILDREN: Mutex<()> = Mutex::new(());

    /// A zombie is said to have exited, not to be unreadable (its smaps_rollup fails with ESRCH).
    #[test]
    fn a_zombie_pid_is_refused_as_exited() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not waited for: a zombie once it has exited.
        let deadline = Instant::now() + Duration::from_secs(10);
        while procmem::read_stat(pid).map_or(true, |s| s.state != b'Z') {
            assert!(
                Instant::now() < deadline,
                "process {pid} never became a zombie"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let err = check_pid(pid).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "process {pid} has exited (a zombie its parent has not reaped): nothing to watch"
            )
        );
        child.wait().unwrap();
        assert!(check_pid(std::process::id()).is_ok());
    }

    fn options(argv: &[&str], duration: Option<Duration>) -> WatchOptions {
        WatchOptions {
            target: Target::Command {
                argv: argv.iter().map(|s| s.to_string()).collect(),
                env: Vec::new(),
                agent_dir: None,
                output: None,
            },
            interval: Duration::from_millis(50),
            duration,
            samples_csv: None,
            capacity: 100,
            trim_probe: false,
            attach: false,
            profile: None,
            attach_tables: None,
            resume: None,
        }
    }

    /// Ticks until the watch ends; the number of ticks.
    fn run_to_end(watch: &mut Watch, interrupted: &AtomicBool) -> u32 {
        let mut ticks = 1;
        while !watch.tick(interrupted, &mut |_| {}) {
            ticks += 1;
            assert!(ticks < 200, "the watch never ended");
        }
        ticks
    }

    #[test]
    fn ticks_already_past_are_skipped() {
        let t0 = Instant::now();
        let interval = Duration::from_millis(100);
        assert_eq!(next_tick(t0, t0, interval), (t0 + interval, 0));
        // 250 ms late: the ticks at 100 and 200 are skipped, the next is at 300.
        let now = t0 + Duration::from_millis(250);
        assert_eq!(next_tick(t0, now, interval), (t0 + interval * 3, 2));
        // Exactly on a tick: that one is past too.
        let now = t0 + interval;
        assert_eq!(next_tick(t0, now, interval), (t0 + interval * 2, 1));
    }

    #[test]
    fn a_command_is_watched_to_its_exit_and_its_status_kept() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let options = options(&["sh", "-c", "sleep 0.2; exit 3"], None);
        let mut watch = Watch::start(&options, &mut |_| {}).unwrap();
        assert!(procmem::is_alive(watch.root));
        let ticks = run_to_end(&mut watch, &AtomicBool::new(false));
        assert!(ticks >= 2, "{ticks} ticks");
        watch.after_interrupt();
        watch.end_probes(&mut |_| {});
        let outcome = watch.finish();
        assert_eq!(outcome.ending, WatchEnding::Exited);
        let exit = ProgramExit {
            code: Some(3),
            signal: None,
        };
        assert_eq!(outcome.exit, Some(exit));
        assert!(!outcome.still_running);
        assert!(outcome.samples_taken >= 1);
        assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    }

    #[test]
    fn after_an_interrupt_the_command_gets_a_grace_to_exit() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let options = options(&["sleep", "0.3"], None);
        let mut watch = Watch::start(&options, &mut |_| {}).unwrap();
        assert_eq!(run_to_end(&mut watch, &AtomicBool::new(true)), 1);
        assert_eq!(watch.outcome.ending, WatchEnding::Interrupted);
        assert_eq!(watch.outcome.exit, None);
        // sleep did not get the signal: it ends on its own within the grace.
        watch.after_interrupt();
        let exit = ProgramExit {
            code: Some(0),
            signal: None,
        };
        assert_eq!(watch.outcome.exit, Some(exit));
        assert!(!watch.outcome.still_running);
    }

    #[test]
    fn the_duration_ends_the_watch_and_the_command_runs_on() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let options = options(&["sleep", "30"], Some(Duration::from_millis(200)));
        let mut watch = Watch::start(&options, &mut |_| {}).unwrap();
        let root = watch.root;
        run_to_end(&mut watch, &AtomicBool::new(false));
        watch.after_interrupt();
        let outcome = watch.finish();
        assert_eq!(outcome.ending, WatchEnding::Duration);
        assert!(outcome.still_running);
        assert_eq!(outcome.exit, None);
        // SAFETY: kill and waitpid on our own child.
        unsafe {
            libc::kill(root as i32, libc::SIGKILL);
            libc::waitpid(root as i32, std::ptr::null_mut(), 0);
        }
    }

    /// Going on with an earlier watch: its samples first, then the new ones on its clock.
    #[test]
    fn a_resumed_watch_keeps_the_earlier_samples_and_their_clock() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let mut options = options(&["sleep", "0.2"], None);
        let earlier: Vec<WatchSample> = (0..3)
            .map(|i| WatchSample {
                t_s: f64::from(i),
                rss: 1 << 20,
                ..Default::default()
            })
            .collect();
        options.resume = Some(Resume {
            samples: earlier.clone(),
            started_unix_ms: unix_ms() - 60_000,
        });
        let mut watch = Watch::start(&options, &mut |_| {}).unwrap();
        run_to_end(&mut watch, &AtomicBool::new(false));
        let outcome = watch.finish();
        assert_eq!(outcome.samples[..3], earlier[..]);
        let new = &outcome.samples[3..];
        assert!(!new.is_empty());
        // A minute after the earlier watch's start, not at 0.
        assert!(new.iter().all(|s| s.t_s >= 59.0), "{new:?}");
        assert_eq!(outcome.samples_taken, outcome.samples.len() as u64);
        assert_eq!(
            outcome.started_unix_ms,
            options.resume.unwrap().started_unix_ms
        );
    }

    /// `live`'s program output: stdout and stderr in a file the watch makes, never one that was
    /// there (it is not replaced).
    #[test]
    fn the_output_goes_to_a_new_file_and_an_existing_one_is_left_alone() {
        let _one = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("program.out");
        let mut options = options(&["sh", "-c", "echo out; echo err >&2; cat"], None);
        if let Target::Command { output, .. } = &mut options.target {
            *output = Some(path.clone());
        }
        let mut watch = Watch::start(&options, &mut |_| {}).unwrap();
        // `cat` reads /dev/null: it ends at once instead of waiting for a terminal.
        run_to_end(&mut watch, &AtomicBool::new(false));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "out\nerr\n");
        let err = Watch::start(&options, &mut |_| {}).err().unwrap();
        assert!(matches!(err, WatchError::Create { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "out\nerr\n");
    }

    #[test]
    fn a_command_that_cannot_start_is_an_error() {
        let options = options(&["/nonexistent/program"], None);
        let err = Watch::start(&options, &mut |_| {}).err().unwrap();
        assert!(matches!(err, WatchError::Spawn { .. }), "{err}");
    }
}
