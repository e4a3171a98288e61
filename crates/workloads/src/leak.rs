//! `leak`: a slow leak in a busy program. Transient objects of four size classes are allocated and
//! freed all the time; two of the classes (200 and 3000 bytes) also leak: a share of them is never
//! freed, at a steady `--leak-kb-per-s`. Live bytes grow with RSS: what `watch` must call a leak,
//! naming the sizes that grow.
//!
//! Every `--report-ms` it prints `live: t_ms=.. bytes=.. blocks=.. table_bytes=.. leaked_200=..
//! leaked_3000=..`: its own count of what is live (requested bytes and blocks of its malloc calls;
//! `table_bytes` is the Rust vector that holds the leaked pointers, also on the heap), so a test
//! can check the agent's live bytes against it. The leaked blocks are never freed.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::heap::{Block, Heap};
use crate::output::{finish, line};
use crate::rng::Rng;
use crate::{require, Summary, WorkloadError};

/// The size classes: (bytes, leaks).
pub const CLASSES: [(usize, bool); 4] = [(32, false), (200, true), (1000, false), (3000, true)];

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LeakOptions {
    /// Run this long, ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().duration_ms))]
    pub duration_ms: u64,
    /// Bytes leaked per second, KiB (half in 200-byte, half in 3000-byte objects).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().leak_kb_per_s))]
    pub leak_kb_per_s: u64,
    /// Transient malloc/free pairs per ms (all four classes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().churn_per_ms))]
    pub churn_per_ms: u32,
    /// Print a `live:` line this often, ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().report_ms))]
    pub report_ms: u64,
    /// After the last `live:` line, stay idle this long (no allocation), ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().hold_ms))]
    pub hold_ms: u64,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = LeakOptions::default().seed))]
    pub seed: u64,
}

impl Default for LeakOptions {
    fn default() -> Self {
        Self {
            duration_ms: 2000,
            leak_kb_per_s: 1024,
            churn_per_ms: 20,
            report_ms: 500,
            hold_ms: 0,
            seed: 42,
        }
    }
}

impl LeakOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let day = 86_400_000;
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
        require(self.report_ms >= 1, "report_ms", "must be at least 1")?;
        require(
            self.leak_kb_per_s <= 1 << 20,
            "leak_kb_per_s",
            "must be at most 1048576 (1 GiB/s)",
        )
    }
}

fn live_line(
    out: &mut dyn Write,
    start: Instant,
    heap: &Heap,
    leaked: &Vec<Block>,
    per_class: &[u64; 4],
) -> Result<(), WorkloadError> {
    line(
        out,
        format_args!(
            "live: t_ms={} bytes={} blocks={} table_bytes={} leaked_200={} leaked_3000={}",
            start.elapsed().as_millis(),
            heap.live_bytes(),
            leaked.len(),
            leaked.capacity() * std::mem::size_of::<Block>(),
            per_class[1],
            per_class[3]
        ),
    )
}

pub fn run(opts: &LeakOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=leak duration_ms={} leak_kb_per_s={} churn_per_ms={} seed={}",
            opts.duration_ms, opts.leak_kb_per_s, opts.churn_per_ms, opts.seed
        ),
    )?;
    let mut rng = Rng::new(opts.seed);
    let mut heap = Heap::new();
    let mut leaked: Vec<Block> = Vec::new();
    let mut per_class = [0u64; 4];
    let mut leaked_bytes = 0u64;
    let mut next_report = opts.report_ms;
    let mut ticks = 0u64;
    let mut which_leak = 1;
    loop {
        let t = start.elapsed().as_millis() as u64;
        if t >= opts.duration_ms {
            break;
        }
        for _ in 0..opts.churn_per_ms {
            let (size, _) = CLASSES[rng.below(4) as usize];
            let mut b = heap.malloc(size)?;
            b.fill_range(0, 64, 1);
            // Read back: a block only written and freed is a pair the compiler may delete.
            std::hint::black_box(b.read_sum(64));
            heap.free(b);
        }
        let target = t * opts.leak_kb_per_s * 1024 / 1000;
        while leaked_bytes < target {
            let mut b = heap.malloc(CLASSES[which_leak].0)?;
            b.fill(0x1e);
            leaked_bytes += b.size() as u64;
            per_class[which_leak] += b.size() as u64;
            leaked.push(b);
            which_leak = if which_leak == 1 { 3 } else { 1 };
        }
        if t >= next_report {
            live_line(out, start, &heap, &leaked, &per_class)?;
            next_report += opts.report_ms;
        }
        ticks += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    live_line(out, start, &heap, &leaked, &per_class)?;
    std::thread::sleep(Duration::from_millis(opts.hold_ms));
    let summary = Summary {
        workload: "leak",
        ops: ticks,
        unit: "ticks",
        elapsed: start.elapsed(),
        allocator_calls: heap.calls(),
        checksum: heap.checksum(),
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    // A leak: the blocks stay allocated until the process ends.
    std::mem::forget(leaked);
    finish(out, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaks_at_the_rate_asked_in_the_two_classes() {
        let opts = LeakOptions {
            duration_ms: 200,
            leak_kb_per_s: 1000,
            report_ms: 50,
            ..LeakOptions::default()
        };
        let mut out = Vec::new();
        let s = run(&opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let last = text.lines().rfind(|l| l.starts_with("live:")).unwrap();
        let get = |k: &str| -> u64 {
            last.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .unwrap()
                .parse()
                .unwrap()
        };
        // 200 ms at 1000 KiB/s: about 200 KiB, one object over at most.
        let bytes = get("bytes");
        assert!((195 * 1024..=205 * 1024 + 3000).contains(&bytes), "{last}");
        assert_eq!(bytes, get("leaked_200") + get("leaked_3000"));
        assert_eq!(get("leaked_200") % 200, 0);
        assert_eq!(get("leaked_3000") % 3000, 0);
        assert!(s.allocator_calls > get("blocks"), "transient calls too");
    }

    #[test]
    fn bad_options_are_named() {
        let opts = LeakOptions {
            report_ms: 0,
            ..LeakOptions::default()
        };
        let e = run(&opts, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("report_ms"), "{e}");
    }
}
