//! One run: start the command, sample its tree until it ends, collect markers and output.
use std::collections::HashSet;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use allocators::{LoadStatus, Variant};
use nix::sys::signal::Signal;
use procmem::{PssRefresh, SamplerOptions, TreeSample, TreeSampler};

use crate::child::{self, CommandExit, CpuTimes};
use crate::observer::{Observer, Stream};
use crate::output::{line_text, spawn_reader, Line, MarkerArrival, MarkerWatch, Reading};
use crate::plan::{RunPlan, RunSpec};
use crate::results::{
    AllocatorCheck, Ending, MarkerCounts, MarkerRecord, MarkerStatus, MemorySummary, RunRecord,
    SampleKind,
};
use crate::stats::series_stats;
use crate::watchdog::Watchdog;

/// How long the tree gets between SIGTERM and SIGKILL when it must be stopped.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// When the allocator check looks at a new process before the regular samples.
const EARLY_CHECKS: [Duration; 3] = [
    Duration::from_millis(3),
    Duration::from_millis(10),
    Duration::from_millis(35),
];
/// How long output may keep arriving after the command ended.
const OUTPUT_DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// The loader maps preloads before main(); a process younger than this may not have them yet.
const LOADER_SETTLE: Duration = Duration::from_millis(30);

enum Message {
    Line(Line),
    Eof,
    Exited(std::io::Result<(CommandExit, CpuTimes)>, Instant),
}

/// A sample as `take_sample` took it.
struct Taken {
    sample: TreeSample,
    /// When the sampler returned it.
    ended: Instant,
    /// `MarkerWatch::seen` at that moment (with --marker).
    markers_seen: Option<u64>,
}

/// Totals of one sample, kept to compute the run's statistics.
struct TotalPoint {
    t: f64,
    pss: u64,
    rss: u64,
    uss: u64,
    vss: u64,
    swap: u64,
    anon: u64,
}

pub(crate) struct RunContext<'a> {
    pub plan: &'a RunPlan,
    pub spec: &'a RunSpec,
    pub variant: &'a Variant,
    pub command: Vec<String>,
    pub env: Vec<(OsString, OsString)>,
    pub interrupted: &'a AtomicBool,
    pub watchdog: Option<&'a mut Watchdog>,
}

struct Run<'a, 'o> {
    ctx: RunContext<'a>,
    observer: &'o mut dyn Observer,
    started_at: Instant,
    points: Vec<TotalPoint>,
    pids_seen: HashSet<u32>,
    max_processes: u32,
    last_pids: Vec<u32>,
    markers: Vec<MarkerRecord>,
    throughput: Option<f64>,
    check: AllocatorCheck,
    other_allocators: Vec<String>,
    checks_done: u32,
    root_pid: u32,
    /// The executable the library was last seen mapped in.
    loaded_image: Option<std::path::PathBuf>,
    /// Recognises marker lines on the reading threads; None without --marker.
    watch: Option<MarkerWatch>,
}

