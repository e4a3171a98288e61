//! `events`: an event loop with heavy-tailed allocations (CMS reconstruction).
//!
//! Each event allocates a heavy-tailed number of objects with log-normal sizes (16 B to several MB),
//! frees about half of them as temporaries while it runs, grows a few buffers with realloc, and frees
//! everything at the end of the event except a small long-lived part. Event size itself is heavy
//! tailed: now and then a big event allocates many times more. The CMS study plotted RSS after each
//! event: glibc keeps the peak of big events, jemalloc gives it back.

use std::io::Write;
use std::time::Instant;

use crate::heap::{Block, Heap};
use crate::output::{finish, line};
use crate::rng::Rng;
use crate::{require, Summary, WorkloadError};

/// The shape of one event's allocations; shared with `forkworkers`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventShape {
    /// Median number of objects in an ordinary event.
    pub objects: u64,
    /// Median object size in bytes (log-normal, shape 1.8).
    pub size_median: u64,
    /// Object sizes are clamped to `16..=max_object` bytes.
    pub max_object: u64,
    /// realloc-grown buffers per event.
    pub buffers: u32,
    /// Median final size of a buffer, bytes (scaled with the event).
    pub buffer_median: u64,
    /// Buffers are capped at this many bytes.
    pub max_buffer: u64,
    /// Objects per thousand that outlive their event (kept to the end of the run).
    pub keep_permille: u32,
    /// Events per thousand that are big (4x to 50x, Pareto tail).
    pub big_permille: u32,
}

impl Default for EventShape {
    fn default() -> Self {
        Self {
            objects: 2000,
            size_median: 256,
            max_object: 4 << 20,
            buffers: 2,
            buffer_median: 256 << 10,
            max_buffer: 32 << 20,
            keep_permille: 5,
            big_permille: 50,
        }
    }
}

