//! `cache`: a long-running key-value cache (LinkedIn Venice). `--threads` threads insert values of
//! varying sizes into shards shared by all threads, each shard evicting (freeing) random values once
//! it holds more than its share of `--capacity-mb`: the live set stays flat at the capacity, while
//! a value is often freed by another thread than the one that allocated it, and the value sizes
//! drift over time (the window of sizes moves from small to large and back every `--drift-ms`), as
//! a cache's content does. Under glibc the freed chunks, spread over several arenas and the wrong
//! sizes for the next values, pile up: RSS creeps up while the live bytes stay flat. Under jemalloc
//! RSS stays with the live set (dirty pages decay).
//!
//! Every `--report-ms` it prints `live: t_ms=.. bytes=.. blocks=.. vmrss_kb=..`: its own count of
//! the values live (requested bytes and blocks), so a test can check the agent's figures.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::heap::{Block, Heap};
use crate::output::{finish, line, self_vmrss_kb};
use crate::rng::Rng;
use crate::{require, require_size_range, require_threads, Summary, WorkloadError};

const SHARDS: usize = 64;

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CacheOptions {
    /// Writer threads.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().threads))]
    pub threads: u32,
    /// Live set the cache keeps, MiB (requested bytes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().capacity_mb))]
    pub capacity_mb: u64,
    /// Smallest value, bytes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().min_size))]
    pub min_size: u64,
    /// Largest value, bytes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().max_size))]
    pub max_size: u64,
    /// Run this long, ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().duration_ms))]
    pub duration_ms: u64,
    /// Period of the size drift (small to large values and back), ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().drift_ms))]
    pub drift_ms: u64,
    /// The busy thread changes this often, ms (requests move between threads, as a server's do).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().rotate_ms))]
    pub rotate_ms: u64,
    /// Inserts per ms of the busy thread (the others insert a tenth of it).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().inserts_per_ms))]
    pub inserts_per_ms: u32,
    /// Print a `live:` line this often, ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().report_ms))]
    pub report_ms: u64,
    /// After the last `live:` line, keep the values this long with no allocation, ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().hold_ms))]
    pub hold_ms: u64,
    /// Seed of the allocation sequence.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CacheOptions::default().seed))]
    pub seed: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            threads: 4,
            capacity_mb: 16,
            min_size: 64,
            max_size: 64 * 1024,
            duration_ms: 2000,
            drift_ms: 2000,
            rotate_ms: 1000,
            inserts_per_ms: 40,
            report_ms: 500,
            hold_ms: 0,
            seed: 42,
        }
    }
}

impl CacheOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let day = 86_400_000;
        require_threads(self.threads)?;
        require_size_range(self.min_size, self.max_size)?;
        require(self.capacity_mb >= 1, "capacity_mb", "must be at least 1")?;
        require(
            self.capacity_mb <= 1 << 20,
            "capacity_mb",
            "must be at most 1048576 (1 TiB)",
        )?;
        require(
            self.max_size <= self.capacity_mb << 20,
            "max_size",
            "must not exceed the capacity",
        )?;
        require(
            self.duration_ms <= day,
            "duration_ms",
            "must be at most 86400000 (one day)",
        )?;
        require(
            self.hold_ms <= day,
            "hold_ms",
            "must be at most 86400000 (one day)",
        )?;
        require(self.drift_ms >= 1, "drift_ms", "must be at least 1")?;
        require(self.rotate_ms >= 1, "rotate_ms", "must be at least 1")?;
        require(self.report_ms >= 1, "report_ms", "must be at least 1")?;
        require(
            self.inserts_per_ms >= 1,
            "inserts_per_ms",
            "must be at least 1",
        )
    }
}

struct Shard {
    values: Vec<Block>,
    bytes: u64,
}

/// The size window at `t_ms`: it climbs (in log scale) from the smallest sizes to the largest over
/// `drift_ms`, then starts again from the smallest.
fn size_window(opts: &CacheOptions, t_ms: u64) -> (u64, u64) {
    let tri = (t_ms % opts.drift_ms) as f64 / opts.drift_ms as f64;
    let (lo, hi) = ((opts.min_size as f64).ln(), (opts.max_size as f64).ln());
    let width = (hi - lo) / 3.0;
    let from = lo + tri * (hi - lo - width);
    // Rounded: exp(ln(64)) is 63.99...
    let size = |x: f64| (x.exp().round() as u64).clamp(opts.min_size, opts.max_size);
    (size(from), size(from + width))
}

