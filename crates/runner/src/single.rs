//! One run: start the command, sample its tree until it ends, collect markers and output.
use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use allocators::{LoadStatus, Variant};
use nix::sys::signal::Signal;
use procmem::{PssRefresh, SamplerOptions, TreeSample, TreeSampler};

use crate::child::{self, CommandExit, CpuTimes, Reaped};
use crate::observer::{Observer, OutputStream};
use crate::output::{line_text, spawn_reader, Line, MarkerArrival, MarkerWatch, Reading};
use crate::plan::{RunPlan, RunSpec};
use crate::results::{
    AllocatorCheck, Ending, KsmSummary, MarkerCounts, MarkerRecord, MarkerStatus, MemorySummary,
    RunRecord, SampleKind,
};
use crate::results_dir;
use crate::stats::series_stats;
use crate::watchdog::Watchdog;

/// How long the tree gets between SIGTERM and SIGKILL when it must be stopped.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The first ramp-up sample after the one at the start; each next one comes twice as late.
const RAMP_FIRST: Duration = Duration::from_millis(2);

/// When the sample after one taken `elapsed` into the run is due (from the run's start): 2, 4, 8,
/// 16 ... ms while that is sooner than `interval`, then every `interval` (k * interval). A command
/// shorter than the interval is thus seen running, not only as it starts: a 27-ms `workload
/// churn` got one sample, at 1 ms, before its exec had run, for its mean and peak PSS. The
/// statistics weigh each sample by the time it stands for (`stats::series_stats`), so the
/// ramp-up does not weigh the start more; 6 more samples a run at the default 100 ms.
fn next_sample_after(elapsed: Duration, interval: Duration) -> Duration {
    let mut ramp = RAMP_FIRST;
    while ramp <= elapsed {
        ramp *= 2;
    }
    if ramp < interval {
        return ramp;
    }
    let k = elapsed.as_nanos() / interval.as_nanos().max(1) + 1;
    interval.saturating_mul(u32::try_from(k).unwrap_or(u32::MAX))
}

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
    Exited(std::io::Result<(CommandExit, Reaped)>, Instant),
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
    ksm: Option<KsmPoint>,
}

