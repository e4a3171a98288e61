//! `churn`: tight malloc/free of mixed small sizes, as in mimalloc-bench's allocation stress tests.
//!
//! Each thread keeps a table of `slots` live objects; every op frees the object in a random slot and
//! allocates a new one of a log-uniform size (8 B to 1 KiB by default, so mostly small), writing it.
//! Measures the allocator's fast path and its reuse of recently freed memory.

use std::io::Write;
use std::time::Instant;

use crate::heap::{Block, Heap};
use crate::output::{finish, line};
use crate::rng::Rng;
use crate::{require, require_size_range, require_threads, Summary, WorkloadError};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ChurnOptions {
    /// free+malloc ops per thread.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().ops))]
    pub ops: u64,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().threads))]
    pub threads: u32,
    /// Live objects per thread.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().slots))]
    pub slots: u32,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().min_size))]
    pub min_size: u64,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().max_size))]
    pub max_size: u64,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ChurnOptions::default().seed))]
    pub seed: u64,
}

impl Default for ChurnOptions {
    fn default() -> Self {
        Self {
            ops: 3_000_000,
            threads: 1,
            slots: 4096,
            min_size: 8,
            max_size: 1024,
            seed: 42,
        }
    }
}

impl ChurnOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require_threads(self.threads)?;
        require(
            (1..=10_000_000).contains(&self.slots),
            "slots",
            "must be between 1 and 10000000",
        )?;
        require_size_range(self.min_size, self.max_size)
    }
}

pub fn run(opts: &ChurnOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=churn ops={} threads={} slots={} sizes={}..{} seed={}",
            opts.ops, opts.threads, opts.slots, opts.min_size, opts.max_size, opts.seed
        ),
    )?;
    let results: Vec<Result<(u64, u64), WorkloadError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|t| scope.spawn(move || churn_thread(opts, t)))
            .collect();
        crate::join_workers(handles)
    });
    let (calls, checksum) = crate::combine_thread_results(results, opts.seed)?;
    let summary = Summary {
        workload: "churn",
        ops: opts.ops * u64::from(opts.threads),
        unit: "ops",
        elapsed: start.elapsed(),
        allocator_calls: calls,
        checksum,
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    finish(out, summary)
}

fn churn_thread(opts: &ChurnOptions, thread: u32) -> Result<(u64, u64), WorkloadError> {
    let mut rng = Rng::stream(opts.seed, u64::from(thread));
    let mut heap = Heap::new();
    let mut slots: Vec<Option<Block>> = (0..opts.slots).map(|_| None).collect();
    for _ in 0..opts.ops {
        let i = rng.below(slots.len() as u64) as usize;
        if let Some(old) = slots[i].take() {
            heap.free(old);
        }
        let size = rng.log_uniform(opts.min_size, opts.max_size);
        let mut block = heap.malloc(size as usize)?;
        block.fill(i as u8);
        slots[i] = Some(block);
    }
    for block in slots.into_iter().flatten() {
        heap.free(block);
    }
    Ok((heap.calls(), heap.checksum()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_op_is_one_malloc_and_all_is_freed() {
        let opts = ChurnOptions {
            ops: 20_000,
            threads: 2,
            slots: 100,
            ..Default::default()
        };
        let mut out = Vec::new();
        let a = run(&opts, &mut out).unwrap();
        // ops mallocs and ops frees per thread (every slot is freed by the end).
        assert_eq!(a.allocator_calls, 2 * 2 * 20_000);
        assert_eq!(a.checksum, run(&opts, &mut Vec::new()).unwrap().checksum);
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().last().unwrap().ends_with(" ops/s"));
    }
}