pub fn run(opts: &CacheOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=cache threads={} capacity_mb={} sizes={}..{} duration_ms={} drift_ms={} seed={}",
            opts.threads, opts.capacity_mb, opts.min_size, opts.max_size, opts.duration_ms,
            opts.drift_ms, opts.seed
        ),
    )?;
    let shards: Vec<Mutex<Shard>> = (0..SHARDS)
        .map(|_| {
            Mutex::new(Shard {
                values: Vec::new(),
                bytes: 0,
            })
        })
        .collect();
    let share = (opts.capacity_mb << 20) / SHARDS as u64;
    let live_bytes = AtomicU64::new(0);
    let live_blocks = AtomicU64::new(0);
    let inserts = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let results: Vec<Result<(u64, u64), WorkloadError>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for t in 0..opts.threads {
            let (shards, live_bytes, live_blocks, inserts, stop) =
                (&shards, &live_bytes, &live_blocks, &inserts, &stop);
            handles.push(scope.spawn(move || {
                let mut rng = Rng::stream(opts.seed, u64::from(t));
                let mut heap = Heap::new();
                while !stop.load(Ordering::Relaxed) {
                    let t_ms = start.elapsed().as_millis() as u64;
                    let (lo, hi) = size_window(opts, t_ms);
                    let busy = (t_ms / opts.rotate_ms) % u64::from(opts.threads) == u64::from(t);
                    let n = if busy {
                        opts.inserts_per_ms
                    } else {
                        (opts.inserts_per_ms / 10).max(1)
                    };
                    for _ in 0..n {
                        let size = rng.log_uniform(lo.max(1), hi.max(lo.max(1)));
                        let mut value = heap.malloc(size as usize)?;
                        value.fill(t as u8);
                        let mut shard = shards[rng.below(SHARDS as u64) as usize]
                            .lock()
                            .expect("a writer panicked");
                        shard.bytes += size;
                        shard.values.push(value);
                        live_bytes.fetch_add(size, Ordering::Relaxed);
                        live_blocks.fetch_add(1, Ordering::Relaxed);
                        while shard.bytes > share && shard.values.len() > 1 {
                            let i = rng.below(shard.values.len() as u64) as usize;
                            let old = shard.values.swap_remove(i);
                            shard.bytes -= old.size() as u64;
                            live_bytes.fetch_sub(old.size() as u64, Ordering::Relaxed);
                            live_blocks.fetch_sub(1, Ordering::Relaxed);
                            heap.free(old);
                        }
                    }
                    inserts.fetch_add(u64::from(n), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok((heap.calls(), heap.checksum()))
            }));
        }
        let mut report = || -> Result<(), WorkloadError> {
            let mut next = opts.report_ms;
            loop {
                let t = start.elapsed().as_millis() as u64;
                if t >= opts.duration_ms {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(
                    next.saturating_sub(t).min(opts.duration_ms - t),
                ));
                if start.elapsed().as_millis() as u64 >= next {
                    live_line(out, start, &live_bytes, &live_blocks)?;
                    next += opts.report_ms;
                }
            }
        };
        let reported = report();
        stop.store(true, Ordering::Relaxed);
        let mut results = crate::join_workers(handles);
        if let Err(e) = reported {
            results.push(Err(e));
        }
        results
    });
    let (calls, checksum) = crate::combine_thread_results(results, opts.seed)?;
    live_line(out, start, &live_bytes, &live_blocks)?;
    std::thread::sleep(Duration::from_millis(opts.hold_ms));
    let mut heap = Heap::new();
    for shard in shards {
        for v in shard.into_inner().expect("a writer panicked").values {
            heap.free(v);
        }
    }
    let summary = Summary {
        workload: "cache",
        ops: inserts.load(Ordering::Relaxed),
        unit: "inserts",
        elapsed: start.elapsed(),
        allocator_calls: calls + heap.calls(),
        checksum,
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    finish(out, summary)
}

fn live_line(
    out: &mut dyn Write,
    start: Instant,
    bytes: &AtomicU64,
    blocks: &AtomicU64,
) -> Result<(), WorkloadError> {
    line(
        out,
        format_args!(
            "live: t_ms={} bytes={} blocks={} vmrss_kb={}",
            start.elapsed().as_millis(),
            bytes.load(Ordering::Relaxed),
            blocks.load(Ordering::Relaxed),
            self_vmrss_kb()?
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_set_stays_at_the_capacity() {
        let opts = CacheOptions {
            threads: 2,
            capacity_mb: 2,
            max_size: 16 * 1024,
            duration_ms: 600,
            drift_ms: 300,
            rotate_ms: 100,
            report_ms: 100,
            ..CacheOptions::default()
        };
        let mut out = Vec::new();
        run(&opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lives: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("live:"))
            .map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("bytes="))
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(lives.len() >= 3, "{text}");
        // Never above the capacity by more than one value per shard.
        let cap = 2 << 20;
        assert!(
            lives.iter().all(|&b| b <= cap + 64 * 16 * 1024),
            "{lives:?}"
        );
        assert!(text.contains("done: workload=cache"));
    }

    #[test]
    fn size_window_climbs_then_starts_again() {
        let opts = CacheOptions::default();
        let (a, _) = size_window(&opts, 0);
        let (b, _) = size_window(&opts, opts.drift_ms / 2);
        let (c, _) = size_window(&opts, opts.drift_ms);
        assert!(a < b && c == a, "{a} {b} {c}");
        assert_eq!(a, opts.min_size);
    }
}
