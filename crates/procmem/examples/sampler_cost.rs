//! What does sampling a process tree cost? Spawns a tree of processes that each hold a few MB and
//! sleep, samples it at a fixed rate with both PSS refresh policies side by side (two samplers on
//! the same tree, interleaved: each ticks at the given rate, half an interval apart, over the same
//! wall time), and prints each one's CPU time per sample and as a share of one core, their ratio,
//! and the machine. Run through bench/sampler-cost.sh.
//!
//! Options: --processes N (16: 1 parent + N-1 children), --hz F (10), --seconds S (10),
//!          --mb M (4, held by each process), --holder self|python (self: this binary, ~20 mappings;
//!          python: python3 interpreters, ~80 mappings each, closer to real programs).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use procmem::{own_cpu_time, thread_cpu_time, PssRefresh, SamplerOptions, TreeSampler};

struct Options {
    processes: usize,
    hz: f64,
    seconds: f64,
    mb: usize,
    python: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Hidden modes used to build the tree out of this very binary.
    match args.first().map(String::as_str) {
        Some("--hold") => hold(parse(&args, "--hold", 4), 0),
        Some("--hold-parent") => hold(
            parse(&args, "--hold-parent", 4),
            parse(&args, "--children", 0),
        ),
        _ => {}
    }
    let opts = Options {
        processes: parse(&args, "--processes", 16).max(1),
        hz: parse(&args, "--hz", 10.0),
        seconds: parse(&args, "--seconds", 10.0),
        mb: parse(&args, "--mb", 4),
        python: args
            .windows(2)
            .any(|w| w[0] == "--holder" && w[1] == "python"),
    };
    if let Err(e) = run(&opts) {
        eprintln!("sampler_cost: {e}");
        std::process::exit(1);
    }
}

fn parse<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => match args.get(i + 1).map(|v| v.parse()) {
            Some(Ok(v)) => v,
            _ => {
                eprintln!("sampler_cost: {name} needs a value");
                std::process::exit(2)
            }
        },
        None => default,
    }
}