impl EventShape {
    pub fn validate(&self) -> Result<(), WorkloadError> {
        require(self.objects >= 1, "objects", "must be at least 1")?;
        require(
            self.objects <= 10_000_000,
            "objects",
            "must be at most 10000000",
        )?;
        require(self.size_median >= 16, "size_median", "must be at least 16")?;
        require(self.max_object >= 16, "max_object", "must be at least 16")?;
        require(
            self.max_buffer >= 4096,
            "max_buffer",
            "must be at least 4096",
        )?;
        require(
            self.keep_permille <= 1000,
            "keep_permille",
            "must be at most 1000",
        )?;
        require(
            self.big_permille <= 1000,
            "big_permille",
            "must be at most 1000",
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventsOptions {
    pub events: u64,
    pub shape: EventShape,
    pub seed: u64,
}

impl Default for EventsOptions {
    fn default() -> Self {
        Self {
            events: 200,
            shape: EventShape::default(),
            seed: 42,
        }
    }
}

pub fn run(opts: &EventsOptions, out: &mut dyn Write) -> Result<Summary, WorkloadError> {
    opts.shape.validate()?;
    let start = Instant::now();
    let mut rng = Rng::new(opts.seed);
    let mut heap = Heap::new();
    let mut kept = Vec::new();
    line(
        out,
        format_args!(
            "start: workload=events events={} objects={} keep_permille={} seed={}",
            opts.events, opts.shape.objects, opts.shape.keep_permille, opts.seed
        ),
    )?;
    for n in 1..=opts.events {
        run_event(&opts.shape, &mut rng, &mut heap, &mut kept)?;
        line(out, format_args!("event {n}"))?;
    }
    for block in kept {
        heap.free(block);
    }
    let summary = Summary {
        workload: "events",
        ops: opts.events,
        unit: "events",
        elapsed: start.elapsed(),
        allocator_calls: heap.calls(),
        checksum: heap.checksum(),
        rss_marks: Vec::new(),
        processes: Vec::new(),
    };
    finish(out, summary)
}

/// A buffer grown by realloc toward `target`, 1.5x per step, writing each new part (like a
/// serialisation buffer or a growing collection).
struct Growing {
    block: Block,
    target: usize,
}

impl Growing {
    fn done(&self) -> bool {
        self.block.size() >= self.target
    }

    fn grow(self, heap: &mut Heap) -> Result<Growing, WorkloadError> {
        let old = self.block.size();
        let new = (old + old / 2).min(self.target);
        let mut block = heap.realloc(self.block, new)?;
        block.fill_range(old, new, 0xB);
        Ok(Growing {
            block,
            target: self.target,
        })
    }
}

/// One event: allocate, use, mostly free. Objects chosen to outlive the event go to `kept`.
pub(crate) fn run_event(
    shape: &EventShape,
    rng: &mut Rng,
    heap: &mut Heap,
    kept: &mut Vec<Block>,
) -> Result<(), WorkloadError> {
    // Mild variation for every event, and a Pareto-tailed multiplier for the occasional big one.
    let mut scale = rng.pareto(1.0, 3.0).min(4.0);
    if rng.permille(shape.big_permille) {
        scale *= rng.pareto(4.0, 1.2).min(50.0);
    }
    let objects = ((shape.objects as f64 * scale) as u64).max(1);

    let mut buffers = Vec::with_capacity(shape.buffers as usize);
    for _ in 0..shape.buffers {
        let target = rng
            .log_normal(shape.buffer_median as f64 * scale, 1.0)
            .clamp(4096.0, shape.max_buffer as f64) as usize;
        let mut block = heap.malloc(4096.min(target))?;
        block.fill(0xB);
        buffers.push(Growing { block, target });
    }

    let mut live: Vec<Block> = Vec::with_capacity(objects as usize);
    for _ in 0..objects {
        let size = rng
            .log_normal(shape.size_median as f64, 1.8)
            .clamp(16.0, shape.max_object as f64) as usize;
        // Some objects are zero-initialised arrays.
        let mut block = if rng.below(8) == 0 {
            heap.calloc(size)?
        } else {
            heap.malloc(size)?
        };
        block.fill(0xE);
        if rng.permille(shape.keep_permille) {
            kept.push(block);
        } else {
            live.push(block);
        }
        // About half the objects are temporaries freed while the event still runs.
        if !live.is_empty() && rng.below(2) == 0 {
            let victim = rng.below(live.len() as u64) as usize;
            heap.free(live.swap_remove(victim));
        }
        // Buffers grow in between, so their reallocs cannot always extend in place.
        if !buffers.is_empty() && rng.below(16) == 0 {
            let i = rng.below(buffers.len() as u64) as usize;
            let buffer = buffers.swap_remove(i);
            buffers.push(if buffer.done() {
                buffer
            } else {
                buffer.grow(heap)?
            });
        }
    }
    for mut buffer in buffers {
        while !buffer.done() {
            buffer = buffer.grow(heap)?;
        }
        heap.free(buffer.block);
    }
    for block in live {
        heap.free(block);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> EventsOptions {
        EventsOptions {
            events: 12,
            shape: EventShape {
                objects: 200,
                buffer_median: 32 << 10,
                ..Default::default()
            },
            seed,
        }
    }

    #[test]
    fn prints_one_marker_per_event_then_the_throughput() {
        let mut out = Vec::new();
        let s = run(&small(5), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let events: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event "))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(events, (1..=12).collect::<Vec<_>>());
        assert_eq!(s.ops, 12);
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("throughput: ") && last.ends_with(" events/s"),
            "{last}"
        );
    }

    #[test]
    fn same_seed_same_allocations() {
        let a = run(&small(9), &mut Vec::new()).unwrap();
        let b = run(&small(9), &mut Vec::new()).unwrap();
        let c = run(&small(10), &mut Vec::new()).unwrap();
        assert_eq!(
            (a.checksum, a.allocator_calls),
            (b.checksum, b.allocator_calls)
        );
        assert_ne!(a.checksum, c.checksum);
    }
}
