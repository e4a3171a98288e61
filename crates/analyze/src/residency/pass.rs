//! One stream's events in order, split at each of its residency readings as they are passed.
use trace::{Event, Residency};

use super::blocks::HeapBlocks;
use super::heap_pages::HeapPages;
use super::split::{split, Split};

/// Feed it a stream's events in seq order (`on_event`), then `finish`: the split at each reading.
#[derive(Clone)]
pub struct ResidencyPass {
    readings: Vec<Residency>,
    next: usize,
    blocks: HeapBlocks,
    splits: Vec<(usize, Split)>,
}

impl ResidencyPass {
    /// For `readings`, in the order read (seq ascending), which must not be empty.
    pub fn new(readings: Vec<Residency>) -> ResidencyPass {
        ResidencyPass {
            next: 0,
            blocks: HeapBlocks::new(readings.first().map_or(4096, |r| r.page_size)),
            splits: Vec::with_capacity(readings.len()),
            readings,
        }
    }

    /// The readings at or before `e` see the events before it, then `e` is applied.
    pub fn on_event(&mut self, e: &Event) {
        while self.next < self.readings.len() && self.readings[self.next].seq <= e.seq {
            self.split_next();
        }
        self.blocks.on_event(e);
    }

    fn split_next(&mut self) {
        let reading = &self.readings[self.next];
        self.splits
            .push((self.next, split(&self.blocks, &HeapPages::new(reading))));
        self.next += 1;
    }

    /// The split at each reading (its index in the readings), in order. `complete`: the whole
    /// stream was fed, so the readings after its last event are split too; a stream cut by
    /// damage leaves them out (their blocks are unknown).
    pub fn finish(mut self, complete: bool) -> Vec<(usize, Split)> {
        if complete {
            while self.next < self.readings.len() {
                self.split_next();
            }
        }
        self.splits
    }
}
