//! `xthread`: objects allocated in one thread and freed in another (ATLAS multi-threaded HLT).
//!
//! `threads` producers each allocate `objects` objects (16 B to 1 KiB, log-uniform), write them, and
//! send them in batches through a bounded channel to their own consumer thread, which reads and frees
//! them. Every free is therefore remote: the allocator must hand memory back across threads (glibc's
//! arenas, tcmalloc's central lists, mimalloc's delayed frees...). The channel allocates too, as real
//! task queues do.

use std::io::Write;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use crate::heap::{Block, Heap};
use crate::output::{finish, line};
use crate::rng::Rng;
use crate::{require, require_size_range, require_threads, Summary, WorkloadError};

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct XthreadOptions {
    /// Producer threads (each with its own consumer thread).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().threads))]
    pub threads: u32,
    /// Objects per producer.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().objects))]
    pub objects: u64,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().min_size))]
    pub min_size: u64,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().max_size))]
    pub max_size: u64,
    /// Objects per message to the consumer.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().batch))]
    pub batch: u32,
    /// Messages in flight before a producer blocks.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().queue))]
    pub queue: u32,
    /// Seed of the allocation sequence (same seed, same calls and sizes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = XthreadOptions::default().seed))]
    pub seed: u64,
}

impl Default for XthreadOptions {
    fn default() -> Self {
        Self {
            threads: 2,
            objects: 1_000_000,
            min_size: 16,
            max_size: 1024,
            batch: 64,
            queue: 16,
            seed: 42,
        }
    }
}

impl XthreadOptions {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require_threads(self.threads)?;
        require_size_range(self.min_size, self.max_size)?;
        require(self.batch >= 1, "batch", "must be at least 1")?;
        require(self.queue >= 1, "queue", "must be at least 1")
    }
}

/// What one thread did: its calls and its digest of (call, size).
type ThreadTally = (u64, u64);

pub fn run(opts: &XthreadOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.validate()?;
    let start = Instant::now();
    line(
        out,
        format_args!(
            "start: workload=xthread threads={} objects={} sizes={}..{} seed={}",
            opts.threads, opts.objects, opts.min_size, opts.max_size, opts.seed
        ),
    )?;

    let results: Vec<Result<ThreadTally, WorkloadError>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for t in 0..opts.threads {
            let (tx, rx) = sync_channel::<Vec<Block>>(opts.queue as usize);
            handles.push(scope.spawn(move || {
                let mut rng = Rng::stream(opts.seed, u64::from(t));
                let mut heap = Heap::new();
                let mut batch = Vec::with_capacity(opts.batch as usize);
                for _ in 0..opts.objects {
                    let size = rng.log_uniform(opts.min_size, opts.max_size);
                    let mut block = heap.malloc(size as usize)?;
                    block.fill(t as u8);
                    batch.push(block);
                    if batch.len() == opts.batch as usize {
                        let full =
                            std::mem::replace(&mut batch, Vec::with_capacity(opts.batch as usize));
                        // The consumer only stops early if it panicked; its join reports that.
                        if tx.send(full).is_err() {
                            break;
                        }
                    }
                }
                if !batch.is_empty() {
                    let _ = tx.send(batch);
                }
                Ok((heap.calls(), heap.checksum()))
            }));
            handles.push(scope.spawn(move || {
                let mut heap = Heap::new();
                for batch in rx {
                    for block in batch {
                        block.read_sum(64);
                        heap.free(block);
                    }
                }
                Ok((heap.calls(), heap.checksum()))
            }));
        }
        crate::join_workers(handles)
    });

    let (calls, checksum) = crate::combine_thread_results(results, opts.seed)?;
    let summary = Summary {
        workload: "xthread",
        ops: u64::from(opts.threads) * opts.objects,
        unit: "objects",
        elapsed: start.elapsed(),
        allocator_calls: calls,
        checksum,
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    finish(out, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_is_allocated_and_freed_and_runs_repeat() {
        let opts = XthreadOptions {
            threads: 3,
            objects: 5_000,
            batch: 7,
            ..Default::default()
        };
        let mut out = Vec::new();
        let a = run(&opts, &mut out).unwrap();
        // One malloc per object by producers, one free per object by consumers.
        assert_eq!(a.allocator_calls, 2 * 3 * 5_000);
        assert_eq!(a.ops, 15_000);
        let b = run(&opts, &mut Vec::new()).unwrap();
        assert_eq!(a.checksum, b.checksum);
        let c = run(&XthreadOptions { seed: 1, ..opts }, &mut Vec::new()).unwrap();
        assert_ne!(a.checksum, c.checksum);
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().last().unwrap().ends_with(" objects/s"));
    }
}