/// KSM figures of one sample (with --ksm).
struct KsmPoint {
    merging: u64,
    profit: i64,
    sharing: u64,
    volatile: u64,
    full_scans: u64,
    ksmd_cpu_s: Option<f64>,
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

/// One run in progress: what the loop has seen of the command so far, with a method per event.
struct Run<'a, 'o> {
    ctx: RunContext<'a>,
    observer: &'o mut dyn Observer,
    started_at: Instant,
    sampler: Option<TreeSampler>,
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
    /// With --ksm-mechanism madvise in a KSM-on run: the library that marks memory mergeable
    /// (canonical), and whether it was seen mapped, as for the allocator's.
    ksm_library: Option<std::path::PathBuf>,
    ksm_check: AllocatorCheck,
    ksm_image: Option<std::path::PathBuf>,
    /// Recognises marker lines on the reading threads; None without --marker.
    watch: Option<MarkerWatch>,
    /// When the next interval sample is due.
    next_tick: Instant,
    /// Early allocator checks still to do (short commands may end before the first interval).
    early_checks: VecDeque<Instant>,
    stop: Stop,
    ending: Ending,
    cpu: CpuTimes,
    /// The largest `ru_maxrss` of the processes reaped (the command, its waited-for descendants
    /// and the orphans reaped here), in bytes; 0 until one is reaped.
    kernel_peak_rss: u64,
    fork_peak_rss: Option<u64>,
    /// When the command (the root process) exited.
    exited_at: Option<Instant>,
    /// Output streams that reached their end (2: both).
    eofs: u32,
}

/// Stopping the tree on Ctrl-C or timeout: SIGTERM, then SIGKILL after `STOP_GRACE`.
#[derive(Default)]
struct Stop {
    requested_at: Option<Instant>,
    killed: bool,
}

pub(crate) fn run_one(mut ctx: RunContext<'_>, observer: &mut dyn Observer) -> RunRecord {
    let sampler_cpu_before = procmem::thread_cpu_time();
    observer.run_started(ctx.spec, &ctx.command);
    let mut sampler = tree_sampler(&ctx);
    let started = match child::spawn(
        &ctx.command,
        &ctx.env,
        ctx.plan.stdout_pty,
        ctx.plan.pass_stdin,
        ctx.plan.merges(ctx.spec) && ctx.plan.ksm_merge == Some(crate::KsmMechanism::Prctl),
    ) {
        Ok(s) => s,
        Err(err) => return not_started(&ctx, err),
    };
    let pid = started.child.id();
    let started_at = started.started_at;
    let start_unix_ns = started.started_unix_ns;
    let fork_peak_rss = started.fork_peak_rss;
    let watch = ctx.plan.marker.clone().map(|regex| MarkerWatch {
        regex,
        root: pid,
        include_reparented_to_self: true,
        exclude_child: ctx.watchdog.as_ref().map(|w| w.pid()),
        seen: Arc::new(AtomicU64::new(0)),
    });
    if let Some(w) = ctx.watchdog.as_mut() {
        w.group(pid);
    }
    let messages = forward_output_and_exit(started, watch.clone());
    if let Some(sampler) = sampler.as_mut() {
        sampler.start(pid);
    }
    let mut run = Run::new(ctx, observer, started_at, pid, watch, sampler);
    run.fork_peak_rss = fork_peak_rss;
    run.follow(&messages);
    let wall = run
        .exited_at
        .map(|at| at.duration_since(run.started_at))
        .unwrap_or_default();
    if let Some(w) = run.ctx.watchdog.as_mut() {
        w.done();
    }
    let sampler_cpu = procmem::thread_cpu_time().saturating_sub(sampler_cpu_before);
    let mut record = run.finish(wall, sampler_cpu);
    record.start_unix_ns = Some(start_unix_ns);
    record
}

/// Starts the threads that read the command's output and wait for its exit; they report on the
/// returned channel.
fn forward_output_and_exit(
    started: child::Started,
    watch: Option<MarkerWatch>,
) -> mpsc::Receiver<Message> {
    let pid = started.child.id();
    let (tx, rx) = mpsc::channel();
    for (pipe, stream) in [
        (started.stdout, OutputStream::Stdout),
        (
            Box::new(started.stderr) as Box<dyn std::io::Read + Send>,
            OutputStream::Stderr,
        ),
    ] {
        let (lines, eof) = (tx.clone(), tx.clone());
        spawn_reader(
            pipe,
            stream,
            watch.clone(),
            move |line| lines.send(Message::Line(line)).is_ok(),
            move || {
                let _ = eof.send(Message::Eof);
            },
        );
    }
    thread::spawn(move || {
        let result = child::wait(pid);
        let _ = tx.send(Message::Exited(result, Instant::now()));
    });
    // The Child handle is not used to wait (wait4 above also gives rusage); dropping it does not wait.
    drop(started.child);
    rx
}

/// The run's sampler, made before the command starts: /proc is listed then, so the first sample
/// is as quick as the others and comes right after the exec.
fn tree_sampler(ctx: &RunContext<'_>) -> Option<TreeSampler> {
    TreeSampler::before_start(SamplerOptions {
        include_reparented_to_self: true,
        exclude_child: ctx.watchdog.as_ref().map(|w| w.pid()),
        pss_refresh: if ctx.plan.exact_pss {
            PssRefresh::EverySample
        } else {
            PssRefresh::default()
        },
        ksm: ctx.plan.ksm,
    })
    .ok()
}

impl<'a, 'o> Run<'a, 'o> {
    fn new(
        ctx: RunContext<'a>,
        observer: &'o mut dyn Observer,
        started_at: Instant,
        root_pid: u32,
        watch: Option<MarkerWatch>,
        sampler: Option<TreeSampler>,
    ) -> Self {
        Run {
            observer,
            started_at,
            sampler,
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
            root_pid,
            loaded_image: None,
            ksm_library: match &ctx.plan.ksm_merge {
                Some(crate::KsmMechanism::Madvise { library }) if ctx.plan.merges(ctx.spec) => {
                    Some(std::fs::canonicalize(library).unwrap_or_else(|_| library.clone()))
                }
                _ => None,
            },
            ksm_check: AllocatorCheck::Unverified,
            ksm_image: None,
            watch,
            next_tick: started_at,
            early_checks: EARLY_CHECKS.iter().map(|d| started_at + *d).collect(),
            stop: Stop::default(),
            ending: Ending::default(),
            cpu: CpuTimes::default(),
            kernel_peak_rss: 0,
            fork_peak_rss: None,
            exited_at: None,
            eofs: 0,
            ctx,
        }
    }

