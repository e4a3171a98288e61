//! What does sampling a process tree cost? Spawns a tree of processes that each hold a few MB and
//! sleep, samples it at a fixed rate, and prints the sampler's own CPU time per sample and as a
//! share of one core, with the machine described. Run through bench/sampler-cost.sh.
//!
//! Options: --processes N (16: 1 parent + N-1 children), --hz F (10), --seconds S (10),
//!          --mb M (4, held by each process), --holder self|python (self: this binary, ~20 mappings;
//!          python: python3 interpreters, ~80 mappings each, closer to real programs).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use procmem::{own_cpu_time, thread_cpu_time, SamplerOptions, TreeSampler};

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

fn measure(opts: &Options, root: u32) -> Result<(), Box<dyn std::error::Error>> {
    let mut sampler = TreeSampler::new(root, SamplerOptions::default())?;
    // Wait (untimed) until every process holds its memory.
    let want_pss = (opts.processes * opts.mb) as u64 * (1 << 20);
    let ready_by = Instant::now() + Duration::from_secs(60);
    loop {
        let s = sampler.sample()?;
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

    let interval = Duration::from_secs_f64(1.0 / opts.hz);
    let samples = (opts.seconds * opts.hz).round().max(1.0) as usize;
    let mut cpu_per_sample = Vec::with_capacity(samples);
    let mut wall_per_sample = Vec::with_capacity(samples);
    let mut seen = Vec::with_capacity(samples);
    let (start_wall, start_cpu, start_thread) = (Instant::now(), own_cpu_time(), thread_cpu_time());
    for k in 0..samples {
        let due = start_wall + interval * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (t0, c0) = (Instant::now(), thread_cpu_time());
        let s = sampler.sample()?;
        let c1 = thread_cpu_time();
        wall_per_sample.push(t0.elapsed());
        cpu_per_sample.push(c1 - c0);
        seen.push(s.processes.len());
    }
    let wall = start_wall.elapsed();
    let cpu = own_cpu_time() - start_cpu;
    let thread_cpu = thread_cpu_time() - start_thread;

    // The /proc listing alone: a sampler whose root does not exist.
    let mut empty = TreeSampler::new(u32::MAX - 1, SamplerOptions::default())?;
    empty.sample()?;
    let c0 = thread_cpu_time();
    let listings = 200;
    for _ in 0..listings {
        empty.sample()?;
    }
    let listing_cpu = (thread_cpu_time() - c0) / listings;

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut cpu_sorted = cpu_per_sample.clone();
    cpu_sorted.sort();
    let mean_cpu = cpu_per_sample.iter().sum::<Duration>() / samples as u32;
    let mean_wall = wall_per_sample.iter().sum::<Duration>() / samples as u32;

    println!("machine:   {}", machine());
    println!(
        "tree:      {} processes ({} holder, {} MB each), {} processes on the system",
        opts.processes,
        if opts.python { "python3" } else { "self" },
        opts.mb,
        count_processes()
    );
    println!(
        "sampling:  {} samples at {} Hz over {:.2} s wall; processes seen per sample {}..{}",
        samples,
        opts.hz,
        wall.as_secs_f64(),
        seen.iter().min().unwrap_or(&0),
        seen.iter().max().unwrap_or(&0)
    );
    println!(
        "per sample: CPU mean {:.0} µs, median {:.0} µs, max {:.0} µs; wall mean {:.0} µs",
        us(mean_cpu),
        us(cpu_sorted[samples / 2]),
        us(cpu_sorted[samples - 1]),
        us(mean_wall)
    );
    println!(
        "           of which listing /proc and classifying: {:.0} µs CPU",
        us(listing_cpu)
    );
    println!(
        "CPU share: {:.3} % of one core (sampling thread), {:.3} % (whole process)  [target < 2 %]",
        100.0 * thread_cpu.as_secs_f64() / wall.as_secs_f64(),
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