/// Holds `mb` MB of touched memory, starts `children` holders, then sleeps until killed.
fn hold(mb: usize, children: usize) -> ! {
    let mut data = vec![0u8; mb << 20];
    for i in (0..data.len()).step_by(4096) {
        data[i] = 1;
    }
    let exe = std::env::current_exe().expect("own path");
    let _kids: Vec<_> = (0..children)
        .map(|_| {
            Command::new(&exe)
                .args(["--hold", &mb.to_string()])
                .spawn()
                .expect("spawn holder")
        })
        .collect();
    loop {
        std::hint::black_box(&data);
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn spawn_tree(opts: &Options) -> std::io::Result<std::process::Child> {
    let children = opts.processes - 1;
    let mut cmd = if opts.python {
        let script = format!(
            "import os, time\n\
             def hold():\n\
             \x20   d = bytearray({mb} << 20)\n\
             \x20   for i in range(0, len(d), 4096): d[i] = 1\n\
             \x20   while True: time.sleep(3600)\n\
             for _ in range({children}):\n\
             \x20   if os.fork() == 0: hold()\n\
             hold()\n",
            mb = opts.mb
        );
        let mut c = Command::new("python3");
        c.args(["-c", &script]);
        c
    } else {
        let mut c = Command::new(std::env::current_exe()?);
        c.args([
            "--hold-parent",
            &opts.mb.to_string(),
            "--children",
            &children.to_string(),
        ]);
        c
    };
    cmd.stdin(Stdio::null()).process_group(0).spawn()
}

fn run(opts: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let mut root = spawn_tree(opts)?;
    let pgid = nix::unistd::Pid::from_raw(root.id() as i32);
    let result = measure(opts, root.id());
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    let _ = root.wait();
    result
}

/// What one policy's sampler cost over the run.
struct Cost {
    name: String,
    sampler: TreeSampler,
    cpu_per_sample: Vec<Duration>,
    wall_per_sample: Vec<Duration>,
    seen: Vec<usize>,
    stale: Vec<u32>,
    max_age_seen: u32,
}

impl Cost {
    fn new(name: &str, root: u32, pss_refresh: PssRefresh) -> procmem::Result<Cost> {
        let options = SamplerOptions {
            pss_refresh,
            ..Default::default()
        };
        Ok(Cost {
            name: name.into(),
            sampler: TreeSampler::new(root, options)?,
            cpu_per_sample: Vec::new(),
            wall_per_sample: Vec::new(),
            seen: Vec::new(),
            stale: Vec::new(),
            max_age_seen: 0,
        })
    }

    fn tick(&mut self) -> procmem::Result<()> {
        let (t0, c0) = (Instant::now(), thread_cpu_time());
        let s = self.sampler.sample()?;
        let c1 = thread_cpu_time();
        self.wall_per_sample.push(t0.elapsed());
        self.cpu_per_sample.push(c1 - c0);
        self.seen.push(s.processes.len());
        self.stale.push(s.stale_processes);
        let oldest = s.processes.iter().map(|p| p.pss_age).max().unwrap_or(0);
        self.max_age_seen = self.max_age_seen.max(oldest);
        Ok(())
    }

    fn cpu_share(&self, wall: Duration) -> f64 {
        let cpu: Duration = self.cpu_per_sample.iter().sum();
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    }

    fn mean_cpu(&self) -> Duration {
        self.cpu_per_sample.iter().sum::<Duration>() / self.cpu_per_sample.len().max(1) as u32
    }

    fn report(&self, wall: Duration) {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let n = self.cpu_per_sample.len();
        let mut sorted = self.cpu_per_sample.clone();
        sorted.sort();
        let mean_wall = self.wall_per_sample.iter().sum::<Duration>() / n.max(1) as u32;
        let processes: usize = self.seen.iter().sum();
        let stale: u32 = self.stale.iter().sum();
        println!(
            "{:<22} CPU {:6.3} % of one core; per sample CPU mean {:5.0} µs, median {:5.0} µs, \
             max {:5.0} µs, wall mean {:5.0} µs; processes {}..{}; PSS carried forward {:.0} % \
             (oldest pss_age {})",
            self.name,
            self.cpu_share(wall),
            us(self.mean_cpu()),
            us(sorted[n / 2]),
            us(sorted[n - 1]),
            us(mean_wall),
            self.seen.iter().min().unwrap_or(&0),
            self.seen.iter().max().unwrap_or(&0),
            100.0 * f64::from(stale) / processes.max(1) as f64,
            self.max_age_seen,
        );
    }
}

fn measure(opts: &Options, root: u32) -> Result<(), Box<dyn std::error::Error>> {
    let mut probe = TreeSampler::new(root, SamplerOptions::default())?;
    // Wait (untimed) until every process holds its memory.
    let want_pss = (opts.processes * opts.mb) as u64 * (1 << 20);
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        let s = probe.sample_full()?;
        if s.processes.len() == opts.processes && s.total.pss >= want_pss {
            break;
        }
        if Instant::now() > ready_by {
            return Err(
                format!("tree not ready after 60 s: {} processes", s.processes.len()).into(),
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    let default_policy = PssRefresh::default();
    let mut policies = [
        Cost::new("every sample:", root, PssRefresh::EverySample)?,
        Cost::new(&format!("{default_policy:?}:"), root, default_policy)?,
    ];
    let interval = Duration::from_secs_f64(1.0 / opts.hz);
    let samples = (opts.seconds * opts.hz).round().max(1.0) as usize;
    let (start_wall, start_cpu) = (Instant::now(), own_cpu_time());
    for k in 0..samples {
        for (i, cost) in policies.iter_mut().enumerate() {
            // Each policy ticks at the rate asked, half an interval after the other.
            let due = start_wall + interval * k as u32 + interval / 2 * i as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            cost.tick()?;
        }
    }
    let wall = start_wall.elapsed();
    let cpu = own_cpu_time() - start_cpu;

    // The /proc listing alone: a sampler whose root does not exist.
    let mut empty = TreeSampler::new(u32::MAX - 1, SamplerOptions::default())?;
    empty.sample()?;
    let c0 = thread_cpu_time();
    let listings = 200;
    for _ in 0..listings {
        empty.sample()?;
    }
    let listing_cpu = (thread_cpu_time() - c0) / listings;

    println!("machine:   {}", machine());
    println!(
        "tree:      {} processes ({} holder, {} MB each), {} processes on the system",
        opts.processes,
        if opts.python { "python3" } else { "self" },
        opts.mb,
        count_processes()
    );
    println!(
        "sampling:  {} samples per policy at {} Hz, interleaved, over {:.2} s wall",
        samples,
        opts.hz,
        wall.as_secs_f64(),
    );
    for cost in &policies {
        cost.report(wall);
    }
    let [every, adaptive] = &policies;
    println!(
        "ratio:     adaptive / every sample = {:.2} (CPU per sample)",
        adaptive.mean_cpu().as_secs_f64() / every.mean_cpu().as_secs_f64()
    );
    println!(
        "listing /proc and classifying alone: {:.0} µs CPU per sample",
        listing_cpu.as_secs_f64() * 1e6
    );
    println!(
        "whole process: {:.3} % of one core for both samplers  [target < 2 % per sampler]",
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    );
    Ok(())
}

fn machine() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_default();
    format!("{nproc} CPUs, {model}, Linux {kernel}")
}

fn count_processes() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .count()
        })
        .unwrap_or(0)
}