    /// Handles the command's messages until it has exited and both output streams ended.
    fn follow(&mut self, messages: &mpsc::Receiver<Message>) {
        while self.exited_at.is_none() || self.eofs < 2 {
            let now = Instant::now();
            // A process outside the tree may still hold the pipes: do not wait for it forever.
            if self
                .exited_at
                .is_some_and(|at| now.duration_since(at) > OUTPUT_DRAIN_LIMIT)
            {
                break;
            }
            if self.exited_at.is_none() {
                self.on_tick(now);
            }
            match messages.recv_timeout(self.wait_time()) {
                Ok(Message::Line(line)) => self.handle_line(line),
                Ok(Message::Eof) => self.eofs += 1,
                Ok(Message::Exited(result, at)) => self.on_exit(result, at),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// While the command runs: the interval sample and early check that are due, and its stop.
    fn on_tick(&mut self, now: Instant) {
        if now >= self.next_tick {
            self.take_sample(SampleKind::Interval, None);
            self.next_tick =
                self.started_at + next_sample_after(now - self.started_at, self.ctx.plan.interval);
        }
        if self.early_checks.front().is_some_and(|at| now >= *at) {
            self.early_checks.pop_front();
            self.check_allocator(now.duration_since(self.started_at));
        }
        self.stop_if_asked(now);
    }

    /// Stops the tree on Ctrl-C or timeout; escalates to SIGKILL after the grace period.
    fn stop_if_asked(&mut self, now: Instant) {
        let timed_out = self
            .ctx
            .plan
            .timeout
            .is_some_and(|t| now.duration_since(self.started_at) >= t);
        if self.stop.requested_at.is_none()
            && (timed_out || self.ctx.interrupted.load(Ordering::Relaxed))
        {
            self.ending.timed_out = timed_out;
            self.ending.interrupted = !timed_out;
            self.stop.requested_at = Some(now);
            child::signal_tree(self.root_pid, &self.last_pids, Signal::SIGTERM);
        }
        if let Some(at) = self.stop.requested_at {
            if !self.stop.killed && now.duration_since(at) >= STOP_GRACE {
                child::signal_tree(self.root_pid, &self.last_pids, Signal::SIGKILL);
                self.stop.killed = true;
            }
        }
    }

    /// How long to wait for a message: until the next sample or early check while the command
    /// runs, at most 100 ms.
    fn wait_time(&mut self) -> Duration {
        if self.exited_at.is_some() {
            return Duration::from_millis(100);
        }
        let next = self
            .early_checks
            .front()
            .map_or(self.next_tick, |at| (*at).min(self.next_tick));
        next.saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100))
    }

    /// The command exited: its status and CPU times, and those of the descendants it left, which
    /// are stopped (they may hold its pipes).
    fn on_exit(&mut self, result: std::io::Result<(CommandExit, Reaped)>, at: Instant) {
        self.exited_at = Some(at);
        match result {
            Ok((status, reaped)) => {
                self.ending.status = Some(status);
                self.add_reaped(reaped);
            }
            Err(err) => {
                self.ending.spawn_error = Some(format!("waiting for pid {}: {err}", self.root_pid))
            }
        }
        let leftovers = leftover_descendants(&mut self.sampler);
        self.ending.stopped_leftovers = leftovers.len() as u32;
        if !leftovers.is_empty() {
            stop_leftovers(self.root_pid, &leftovers);
        }
        let reapable: Vec<u32> = self.pids_seen.iter().chain(&leftovers).copied().collect();
        for pid in reapable {
            if let Some(reaped) = child::try_reap(pid) {
                self.add_reaped(reaped);
            }
        }
    }

    fn add_reaped(&mut self, reaped: Reaped) {
        self.cpu.add(reaped.cpu);
        self.kernel_peak_rss = self.kernel_peak_rss.max(reaped.max_rss);
    }
}

impl Run<'_, '_> {
    fn take_sample(&mut self, kind: SampleKind, label: Option<&str>) -> Option<Taken> {
        // Marker samples are the figures users read per event: always fresh PSS.
        let sampler = self.sampler.as_mut()?;
        let sample = match kind {
            SampleKind::Marker => sampler.sample_full(),
            SampleKind::Interval => sampler.sample(),
        }
        .ok()?;
        let ended = Instant::now();
        let markers_seen = self.watch.as_ref().map(|w| w.seen.load(Ordering::SeqCst));
        let t = results_dir::sample_instant(sample.at.saturating_duration_since(self.started_at));
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
            t: results_dir::sample_seconds(t),
            pss: total.pss,
            rss: total.rss,
            uss: total.uss,
            vss: total.vss,
            swap: total.swap,
            anon: total.anonymous,
            ksm: sample.ksm.as_ref().map(|k| {
                let page = k.system.as_ref().map_or(0, |s| s.page_size);
                KsmPoint {
                    merging: k.merging,
                    profit: k.profit,
                    sharing: k.system.as_ref().map_or(0, |s| s.pages_sharing * page),
                    volatile: k.system.as_ref().map_or(0, |s| s.pages_volatile * page),
                    full_scans: k.system.as_ref().map_or(0, |s| s.full_scans),
                    ksmd_cpu_s: k.ksmd_cpu_s,
                }
            }),
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
    /// The KSM library of `--ksm-mechanism madvise` is looked for the same way.
    fn check_allocator(&mut self, age: Duration) {
        if self.ctx.variant.library.is_none() && self.ksm_library.is_none() {
            return;
        }
        self.checks_done += 1;
        if age > Duration::from_secs(1) && !self.checks_done.is_multiple_of(10) {
            return;
        }
        // Through a live thread if the main thread has exited (pthread_exit).
        let exe = std::fs::read_link(procmem::process_dir(self.root_pid).join("exe")).ok();
        let Ok(mapped) = procmem::mapped_files(self.root_pid) else {
            return;
        };
        if mapped.is_empty() || exe.is_none() {
            return; // exiting: its mappings are gone already
        }
        if self.ctx.variant.library.is_some() {
            let verification = allocators::verify(self.ctx.variant, &mapped);
            settle_check(
                &mut self.check,
                &mut self.loaded_image,
                &verification.status,
                &exe,
                age,
            );
            self.other_allocators = verification.other_allocators;
        }
        if let Some(library) = &self.ksm_library {
            let status = match mapped
                .iter()
                .find(|p| std::fs::canonicalize(p).is_ok_and(|c| c == *library) || *p == library)
            {
                Some(path) => LoadStatus::Loaded { path: path.clone() },
                None => LoadStatus::NotLoaded,
            };
            settle_check(&mut self.ksm_check, &mut self.ksm_image, &status, &exe, age);
        }
    }

    fn handle_line(&mut self, line: Line) {
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
        let (pss_status, pss, pss_delay) = self.marker_pss(&arrival);
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
        arrival: &MarkerArrival,
    ) -> (MarkerStatus, Option<u64>, Option<Duration>) {
        let watch = self.watch.as_ref().expect("markers come with a watch");
        if self.exited_at.is_some() {
            return (MarkerStatus::Missing, None, None);
        }
        if watch.later_than(arrival.seq) {
            return (MarkerStatus::Late, None, None);
        }
        let Some(taken) = self.take_sample(SampleKind::Marker, Some(&arrival.label)) else {
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

    fn finish(self, wall: Duration, sampler_cpu: Duration) -> RunRecord {
        let cpu = self.cpu;
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
            kernel_peak_rss: child::command_peak_rss(self.kernel_peak_rss, self.fork_peak_rss),
        };
        let library = self.ksm_library.is_some().then_some(self.ksm_check);
        let ksm = self.ctx.plan.ksm.then(|| KsmSummary {
            merging_enabled: self.ctx.plan.merges(self.ctx.spec)
                && library != Some(AllocatorCheck::NotLoaded),
            library,
            ..ksm_summary(&self.points)
        });
        let (mut marker_figures, mut marker_pss) =
            (MarkerCounts::default(), MarkerCounts::default());
        for m in &self.markers {
            marker_figures.add(m.status);
            marker_pss.add(m.pss_status);
        }
        let wall_s = wall.as_secs_f64();
        let (throughput, throughput_source) = match self.throughput {
            Some(v) => (Some(v), Some("regex".to_string())),
            // With --throughput, markers per second would be another unit in the same column.
            None if self.ctx.plan.throughput.is_none()
                && !self.markers.is_empty()
                && wall_s > 0.0 =>
            {
                (
                    Some(self.markers.len() as f64 / wall_s),
                    Some("markers".to_string()),
                )
            }
            None => (None, None),
        };
        RunRecord {
            index: self.ctx.spec.index,
            variant: self.ctx.variant.label.clone(),
            allocator: self.ctx.variant.allocator.clone(),
            params: self.ctx.spec.assignment.clone(),
            repeat: self.ctx.spec.repeat,
            command: self.ctx.command.clone(),
            ending: self.ending,
            start_unix_ns: None,
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
            ksm,
        }
    }
}

/// The run's KSM figures from its samples.
/// A library's check after one look at the process: seen mapped in an image, it stays "loaded" for
/// that image (a preload cannot be unmapped); not seen once the loader has had time, "not loaded".
fn settle_check(
    check: &mut AllocatorCheck,
    image: &mut Option<std::path::PathBuf>,
    status: &LoadStatus,
    exe: &Option<std::path::PathBuf>,
    age: Duration,
) {
    match status {
        LoadStatus::Loaded { .. } => {
            *check = AllocatorCheck::Loaded;
            image.clone_from(exe);
        }
        LoadStatus::NotLoaded if *check == AllocatorCheck::Loaded && image == exe => {}
        LoadStatus::NotLoaded if age >= LOADER_SETTLE => *check = AllocatorCheck::NotLoaded,
        LoadStatus::NotLoaded => {}
        LoadStatus::NotApplicable => *check = AllocatorCheck::NotApplicable,
    }
}

/// The run's KSM figures from its samples (`merging_enabled` and `library` are the caller's).
fn ksm_summary(points: &[TotalPoint]) -> KsmSummary {
    let ksm: Vec<(f64, &KsmPoint)> = points
        .iter()
        .filter_map(|p| p.ksm.as_ref().map(|k| (p.t, k)))
        .collect();
    let series = |f: fn(&KsmPoint) -> u64| {
        series_stats(&ksm.iter().map(|(t, k)| (*t, f(k))).collect::<Vec<_>>())
    };
    let merging = series(|k| k.merging);
    let settle_s = (merging.peak > 0)
        .then(|| {
            ksm.iter()
                .find(|(_, k)| k.merging as f64 >= 0.9 * merging.peak as f64)
                .map(|(t, _)| *t)
        })
        .flatten();
    let (first, last) = (ksm.first(), ksm.last());
    let ksmd_cpu_s = match (first, last) {
        (Some((_, a)), Some((_, b))) => a.ksmd_cpu_s.zip(b.ksmd_cpu_s).map(|(a, b)| b - a),
        _ => None,
    };
    let span = match (first, last) {
        (Some((a, _)), Some((b, _))) => b - a,
        _ => 0.0,
    };
    KsmSummary {
        merging_enabled: false,
        library: None,
        merging,
        profit_last: last.map_or(0, |(_, k)| k.profit),
        profit_peak: ksm.iter().map(|(_, k)| k.profit).max().unwrap_or(0),
        sharing: series(|k| k.sharing),
        volatile: series(|k| k.volatile),
        settle_s,
        full_scans: match (first, last) {
            (Some((_, a)), Some((_, b))) => b.full_scans.saturating_sub(a.full_scans),
            _ => 0,
        },
        ksmd_cpu_s,
        ksmd_cpu_pct: ksmd_cpu_s.filter(|_| span > 0.0).map(|c| 100.0 * c / span),
    }
}

fn not_started(ctx: &RunContext<'_>, err: std::io::Error) -> RunRecord {
    let program = ctx.command.first().map(String::as_str).unwrap_or("");
    let message = if err.kind() == std::io::ErrorKind::NotFound {
        format!("command not found: '{program}' (check the spelling or the PATH)")
    } else {
        format!("cannot start '{program}': {err}")
    };
    not_run(ctx, message)
}

/// The record of a run that did not start, `message` saying why.
pub(crate) fn not_run(ctx: &RunContext<'_>, message: String) -> RunRecord {
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
        start_unix_ns: None,
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
        ksm: None,
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
            .filter(|&p| procmem::is_alive(p))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn stop_leftovers(pgid: u32, pids: &[u32]) {
    child::signal_tree(pgid, pids, Signal::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && pids.iter().any(|&p| procmem::is_alive(p)) {
        thread::sleep(Duration::from_millis(10));
    }
    child::signal_tree(pgid, pids, Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_ramp_up_to_the_interval_then_keep_to_its_multiples() {
        let ms = Duration::from_millis;
        let next = |elapsed, interval| next_sample_after(ms(elapsed), ms(interval));
        // After the one at the start: 2, 4, 8 ... ms, then every 100 ms from the start.
        let mut at = 0;
        let mut times = Vec::new();
        while at < 450 {
            at = next(at, 100).as_millis() as u64;
            times.push(at);
        }
        assert_eq!(times, [2, 4, 8, 16, 32, 64, 100, 200, 300, 400, 500]);
        // A late sample does not shift the schedule: the next multiple of the interval.
        assert_eq!(next(130, 100), ms(200));
        assert_eq!(next(63, 100), ms(64));
        // An interval at or below the ramp's first step: no ramp.
        assert_eq!(next(0, 1), ms(1));
        assert_eq!(next(0, 2), ms(2));
        assert_eq!(next(2, 2), ms(4));
    }
}
