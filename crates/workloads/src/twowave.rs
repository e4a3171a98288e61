//! `twowave`: memory freed but not returned (LinkedIn Venice).
//!
//! Wave A of small objects, then wave B of the same, then all of A is freed and B kept. A sits below B
//! in glibc's heap, so glibc can only trim the top and A's pages stay resident; an allocator that
//! purges freed pages (jemalloc with `dirty_decay_ms:0`) gives them back. A hold phase with light
//! allocator activity follows, as in a server: jemalloc without a background thread only purges when
//! the allocator is called.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::heap::{Block, Heap};
use crate::output::{finish, line, self_vmrss_kb};
use crate::rng::Rng;
use crate::{require, require_size_range, RssMark, Summary, WorkloadError};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TwowaveOptions {
    /// MiB requested per wave.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().wave_mb))]
    pub wave_mb: u64,
    /// Smallest object, bytes.
    // Sizes are uniform in `min_size..=max_size`.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().min_size))]
    pub min_size: u64,
    /// Largest object, bytes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().max_size))]
    pub max_size: u64,
    /// Hold wave B this long after freeing A, with light allocator activity, ms (at most 86400000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().hold_ms))]
    pub hold_ms: u64,
    /// malloc/free pairs per ms during the hold.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().activity_per_ms))]
    pub activity_per_ms: u32,
    /// Print `vmrss: PHASE KB kB` after each phase line.
    #[cfg_attr(feature = "clap", arg(long))]
    pub report_rss: bool,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TwowaveOptions::default().seed))]
    pub seed: u64,
}

impl Default for TwowaveOptions {
    fn default() -> Self {
        Self {
            wave_mb: 64,
            min_size: 64,
            max_size: 512,
            hold_ms: 1500,
            activity_per_ms: 4,
            report_rss: false,
            seed: 42,
        }
    }
}

impl TwowaveOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require(self.wave_mb >= 1, "wave_mb", "must be at least 1")?;
        require(
            self.wave_mb <= 1 << 20,
            "wave_mb",
            "must be at most 1048576 (1 TiB)",
        )?;
        require(
            self.hold_ms <= 86_400_000,
            "hold_ms",
            "must be at most 86400000 (one day)",
        )?;
        require_size_range(self.min_size, self.max_size)?;
        require(
            self.max_size <= self.wave_mb << 20,
            "max_size",
            "must not exceed the wave size",
        )
    }
}

/// Phase names, in order; each is printed as `phase: <name>` when the phase is complete.
pub const PHASES: [&str; 4] = ["wave-a", "wave-b", "freed-a", "end"];

pub fn run(opts: &TwowaveOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    let mut rng = Rng::new(opts.seed);
    let mut heap = Heap::new();
    let mut marks = Vec::new();
    line(
        out,
        format_args!(
            "start: workload=twowave wave_mb={} sizes={}..{} hold_ms={} seed={}",
            opts.wave_mb, opts.min_size, opts.max_size, opts.hold_ms, opts.seed
        ),
    )?;

    let wave_a = allocate_wave(opts, &mut rng, &mut heap, 0xA)?;
    phase(out, opts, &mut marks, PHASES[0])?;
    let wave_b = allocate_wave(opts, &mut rng, &mut heap, 0xB)?;
    phase(out, opts, &mut marks, PHASES[1])?;
    for block in wave_a {
        heap.free(block);
    }
    phase(out, opts, &mut marks, PHASES[2])?;
    hold(opts, &mut rng, &mut heap)?;
    phase(out, opts, &mut marks, PHASES[3])?;
    let objects = wave_b.len() as u64;
    for block in wave_b {
        heap.free(block);
    }

    let summary = Summary {
        workload: "twowave",
        ops: 2 * objects,
        unit: "objects",
        elapsed: start.elapsed(),
        allocator_calls: heap.calls(),
        checksum: heap.checksum(),
        rss_marks: marks,
        processes: Vec::new(),
    };
    finish(out, summary)
}

fn allocate_wave(
    opts: &TwowaveOptions,
    rng: &mut Rng,
    heap: &mut Heap,
    fill: u8,
) -> Result<Vec<Block>, WorkloadError> {
    let target = opts.wave_mb << 20;
    let mean = (opts.min_size + opts.max_size) / 2;
    // The pointer table is Rust's (one large allocation up front, so it does not interleave with the
    // wave); everything the wave is made of is malloc'ed one object at a time.
    let mut blocks = Vec::with_capacity((target / mean.max(1) + 16) as usize);
    let mut total = 0u64;
    while total < target {
        let size = rng.range(opts.min_size, opts.max_size);
        let mut block = heap.malloc(size as usize)?;
        block.fill(fill);
        total += size;
        blocks.push(block);
    }
    Ok(blocks)
}

/// A few small malloc/free pairs per millisecond, like a server between requests. The number of rounds
/// is fixed (`hold_ms`), so the call sequence does not depend on timing.
fn hold(opts: &TwowaveOptions, rng: &mut Rng, heap: &mut Heap) -> Result<(), WorkloadError> {
    for _ in 0..opts.hold_ms {
        for _ in 0..opts.activity_per_ms {
            let size = rng.range(opts.min_size, opts.max_size);
            let mut block = heap.malloc(size as usize)?;
            block.fill(0x5);
            heap.free(block);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// How long the heap stays as it is after a phase line: a sampler reads the memory at the line
/// (`run --marker` reads RSS and VSS as the line arrives), and without the pause the next phase (or,
/// after `end`, freeing wave B and exiting) could already have changed it.
const SETTLE: Duration = Duration::from_millis(50);

fn phase(
    out: &mut dyn Write,
    opts: &TwowaveOptions,
    marks: &mut Vec<RssMark>,
    name: &str,
) -> Result<(), WorkloadError> {
    line(out, format_args!("phase: {name}"))?;
    std::thread::sleep(SETTLE);
    if opts.report_rss {
        let kb = self_vmrss_kb()?;
        line(out, format_args!("vmrss: {name} {kb} kB"))?;
        marks.push(RssMark {
            label: name.to_string(),
            vmrss_kb: kb,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> TwowaveOptions {
        TwowaveOptions {
            wave_mb: 2,
            hold_ms: 5,
            report_rss: true,
            seed,
            ..Default::default()
        }
    }

    #[test]
    fn prints_every_phase_in_order_and_is_deterministic() {
        let mut out = Vec::new();
        let a = run(&small(1), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let phases: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("phase: "))
            .collect();
        assert_eq!(phases, PHASES);
        assert_eq!(a.rss_marks.len(), 4);
        assert!(text.lines().last().unwrap().starts_with("throughput: "));

        let b = run(&small(1), &mut Vec::new()).unwrap();
        let c = run(&small(2), &mut Vec::new()).unwrap();
        assert_eq!(a.checksum, b.checksum);
        assert_eq!(a.allocator_calls, b.allocator_calls);
        assert_ne!(a.checksum, c.checksum);
        // Two waves of at least 2 MiB of at most 512-byte objects.
        assert!(a.ops >= 2 * (2 << 20) / 512);
    }

    #[test]
    fn rejects_inconsistent_sizes() {
        let opts = TwowaveOptions {
            min_size: 600,
            ..Default::default()
        };
        let err = run(&opts, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("min_size"), "{err}");
    }
}
