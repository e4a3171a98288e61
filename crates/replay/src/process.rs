//! One replay process: start the driver with the variant's allocator preloaded, wait for it (with
//! the timeout), and read back what it measured.
use std::collections::BTreeMap;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::measure::{self, Figures, PhaseFigures, Sample};
use crate::plan::{ImagePlan, Skipped};
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
    /// The allocator's own statistics at the end (the watch agent's reading), when asked for.
    pub allocator_stats: Option<agent::AllocatorStats>,
    /// The calls the allocator received, as the agent counted them.
    pub allocator_calls: Option<agent::Counters>,
}

pub fn replay_image(
    plan: &ImagePlan,
    variant: &allocators::Variant,
    opts: &ReplayOptions,
    driver: &Path,
    progress: &mut dyn FnMut(u64),
) -> ImageReplay {
    let image = Image::of(&plan.map).expect("the plan's mapping has its header");
    image.reset_outputs();
    let mut out = ImageReplay {
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
        seconds: 0.0,
        calls_per_s: 0.0,
        user_s: 0.0,
        sys_s: 0.0,
        rss_before: 0,
        figures: Figures::default(),
        phases: Vec::new(),
        window: plan.window,
        samples: Vec::new(),
        original_memory: plan.original.clone(),
        original_summary: trace::MemorySummary::of(&plan.original, plan.end_seq),
        allocator_stats: None,
        allocator_calls: None,
    };
    let work = match tempfile::Builder::new()
        .prefix("alloclens-replay")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            out.ending = Ending::NotStarted(format!("cannot make a temporary directory: {e}"));
            return out;
        }
    };
    let inherited = std::env::var_os("LD_PRELOAD");
    let mut env = variant.environment(inherited.as_deref());
    if opts.allocator_stats {
        let config = agent::AgentConfig {
            dir: work.path().to_path_buf(),
            interval: Duration::from_secs(24 * 3600),
        };
        let allocator_preload = env
            .iter()
            .position(|(k, _)| k == "LD_PRELOAD")
            .map(|i| env.remove(i).1)
            .or(inherited);
        match config.preload(allocator_preload.as_deref()) {
            Ok(p) => env.push(("LD_PRELOAD".into(), p)),
            Err(e) => {
                out.ending = Ending::NotStarted(e.to_string());
                return out;
            }
        }
        env.extend(config.env());
    }
    let stderr_path = work.path().join("driver.stderr");
    let stderr = match std::fs::File::create(&stderr_path) {
        Ok(f) => f,
        Err(e) => {
            out.ending =
                Ending::NotStarted(format!("cannot create {}: {e}", stderr_path.display()));
            return out;
        }
    };
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
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.ending = Ending::NotStarted(format!("{}: {e}", driver.display()));
            return out;
        }
    };
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let mut status = 0;
    // SAFETY: rusage is plain data filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    let mut pause = Duration::from_micros(200);
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid
            || (r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
        {
            break;
        }
        progress(
            image
                .threads()
                .iter()
                .map(|t| t.done.load(std::sync::atomic::Ordering::Relaxed))
                .sum(),
        );
        if let Some(limit) = opts.timeout {
            if !timed_out && started.elapsed() > limit {
                timed_out = true;
                // SAFETY: our own child, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    drop(child);
    out.user_s = tv(usage.ru_utime);
    out.sys_s = tv(usage.ru_stime);
    let exit = std::process::ExitStatus::from_raw(status);
    let h = image.header();
    out.ending = if timed_out {
        Ending::Timeout
    } else if let Some(s) = exit.signal() {
        Ending::Signal(s)
    } else if exit.code() != Some(0) || h.finished != 1 {
        Ending::Exit(exit.code().unwrap_or(-1))
    } else {
        Ending::Ok
    };
    if !out.ending.ok() {
        out.error = std::fs::read_to_string(&stderr_path).ok().and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        });
    }
    let threads = image.threads();
    out.calls_performed = threads
        .iter()
        .map(|t| t.done.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    progress(out.calls_performed);
    out.failed_in_replay = threads.iter().map(|t| t.failed).sum();
    out.cross_thread_waits = threads.iter().map(|t| t.waits).sum();
    out.rss_before = h.rss_start;
    let start = h.start_ns;
    let t_s = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    let mut samples = vec![Sample {
        seq: plan.start_seq,
        t_s: 0.0,
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
                rss: p.rss,
                live: p.live,
            }),
    );
    if h.finished == 1 {
        out.seconds = t_s(h.end_ns);
        samples.push(Sample {
            seq: plan.end_seq,
            t_s: out.seconds,
            rss: h.rss_end,
            live: plan.live_end,
        });
    }
    samples.sort_by(|a, b| a.seq.cmp(&b.seq).then(a.t_s.total_cmp(&b.t_s)));
    out.calls_per_s = if out.seconds > 0.0 {
        out.calls_performed as f64 / out.seconds
    } else {
        0.0
    };
    let (from, to) = plan.window.unwrap_or((plan.start_seq, plan.end_seq));
    out.figures = measure::figures(&samples, from, to);
    if plan.window.is_some() {
        // The phase's own time and rate: the calls before it only rebuild the heap it starts from.
        if out.figures.seconds > 0.0 {
            out.calls_per_s = to.saturating_sub(from) as f64 / out.figures.seconds;
        }
    } else {
        // Exact, from the trace in recorded order (the samples only see ~1000 points).
        out.figures.ideal_peak = plan.ideal_peak;
    }
    out.phases = measure::phases(&samples, &plan.markers, plan.start_seq, plan.end_seq);
    out.samples = samples;
    if opts.allocator_stats {
        if let Ok(snaps) = agent::read_snapshots(work.path()) {
            if let Some(s) = snaps.into_iter().find(|s| s.pid == pid as u32) {
                out.allocator_stats = Some(s.allocator);
                out.allocator_calls = Some(s.counters);
            }
        }
    }
    out
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}