pub(crate) fn run_one(ctx: RunContext<'_>, observer: &mut dyn Observer) -> RunRecord {
    let sampler_cpu_before = procmem::thread_cpu_time();
    observer.run_started(ctx.spec, &ctx.command);
    let started = match child::spawn(
        &ctx.command,
        &ctx.env,
        ctx.plan.stdout_pty,
        ctx.plan.pass_stdin,
    ) {
        Ok(s) => s,
        Err(err) => return not_started(&ctx, err),
    };
    let mut run = Run {
        observer,
        started_at: started.started_at,
        points: Vec::new(),
        pids_seen: HashSet::new(),
        max_processes: 0,
        last_pids: Vec::new(),
        markers: Vec::new(),
        throughput: None,
        check: if ctx.variant.library.is_some() {
            AllocatorCheck::Unverified
        } else {
            AllocatorCheck::NotApplicable
        },
        other_allocators: Vec::new(),
        checks_done: 0,
        root_pid: started.child.id(),
        loaded_image: None,
        watch: ctx.plan.marker.clone().map(|regex| MarkerWatch {
            regex,
            root: started.child.id(),
            include_reparented_to_self: true,
            exclude_child: ctx.watchdog.as_ref().map(|w| w.pid()),
            seen: Arc::new(AtomicU64::new(0)),
        }),
        ctx,
    };
    let pid = started.child.id();
    if let Some(w) = run.ctx.watchdog.as_mut() {
        w.group(pid);
    }
    let (tx, rx) = mpsc::channel();
    for (pipe, stream) in [
        (started.stdout, Stream::Stdout),
        (
            Box::new(started.stderr) as Box<dyn std::io::Read + Send>,
            Stream::Stderr,
        ),
    ] {
        let (lines, eof) = (tx.clone(), tx.clone());
        spawn_reader(
            pipe,
            stream,
            run.watch.clone(),
            move |line| lines.send(Message::Line(line)).is_ok(),
            move || {
                let _ = eof.send(Message::Eof);
            },
        );
    }
    {
        let tx = tx.clone();
        thread::spawn(move || {
            let result = child::wait(pid);
            let _ = tx.send(Message::Exited(result, Instant::now()));
        });
    }
    drop(tx);
    // The Child handle is not used to wait (wait4 above also gives rusage); dropping it does not wait.
    drop(started.child);

    let mut sampler = TreeSampler::new(
        pid,
        SamplerOptions {
            include_reparented_to_self: true,
            exclude_child: run.ctx.watchdog.as_ref().map(|w| w.pid()),
            pss_refresh: if run.ctx.plan.exact_pss {
                PssRefresh::EverySample
            } else {
                PssRefresh::default()
            },
        },
    )
    .ok();
    let mut ending = Ending::default();
    let mut cpu = CpuTimes::default();
    let mut exited_at = None;
    let mut eofs = 0;
    let mut next_tick = run.started_at;
    let mut stop_requested_at: Option<Instant> = None;
    let mut killed = false;
    // Short commands may end before the first interval: look at their mappings early too.
    let started_at = run.started_at;
    let mut early_checks = EARLY_CHECKS.iter().map(|d| started_at + *d).peekable();

    while exited_at.is_none() || eofs < 2 {
        let now = Instant::now();
        // A process outside the tree may still hold the pipes: do not wait for it forever.
        if exited_at.is_some_and(|at: Instant| now.duration_since(at) > OUTPUT_DRAIN_LIMIT) {
            break;
        }
        if exited_at.is_none() {
            if now >= next_tick {
                run.take_sample(&mut sampler, SampleKind::Interval, None);
                while next_tick <= now {
                    next_tick += run.ctx.plan.interval;
                }
            }
            if early_checks.next_if(|at| now >= *at).is_some() {
                run.check_allocator(now.duration_since(run.started_at));
            }
            // Stop the tree on Ctrl-C or timeout; escalate to SIGKILL after the grace period.
            let timed_out = run
                .ctx
                .plan
                .timeout
                .is_some_and(|t| now.duration_since(run.started_at) >= t);
            if stop_requested_at.is_none()
                && (timed_out || run.ctx.interrupted.load(Ordering::Relaxed))
            {
                ending.timed_out = timed_out;
                ending.interrupted = !timed_out;
                stop_requested_at = Some(now);
                child::signal_tree(pid, &run.last_pids, Signal::SIGTERM);
            }
            if let Some(at) = stop_requested_at {
                if !killed && now.duration_since(at) >= STOP_GRACE {
                    child::signal_tree(pid, &run.last_pids, Signal::SIGKILL);
                    killed = true;
                }
            }
        }
        let wait = if exited_at.is_none() {
            let next = early_checks
                .peek()
                .map_or(next_tick, |at| (*at).min(next_tick));
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(100))
        } else {
            Duration::from_millis(100)
        };
        match rx.recv_timeout(wait) {
            Ok(Message::Line(line)) => {
                let sample_now = exited_at.is_none();
                run.handle_line(line, &mut sampler, sample_now);
            }
            Ok(Message::Eof) => eofs += 1,
            Ok(Message::Exited(result, at)) => {
                exited_at = Some(at);
                match result {
                    Ok((status, times)) => {
                        ending.status = Some(status);
                        cpu.add(times);
                    }
                    Err(err) => ending.spawn_error = Some(format!("waiting for pid {pid}: {err}")),
                }
                // Descendants that outlive the command (and hold its pipes) are stopped.
                let leftovers = leftover_descendants(&mut sampler);
                ending.stopped_leftovers = leftovers.len() as u32;
                if !leftovers.is_empty() {
                    stop_leftovers(pid, &leftovers);
                }
                for pid in run.pids_seen.iter().chain(leftovers.iter()) {
                    if let Some(times) = child::try_reap(*pid) {
                        cpu.add(times);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let wall = exited_at
        .map(|at| at.duration_since(run.started_at))
        .unwrap_or_default();
    if let Some(w) = run.ctx.watchdog.as_mut() {
        w.done();
    }
    let sampler_cpu = procmem::thread_cpu_time().saturating_sub(sampler_cpu_before);
    run.finish(ending, wall, cpu, sampler_cpu)
}

impl Run<'_, '_> {
    fn take_sample(
        &mut self,
        sampler: &mut Option<TreeSampler>,
        kind: SampleKind,
        label: Option<&str>,
    ) -> Option<Taken> {
        // Marker samples are the figures users read per event: always fresh PSS.
        let sampler = sampler.as_mut()?;
        let sample = match kind {
            SampleKind::Marker => sampler.sample_full(),
            SampleKind::Interval => sampler.sample(),
        }
        .ok()?;
        let ended = Instant::now();
        let markers_seen = self.watch.as_ref().map(|w| w.seen.load(Ordering::SeqCst));
        let t = sample.at.saturating_duration_since(self.started_at);
        if sample.processes.is_empty() {
            return None;
        }
        let pids: Vec<u32> = sample.processes.iter().map(|p| p.pid).collect();
        if let Some(w) = self.ctx.watchdog.as_mut() {
            if pids != self.last_pids || w.is_stale() {
                w.members(&pids);
            }
        }
        self.last_pids = pids;
        self.pids_seen.extend(self.last_pids.iter().copied());
        self.max_processes = self.max_processes.max(sample.processes.len() as u32);
        let total = &sample.total;
        self.points.push(TotalPoint {
            t: t.as_secs_f64(),
            pss: total.pss,
            rss: total.rss,
            uss: total.uss,
            vss: total.vss,
            swap: total.swap,
            anon: total.anonymous,
        });
        self.observer
            .sample(self.ctx.spec, t, &kind, label, &sample);
        self.check_allocator(t);
        Some(Taken {
            sample,
            ended,
            markers_seen,
        })
    }

    /// Looks at the root's mappings: at the early checks, at every sample during the first second,
    /// then at every tenth sample. A library seen mapped in an image stays "loaded" for that image (a
    /// preload cannot be unmapped), and reads of an exiting process (maps torn down) are ignored, so
    /// only a program image that really runs without the library, such as one re-exec'd without
    /// LD_PRELOAD, turns the verdict to "not loaded".
    fn check_allocator(&mut self, age: Duration) {
        if self.ctx.variant.library.is_none() {
            return;
        }
        self.checks_done += 1;
        if age > Duration::from_secs(1) && !self.checks_done.is_multiple_of(10) {
            return;
        }
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.root_pid)).ok();
        let Ok(mapped) = procmem::mapped_files(self.root_pid) else {
            return;
        };
        if mapped.is_empty() || exe.is_none() {
            return; // exiting: its mappings are gone already
        }
        let verification = allocators::verify(self.ctx.variant, &mapped);
        match verification.status {
            LoadStatus::Loaded { .. } => {
                self.check = AllocatorCheck::Loaded;
                self.loaded_image = exe;
            }
            LoadStatus::NotLoaded
                if self.check == AllocatorCheck::Loaded && self.loaded_image == exe => {}
            LoadStatus::NotLoaded if age >= LOADER_SETTLE => self.check = AllocatorCheck::NotLoaded,
            LoadStatus::NotLoaded => {}
            LoadStatus::NotApplicable => self.check = AllocatorCheck::NotApplicable,
        }
        self.other_allocators = verification.other_allocators;
    }

    fn handle_line(&mut self, line: Line, sampler: &mut Option<TreeSampler>, sample_now: bool) {
        self.observer
            .output(self.ctx.spec, line.stream, &line.bytes);
        let text = line_text(&line.bytes);
        if let Some(re) = &self.ctx.plan.throughput {
            if let Some(value) = re
                .captures(&text)
                .and_then(|c| c.get(1))
                .and_then(|m| m.as_str().parse::<f64>().ok())
            {
                self.throughput = Some(value);
            }
        }
        let Some(arrival) = line.marker else {
            return;
        };
        let (status, rss, vss, delay) = match arrival.reading {
            Reading::Taken(r) => {
                let delay = r.at.saturating_duration_since(arrival.arrived);
                (MarkerStatus::Ok, Some(r.rss), Some(r.vss), Some(delay))
            }
            Reading::Late => (MarkerStatus::Late, None, None, None),
            Reading::Missing => (MarkerStatus::Missing, None, None, None),
        };
        let (pss_status, pss, pss_delay) = self.marker_pss(sampler, &arrival, sample_now);
        let marker = MarkerRecord {
            t: arrival
                .arrived
                .saturating_duration_since(self.started_at)
                .as_secs_f64(),
            label: arrival.label,
            line: text.into_owned(),
            rss,
            vss,
            delay: delay.map(|d| d.as_secs_f64()),
            status,
            pss,
            pss_delay: pss_delay.map(|d| d.as_secs_f64()),
            pss_status,
        };
        self.observer.marker(self.ctx.spec, &marker);
        self.markers.push(marker);
    }

    /// The tree's PSS for a marker: a full sample (always fresh PSS), taken unless the command
    /// has exited or a later marker line has arrived; kept for the marker only if it ended before
    /// a later one arrived. A sample taken is recorded as a marker sample either way.
    fn marker_pss(
        &mut self,
        sampler: &mut Option<TreeSampler>,
        arrival: &MarkerArrival,
        sample_now: bool,
    ) -> (MarkerStatus, Option<u64>, Option<Duration>) {
        let watch = self.watch.as_ref().expect("markers come with a watch");
        if !sample_now {
            return (MarkerStatus::Missing, None, None);
        }
        if watch.later_than(arrival.seq) {
            return (MarkerStatus::Late, None, None);
        }
        let Some(taken) = self.take_sample(sampler, SampleKind::Marker, Some(&arrival.label))
        else {
            return (MarkerStatus::Missing, None, None);
        };
        if taken
            .markers_seen
            .is_some_and(|seen| seen > arrival.seq + 1)
        {
            return (MarkerStatus::Late, None, None);
        }
        let delay = taken.ended.saturating_duration_since(arrival.arrived);
        (MarkerStatus::Ok, Some(taken.sample.total.pss), Some(delay))
    }

    fn finish(
        self,
        ending: Ending,
        wall: Duration,
        cpu: CpuTimes,
        sampler_cpu: Duration,
    ) -> RunRecord {
        let series = |f: fn(&TotalPoint) -> u64| {
            series_stats(&self.points.iter().map(|p| (p.t, f(p))).collect::<Vec<_>>())
        };
        let memory = MemorySummary {
            samples: self.points.len() as u64,
            pss: series(|p| p.pss),
            rss: series(|p| p.rss),
            uss: series(|p| p.uss),
            vss: series(|p| p.vss),
            swap: series(|p| p.swap),
            anon: series(|p| p.anon),
            max_processes: self.max_processes,
            distinct_processes: self.pids_seen.len() as u32,
        };
        let (mut marker_figures, mut marker_pss) =
            (MarkerCounts::default(), MarkerCounts::default());
        for m in &self.markers {
            marker_figures.add(m.status);
            marker_pss.add(m.pss_status);
        }
        let wall_s = wall.as_secs_f64();
        let (throughput, throughput_source) = match self.throughput {
            Some(v) => (Some(v), Some("regex".to_string())),
            None if !self.markers.is_empty() && wall_s > 0.0 => (
                Some(self.markers.len() as f64 / wall_s),
                Some("markers".to_string()),
            ),
            None => (None, None),
        };
        RunRecord {
            index: self.ctx.spec.index,
            variant: self.ctx.variant.label.clone(),
            allocator: self.ctx.variant.allocator.clone(),
            params: self.ctx.spec.assignment.clone(),
            repeat: self.ctx.spec.repeat,
            command: self.ctx.command.clone(),
            ending,
            wall: wall_s,
            user: cpu.user.as_secs_f64(),
            sys: cpu.sys.as_secs_f64(),
            memory,
            markers: self.markers.len() as u64,
            marker_records: self.markers,
            marker_figures,
            marker_pss,
            throughput,
            throughput_source,
            allocator_check: self.check,
            other_allocators: self.other_allocators,
            sampler_cpu: sampler_cpu.as_secs_f64(),
        }
    }
}

fn not_started(ctx: &RunContext<'_>, err: std::io::Error) -> RunRecord {
    let program = ctx.command.first().map(String::as_str).unwrap_or("");
    let message = if err.kind() == std::io::ErrorKind::NotFound {
        format!("command not found: '{program}' (check the spelling or the PATH)")
    } else {
        format!("cannot start '{program}': {err}")
    };
    RunRecord {
        index: ctx.spec.index,
        variant: ctx.variant.label.clone(),
        allocator: ctx.variant.allocator.clone(),
        params: ctx.spec.assignment.clone(),
        repeat: ctx.spec.repeat,
        command: ctx.command.clone(),
        ending: Ending {
            spawn_error: Some(message),
            ..Ending::default()
        },
        wall: 0.0,
        user: 0.0,
        sys: 0.0,
        memory: MemorySummary::default(),
        markers: 0,
        marker_records: Vec::new(),
        marker_figures: MarkerCounts::default(),
        marker_pss: MarkerCounts::default(),
        throughput: None,
        throughput_source: None,
        allocator_check: AllocatorCheck::Unverified,
        other_allocators: Vec::new(),
        sampler_cpu: 0.0,
    }
}

/// Processes of the tree still alive after the command itself ended.
fn leftover_descendants(sampler: &mut Option<TreeSampler>) -> Vec<u32> {
    let Some(sampler) = sampler.as_mut() else {
        return Vec::new();
    };
    match sampler.sample() {
        Ok(s) => s
            .processes
            .iter()
            .map(|p| p.pid)
            .filter(|&p| child::is_alive(p))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn stop_leftovers(pgid: u32, pids: &[u32]) {
    child::signal_tree(pgid, pids, Signal::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && pids.iter().any(|&p| child::is_alive(p)) {
        thread::sleep(Duration::from_millis(10));
    }
    child::signal_tree(pgid, pids, Signal::SIGKILL);
}
