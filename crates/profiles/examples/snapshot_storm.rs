//! Reads a running process's heap profile table as often as asked, for bench/profile-cost.sh's
//! claim that snapshots do not stop or slow the program: `snapshot_storm PID HZ SECONDS` takes a
//! snapshot (`profiles::snapshot::take_pid`: the table read, the estimates made; no pprof file)
//! HZ times a second for SECONDS or until the process ended, then prints `snapshots N failed F
//! mean_ms M max_ms X`.
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pid, hz, seconds] = args.as_slice() else {
        eprintln!("usage: snapshot_storm PID HZ SECONDS");
        std::process::exit(2);
    };
    let (Ok(pid), Ok(hz), Ok(seconds)) = (
        pid.parse::<u32>(),
        hz.parse::<f64>(),
        seconds.parse::<f64>(),
    ) else {
        eprintln!("snapshot_storm: PID, HZ and SECONDS are numbers");
        std::process::exit(2);
    };
    let period = Duration::from_secs_f64(1.0 / hz.max(0.001));
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut done, mut failed, mut total, mut max) = (0u64, 0u64, Duration::ZERO, Duration::ZERO);
    let mut next = Instant::now();
    while Instant::now() < end {
        let start = Instant::now();
        match profiles::snapshot::take_pid(pid) {
            Ok(_) => done += 1,
            // A process that ended (a zombie has no exe) ends the storm.
            Err(_) if std::fs::read_link(format!("/proc/{pid}/exe")).is_err() => break,
            Err(_) => failed += 1,
        }
        let took = start.elapsed();
        total += took;
        max = max.max(took);
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let n = (done + failed).max(1) as f64;
    println!(
        "snapshots {done} failed {failed} mean_ms {:.3} max_ms {:.3}",
        total.as_secs_f64() * 1e3 / n,
        max.as_secs_f64() * 1e3
    );
}
