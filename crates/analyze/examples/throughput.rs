//! Throughput of the core pass on a synthetic stream (no file, no decoding).
//!
//! `cargo run --release -p analyze --example throughput -- [EVENTS] [LIVE_SLOTS] [YOUNG_SHARE]`
//! (defaults: 100 M events, 65 536 long-lived slots, 0.95). Each event picks a slot: with probability
//! YOUNG_SHARE among 256 "young" slots (short lifetimes, as most allocations in the field study), else
//! among the long-lived ones. YOUNG_SHARE 0 gives the worst case: uniformly random accesses to the
//! whole live set. Records are generated in chunks of 64 Ki, as the trace reader decodes them; only the
//! analysis of the chunks is timed, in wall time and in CPU time of the thread (the CPU figure is the
//! steadier one on a shared machine: it does not count the time other processes had the core).
use std::time::{Duration, Instant};

use analyze::{Config, ProcessAnalyzer};
use trace::{ProcessInfo, Record};

#[path = "synthetic/mod.rs"]
mod synthetic;
use synthetic::Synthetic;

const CHUNK: usize = 1 << 16;

fn main() {
    let mut args = std::env::args().skip(1);
    let events: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000_000);
    let slots: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(65_536);
    let young: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.95);
    let info = ProcessInfo {
        pid: 1,
        ppid: 0,
        exec_index: 0,
        cmdline: vec!["synthetic".into()],
        start_unix_ns: 0,
        truncated: false,
    };

    // Records arrive in decoded chunks (as from the trace reader); only the analysis is timed.
    let mut source = Synthetic::new(events, slots, young);
    let mut analyzer = ProcessAnalyzer::new(info, &Config::default());
    let mut chunk: Vec<Record> = Vec::with_capacity(CHUNK);
    let mut busy = Duration::ZERO;
    let mut cpu = Duration::ZERO;
    loop {
        chunk.clear();
        chunk.extend(source.by_ref().take(CHUNK));
        if chunk.is_empty() {
            break;
        }
        let (t, c) = (Instant::now(), thread_cpu_time());
        analyzer.feed_chunk(&chunk);
        busy += t.elapsed();
        cpu += thread_cpu_time().saturating_sub(c);
    }
    let t = Instant::now();
    let report = analyzer.finish();
    let fin = t.elapsed();
    let n = report.life_calls as f64;
    println!(
        "analysis pass: {} events in {:.2} s = {:.1} M events/s (CPU {:.2} s = {:.1} M events/s); report built in {:.3} s",
        report.life_calls,
        busy.as_secs_f64(),
        n / busy.as_secs_f64() / 1e6,
        cpu.as_secs_f64(),
        n / cpu.as_secs_f64() / 1e6,
        fin.as_secs_f64()
    );
    println!(
        "peak live {} B, {} allocations, median lifetime {:?} calls, {} phases, {} timeline points",
        report.stats.peak_live_bytes.value,
        report.stats.peak_live_allocations.value,
        report.stats.lifetimes.median_calls,
        report.phases.len(),
        report.timeline_by_calls.len()
    );
}

/// CPU time consumed by the calling thread so far.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
