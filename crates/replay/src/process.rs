//! One replay process: start the driver with the variant's allocator preloaded, wait for it (with
//! the timeout), and read back what it measured.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::measure::{self, Figures, PhaseFigures, Sample, Span};
use crate::plan::{ImagePlan, LargeBlocks, Skipped};
use crate::shared::Image;
use crate::ReplayOptions;

/// How a replay process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    Ok,
    Exit(i32),
    Signal(i32),
    Timeout,
    NotStarted(String),
}

impl Ending {
    pub fn ok(&self) -> bool {
        *self == Ending::Ok
    }

    pub fn describe(&self) -> String {
        match self {
            Ending::Ok => "ok".into(),
            Ending::Exit(c) => format!("exit {c}"),
            Ending::Signal(s) => match signal_name(*s) {
                Some(n) => format!("signal {s} ({n})"),
                None => format!("signal {s}"),
            },
            Ending::Timeout => "timeout".into(),
            Ending::NotStarted(why) => format!("not started: {why}"),
        }
    }
}

fn signal_name(s: i32) -> Option<&'static str> {
    Some(match s {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// One process image replayed once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageReplay {
    pub pid: u32,
    pub exec_index: u32,
    pub command: Vec<String>,
    pub threads: usize,
    pub ending: Ending,
    /// The driver's last stderr line when it did not end well.
    pub error: Option<String>,
    /// Calls the decoded trace asks for, and how many the driver performed.
    pub calls: u64,
    pub calls_performed: u64,
    pub calls_by_op: BTreeMap<String, u64>,
    pub skipped: Skipped,
    /// Allocations the replay's allocator answered with NULL (later calls on them skipped).
    pub failed_in_replay: u64,
    /// Frees and reallocs of another thread's block, and how many had to wait for it.
    pub cross_thread: u64,
    pub cross_thread_waits: u64,
    pub never_freed: u64,
    pub never_freed_bytes: u64,
    /// Blocks larger than what `--touch` writes of one block (`TOUCH_BLOCK_LIMIT`).
    #[serde(default)]
    pub large_blocks: LargeBlocks,
    /// Seconds from the first call to the last, and calls per second.
    pub seconds: f64,
    pub calls_per_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Anonymous RSS just before the first call: the driver and the allocator's start.
    pub rss_before: u64,
    pub figures: Figures,
    pub phases: Vec<PhaseFigures>,
    /// The recorded range measured with `--phase`.
    pub window: Option<(u64, u64)>,
    pub samples: Vec<Sample>,
    /// The traced program's own memory readings on the same call axis (recorded with the trace),
    /// and their peak and call-weighted mean: what the replay is compared with (docs/replay.md,
    /// "Fidelity"). Empty when the trace has none.
    pub original_memory: Vec<trace::MemorySample>,
    pub original_summary: Option<trace::MemorySummary>,
    /// The original's heap (anonymous memory where smaps was not read) averaged over its time,
    /// as `figures.mean_rss` is: the figure to hold it against.
    #[serde(default)]
    pub original_mean: Option<f64>,
    /// The allocator's own statistics at the end (the watch agent's reading), when asked for.
    pub allocator_stats: Option<agent::AllocatorStats>,
    /// The calls the allocator received, as the agent counted them.
    pub allocator_calls: Option<agent::Counters>,
}

/// Replays one image under `variant`: starts the driver, waits for it, reads what it measured.
pub fn replay_image(
    plan: &ImagePlan,
    variant: &allocators::Variant,
    opts: &ReplayOptions,
    driver: &Path,
    progress: &mut dyn FnMut(u64),
) -> ImageReplay {
    let image = Image::of(&plan.map).expect("the plan's mapping has its header");
    image.reset_outputs();
    let mut out = ImageReplay::of_plan(plan);
    let process = match DriverProcess::start(plan, variant, opts, driver) {
        Ok(p) => p,
        Err(why) => {
            out.ending = Ending::NotStarted(why);
            return out;
        }
    };
    let waited = process.wait(opts.timeout, &mut || {
        progress(done(&image));
    });
    out.user_s = tv(waited.usage.ru_utime);
    out.sys_s = tv(waited.usage.ru_stime);
    let h = image.header();
    out.ending = waited.ending(h.finished == 1);
    if !out.ending.ok() {
        out.error = process.last_error_line();
    }
    out.calls_performed = done(&image);
    progress(out.calls_performed);
    let threads = image.threads();
    out.failed_in_replay = threads.iter().map(|t| t.failed).sum();
    out.cross_thread_waits = threads.iter().map(|t| t.waits).sum();
    out.rss_before = h.rss_start;
    let samples = measurements(plan, &image);
    if h.finished == 1 {
        out.seconds = h.end_ns.saturating_sub(h.start_ns) as f64 / 1e9;
    }
    out.measure(plan, samples);
    if opts.allocator_stats {
        (out.allocator_stats, out.allocator_calls) = process.allocator_stats();
    }
    out
}

/// Calls performed so far, every thread.
fn done(image: &Image) -> u64 {
    image
        .threads()
        .iter()
        .map(|t| t.done.load(std::sync::atomic::Ordering::Relaxed))
        .sum()
}

impl ImageReplay {
    /// What the plan already says, before the replay.
    pub(crate) fn of_plan(plan: &ImagePlan) -> ImageReplay {
        ImageReplay {
            pid: plan.info.pid,
            exec_index: plan.info.exec_index,
            command: plan.info.cmdline.clone(),
            threads: plan.threads,
            ending: Ending::Ok,
            error: None,
            calls: plan.calls,
            calls_performed: 0,
            calls_by_op: plan.calls_by_op.clone(),
            skipped: plan.skipped.clone(),
            failed_in_replay: 0,
            cross_thread: plan.cross_thread,
            cross_thread_waits: 0,
            never_freed: plan.never_freed,
            never_freed_bytes: plan.never_freed_bytes,
            large_blocks: plan.large_blocks,
            seconds: 0.0,
            calls_per_s: 0.0,
            user_s: 0.0,
            sys_s: 0.0,
            rss_before: 0,
            figures: Figures::default(),
            phases: Vec::new(),
            window: plan.window.map(|w| (w.from_seq, w.to_seq)),
            samples: Vec::new(),
            original_memory: plan.original.clone(),
            original_summary: trace::MemorySummary::of(&plan.original, plan.end_seq),
            original_mean: measure::original_time_mean(&plan.original, plan.end_t_ns),
            allocator_stats: None,
            allocator_calls: None,
        }
    }

    /// The figures of the samples: the whole image's (or the `--phase` window's) and per phase.
    fn measure(&mut self, plan: &ImagePlan, samples: Vec<Sample>) {
        self.calls_per_s = if self.seconds > 0.0 {
            self.calls_performed as f64 / self.seconds
        } else {
            0.0
        };
        let whole = Span {
            from_seq: plan.start_seq,
            to_seq: plan.end_seq,
            from_s: 0.0,
            to_s: plan.end_t_ns as f64 / 1e9,
        };
        self.figures = measure::figures(&samples, plan.window.unwrap_or(whole));
        if let Some(w) = plan.window {
            // The phase's own time and rate: the calls before it only rebuild the heap it starts from.
            if self.figures.seconds > 0.0 {
                self.calls_per_s =
                    w.to_seq.saturating_sub(w.from_seq) as f64 / self.figures.seconds;
            }
        } else {
            // Exact, from the trace in recorded order (the samples only see ~1000 points).
            self.figures.ideal_peak = plan.ideal_peak;
        }
        self.phases = measure::phases(&samples, &plan.markers, whole);
        self.samples = samples;
    }
}

/// The driver's measurements, sorted on the call axis, each with the original's clock: one before
/// the first call, the points the threads took, one after the last call when the replay finished.
fn measurements(plan: &ImagePlan, image: &Image) -> Vec<Sample> {
    let h = image.header();
    let start = h.start_ns;
    let t_s = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    let original_t_s = |seq: u64| {
        let i = plan.clock.partition_point(|&(s, _)| s <= seq);
        i.checked_sub(1)
            .map_or(0.0, |i| plan.clock[i].1 as f64 / 1e9)
    };
    let mut samples = vec![Sample {
        seq: plan.start_seq,
        t_s: 0.0,
        original_t_s: 0.0,
        rss: h.rss_start,
        live: 0,
    }];
    samples.extend(
        image
            .samples()
            .iter()
            .filter(|p| p.taken == 1)
            .map(|p| Sample {
                seq: p.seq,
                t_s: t_s(p.t_ns),
                original_t_s: original_t_s(p.seq),
                rss: p.rss,
                live: p.live,
            }),
    );
    if h.finished == 1 {
        samples.push(Sample {
            seq: plan.end_seq,
            t_s: t_s(h.end_ns),
            original_t_s: original_t_s(plan.end_seq),
            rss: h.rss_end,
            live: plan.live_end,
        });
    }
    samples.sort_by(|a, b| a.seq.cmp(&b.seq).then(a.t_s.total_cmp(&b.t_s)));
    samples
}

/// The replay process: `alloclens replay-driver` with the variant's environment and the calls
/// mapping inherited, its stderr and the agent's snapshots in a temporary directory.
struct DriverProcess {
    pid: libc::pid_t,
    work: tempfile::TempDir,
    _child: std::process::Child,
}

/// How the driver ended: wait4's status and usage, and whether it was killed for the timeout.
struct Waited {
    status: i32,
    usage: libc::rusage,
    timed_out: bool,
}

impl Waited {
    fn ending(&self, finished: bool) -> Ending {
        let exit = std::process::ExitStatus::from_raw(self.status);
        if self.timed_out {
            Ending::Timeout
        } else if let Some(s) = exit.signal() {
            Ending::Signal(s)
        } else if exit.code() != Some(0) || !finished {
            Ending::Exit(exit.code().unwrap_or(-1))
        } else {
            Ending::Ok
        }
    }
}

impl DriverProcess {
    fn start(
        plan: &ImagePlan,
        variant: &allocators::Variant,
        opts: &ReplayOptions,
        driver: &Path,
    ) -> Result<DriverProcess, String> {
        let work = tempfile::Builder::new()
            .prefix("alloclens-replay")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let env = environment(variant, opts, work.path())?;
        let stderr_path = work.path().join("driver.stderr");
        let stderr = std::fs::File::create(&stderr_path)
            .map_err(|e| format!("cannot create {}: {e}", stderr_path.display()))?;
        let fd = plan.map.fd();
        let mut cmd = Command::new(driver);
        cmd.arg("replay-driver")
            .arg("--plan-fd")
            .arg(fd.to_string())
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        // SAFETY: fcntl and prctl are async-signal-safe and touch only the child.
        unsafe {
            cmd.pre_exec(move || {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("{}: {e}", driver.display()))?;
        Ok(DriverProcess {
            pid: child.id() as libc::pid_t,
            work,
            _child: child,
        })
    }

    /// Waits for the driver, calling `progress` now and then; kills it after `timeout`.
    fn wait(&self, timeout: Option<Duration>, progress: &mut dyn FnMut()) -> Waited {
        let started = Instant::now();
        let mut status = 0;
        // SAFETY: rusage is plain data filled by wait4.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let mut timed_out = false;
        let mut pause = Duration::from_micros(200);
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == self.pid
                || (r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
            {
                break;
            }
            progress();
            if let Some(limit) = timeout {
                if !timed_out && started.elapsed() > limit {
                    timed_out = true;
                    // SAFETY: our own child, not yet reaped.
                    unsafe { libc::kill(self.pid, libc::SIGKILL) };
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        Waited {
            status,
            usage,
            timed_out,
        }
    }

    /// The driver's last stderr line (why it failed).
    fn last_error_line(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.work.path().join("driver.stderr")).ok()?;
        text.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(str::to_string)
    }

    /// The allocator's statistics at the end and the calls it received, by the watch agent.
    fn allocator_stats(&self) -> (Option<agent::AllocatorStats>, Option<agent::Counters>) {
        let snaps = agent::read_snapshots(self.work.path()).unwrap_or_default();
        match snaps.into_iter().find(|s| s.pid == self.pid as u32) {
            Some(s) => (Some(s.allocator), Some(s.counters)),
            None => (None, None),
        }
    }
}

/// The variant's environment, with the watch agent preloaded in front of its allocator when the
/// allocator's statistics are wanted.
fn environment(
    variant: &allocators::Variant,
    opts: &ReplayOptions,
    work: &Path,
) -> Result<Vec<(OsString, OsString)>, String> {
    let inherited = std::env::var_os("LD_PRELOAD");
    let mut env = variant.environment(inherited.as_deref());
    if opts.allocator_stats {
        let config = agent::AgentConfig {
            dir: work.to_path_buf(),
            interval: Duration::from_secs(24 * 3600),
            profile_bytes: None,
        };
        let allocator_preload = env
            .iter()
            .position(|(k, _)| k == "LD_PRELOAD")
            .map(|i| env.remove(i).1)
            .or(inherited);
        let preload = config
            .preload(allocator_preload.as_deref())
            .map_err(|e| e.to_string())?;
        env.push(("LD_PRELOAD".into(), preload));
        env.extend(config.env());
    }
    Ok(env)
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}
