//! `realloc`: strings grown by appending (git-cinnabar).
//!
//! `strings` strings are built at once; each append picks one, adds a log-normal chunk (median
//! `append_median` bytes) and reallocs it, either to the exact new length (naive appending: one realloc
//! per append, the pattern git-cinnabar found "realloc()ating way too much") or by doubling the
//! capacity. Between appends, small short-lived objects are allocated and freed, so a string often
//! cannot grow in place and realloc has to move it. A string that reaches `max_kb` KiB is finished:
//! freed, or kept to the end with probability `keep_permille`.

use std::io::Write;
use std::time::Instant;

use crate::heap::{Block, Heap};
use crate::output::{finish, line};
use crate::rng::Rng;
use crate::{require, Summary, WorkloadError};

/// How a string's capacity follows its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Growth {
    /// realloc to the exact length on every append
    Exact,
    /// realloc to twice the capacity when full
    Doubling,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ReallocOptions {
    /// Total appends.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().appends))]
    pub appends: u64,
    /// Strings built at the same time.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().strings))]
    pub strings: u32,
    /// Median appended chunk, bytes.
    // Log-normal, clamped to 1..=4096.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().append_median))]
    pub append_median: u64,
    /// A string is finished at this size, KiB.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().max_kb))]
    pub max_kb: u64,
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value = "exact"))]
    pub growth: Growth,
    /// Finished strings per thousand kept to the end.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().keep_permille))]
    pub keep_permille: u32,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ReallocOptions::default().seed))]
    pub seed: u64,
}

impl Default for ReallocOptions {
    fn default() -> Self {
        Self {
            appends: 1_000_000,
            strings: 64,
            append_median: 24,
            max_kb: 256,
            growth: Growth::Exact,
            keep_permille: 20,
            seed: 42,
        }
    }
}

impl ReallocOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require(
            (1..=1_000_000).contains(&self.strings),
            "strings",
            "must be between 1 and 1000000",
        )?;
        require(
            self.append_median >= 1,
            "append_median",
            "must be at least 1",
        )?;
        require(
            (1..=1 << 20).contains(&self.max_kb),
            "max_kb",
            "must be between 1 and 1048576",
        )?;
        require(
            self.keep_permille <= 1000,
            "keep_permille",
            "must be at most 1000",
        )
    }
}

/// Short-lived small objects live in a ring this big.
const SMALL_RING: usize = 1024;

struct Text {
    block: Option<Block>,
    len: usize,
}

pub fn run(opts: &ReallocOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=realloc appends={} strings={} max_kb={} growth={:?} seed={}",
            opts.appends, opts.strings, opts.max_kb, opts.growth, opts.seed
        ),
    )?;
    let mut rng = Rng::new(opts.seed);
    let mut heap = Heap::new();
    let max_len = (opts.max_kb << 10) as usize;
    let mut texts: Vec<Text> = (0..opts.strings)
        .map(|_| Text {
            block: None,
            len: 0,
        })
        .collect();
    let mut small: Vec<Option<Block>> = (0..SMALL_RING).map(|_| None).collect();
    let mut kept = Vec::new();
    let tenth = (opts.appends / 10).max(1);

    for n in 1..=opts.appends {
        let text = &mut texts[rng.below(u64::from(opts.strings)) as usize];
        let chunk = rng
            .log_normal(opts.append_median as f64, 1.5)
            .clamp(1.0, 4096.0) as usize;
        append(&mut heap, text, chunk, opts.growth)?;
        if text.len >= max_len {
            if let Some(block) = text.block.take() {
                if rng.permille(opts.keep_permille) {
                    kept.push(block);
                } else {
                    heap.free(block);
                }
            }
            text.len = 0;
        }
        // A short-lived small object in between, as the surrounding code would allocate.
        let slot = &mut small[rng.below(SMALL_RING as u64) as usize];
        if let Some(old) = slot.take() {
            heap.free(old);
        }
        let mut block = heap.malloc(rng.log_uniform(16, 256) as usize)?;
        block.fill(0x11);
        *slot = Some(block);
        if n % tenth == 0 {
            line(out, format_args!("progress: {n} appends"))?;
        }
    }
    let leftovers = texts.into_iter().filter_map(|t| t.block);
    for block in leftovers.chain(small.into_iter().flatten()).chain(kept) {
        heap.free(block);
    }
    let summary = Summary {
        workload: "realloc",
        ops: opts.appends,
        unit: "appends",
        elapsed: start.elapsed(),
        allocator_calls: heap.calls(),
        checksum: heap.checksum(),
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    finish(out, summary)
}

/// Appends `chunk` bytes to `text`, reallocating as `growth` says, and writes them.
fn append(
    heap: &mut Heap,
    text: &mut Text,
    chunk: usize,
    growth: Growth,
) -> Result<(), WorkloadError> {
    let new_len = text.len + chunk;
    let mut block = match text.block.take() {
        None => heap.malloc(match growth {
            Growth::Exact => new_len,
            Growth::Doubling => new_len.next_power_of_two(),
        })?,
        Some(block) if block.size() >= new_len => block,
        Some(block) => {
            let cap = match growth {
                Growth::Exact => new_len,
                Growth::Doubling => (block.size() * 2).max(new_len),
            };
            heap.realloc(block, cap)?
        }
    };
    block.fill_range(text.len, new_len, b'a' + (chunk % 26) as u8);
    text.len = new_len;
    text.block = Some(block);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(growth: Growth) -> ReallocOptions {
        ReallocOptions {
            appends: 20_000,
            strings: 8,
            max_kb: 16,
            growth,
            ..Default::default()
        }
    }

    #[test]
    fn exact_growth_reallocs_far_more_than_doubling() {
        let exact = run(&small(Growth::Exact), &mut Vec::new()).unwrap();
        let doubling = run(&small(Growth::Doubling), &mut Vec::new()).unwrap();
        // Same appends and small objects; only the string reallocs differ.
        assert!(
            exact.allocator_calls > doubling.allocator_calls + 10_000,
            "exact {} doubling {}",
            exact.allocator_calls,
            doubling.allocator_calls
        );
        let again = run(&small(Growth::Exact), &mut Vec::new()).unwrap();
        assert_eq!(exact.checksum, again.checksum);
    }

    #[test]
    fn prints_ten_progress_lines() {
        let mut out = Vec::new();
        run(&small(Growth::Doubling), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("progress: ")).count(),
            10
        );
        assert!(text.lines().last().unwrap().ends_with(" appends/s"));
    }
}
