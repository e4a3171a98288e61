//! CPU time of one heap residency reading of a running process, each way, beside one smaps read:
//! `cargo run --release -p procmem --example residency_cost -- PID [ROUNDS]`.
//! With `--every MS PID`: a reading (the recorder's way) every MS until the process is gone, then
//! one line: readings, their CPU time as % of one core over the wall time, mean and max ms per
//! reading, the most resident heap bytes read (bench/residency-cost.sh).
use std::time::{Duration, Instant};

use procmem::{own_cpu_time, smaps_reading, PagemapMethod, ResidencyReader};

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--every") {
        let ms = args.nth(1).and_then(|a| a.parse::<u64>().ok());
        let pid = args.next().and_then(|a| a.parse::<u32>().ok());
        let (Some(ms), Some(pid)) = (ms, pid) else {
            eprintln!("usage: residency_cost --every MS PID");
            std::process::exit(2);
        };
        follow(pid, Duration::from_millis(ms));
        return;
    }
    let Some(pid) = args.next().and_then(|a| a.parse::<u32>().ok()) else {
        eprintln!("usage: residency_cost PID [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let per_read = |what: &str, read: &mut dyn FnMut() -> u64| {
        let start = own_cpu_time();
        let mut figure = 0;
        for _ in 0..rounds {
            figure = read();
        }
        let each = (own_cpu_time() - start) / rounds;
        println!(
            "{what:>24}: {:>8.3} ms CPU per reading ({figure} bytes)",
            each.as_secs_f64() * 1e3
        );
    };
    per_read("smaps (heap Rss)", &mut || {
        smaps_reading(pid).unwrap().split.heap
    });
    for method in [PagemapMethod::Scan, PagemapMethod::Read] {
        let mut reader = ResidencyReader::with_method(method);
        per_read(&format!("pagemap {method:?}"), &mut || {
            reader.read(pid).unwrap().resident_bytes()
        });
    }
}

/// Reads `pid`'s heap residency every `interval` until it is gone (as the recorder does with
/// each smaps sample, at most that often) and prints what the readings cost.
fn follow(pid: u32, interval: Duration) {
    let mut reader = ResidencyReader::new();
    let (start, cpu0) = (Instant::now(), own_cpu_time());
    let (mut readings, mut max_cpu, mut max_resident) = (0u32, Duration::ZERO, 0u64);
    loop {
        let before = own_cpu_time();
        let Ok(heap) = reader.read(pid) else { break };
        max_cpu = max_cpu.max(own_cpu_time() - before);
        max_resident = max_resident.max(heap.resident_bytes());
        readings += 1;
        std::thread::sleep(interval);
    }
    let (cpu, wall) = (own_cpu_time() - cpu0, start.elapsed());
    println!(
        "readings {readings} wall_s {:.2} cpu_ms {:.1} core_pct {:.3} mean_ms {:.3} max_ms {:.3} max_heap_resident_mib {:.1}",
        wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e3,
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e3 / f64::from(readings.max(1)),
        max_cpu.as_secs_f64() * 1e3,
        max_resident as f64 / 1048576.0
    );
}
