//! The one reading the per-site figures are taken at (`analyze --sites`, the report's flame
//! graphs, pprof's `resident_space`): the last of the readings with the most resident heap bytes.
//! The peak of the heap's RSS is when "heap is not RSS" matters; the last of equal readings is
//! the state the program holds there rather than a moment while it builds it. (The last reading
//! of all may follow the program's teardown frees, which leave the pages to free memory.)
use serde::{Deserialize, Serialize};
use trace::{Residency, SYNTHETIC_BIT};

use super::blocks::{Block, HeapBlocks};
use super::heap_pages::HeapPages;
use super::split::split;
use super::{Parts, Split};

/// The index in `readings` of the reading the sites' figures are taken at.
pub fn site_reading(readings: &[Residency]) -> Option<usize> {
    // `max_by_key` keeps the last of equal maxima.
    (0..readings.len()).max_by_key(|&i| readings[i].resident_bytes())
}

/// The reading the sites' figures were taken at, and its four parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SitesReading {
    /// The image's seq at the reading.
    pub seq: u64,
    /// ns since the image started.
    pub t_ns: u64,
    #[serde(flatten)]
    pub parts: Parts,
}

/// The split at an image's [`site_reading`], kept beside the per-site pass. The live blocks are
/// the process pass's, handed over once at the reading (`on_live_blocks`): a map of its own of
/// every live block by address (`HeapBlocks`, 64-77 MB at the 1.8 M live blocks of a python3
/// trace) doubled the live set for one reading. What it follows itself is the pages freed
/// blocks lay on (`on_free`), up to the reading.
#[derive(Clone)]
pub struct SitesResidency {
    reading: Residency,
    /// The freed pages until the reading; no live blocks but at the reading's split.
    blocks: HeapBlocks,
    /// The split once made, and whether it was made at the end of the stream (after its last
    /// event: the reading then needs the whole stream).
    split: Option<(Split, bool)>,
}

impl SitesResidency {
    /// None when the image has no reading.
    pub fn new(readings: &[Residency]) -> Option<SitesResidency> {
        let r = &readings[site_reading(readings)?];
        Some(SitesResidency {
            blocks: HeapBlocks::new(r.page_size),
            reading: r.clone(),
            split: None,
        })
    }

    /// The seq before whose event the live blocks are wanted (`u64::MAX` once split).
    #[inline(always)]
    pub fn live_blocks_wanted_at(&self) -> u64 {
        match self.split {
            None => self.reading.seq,
            Some(_) => u64::MAX,
        }
    }

    /// A block at `address` was freed (before the reading, or it is not needed).
    #[inline]
    pub fn on_free(&mut self, address: u64, block: Block) {
        if self.split.is_none() {
            self.blocks.mark_freed(address, block);
        }
    }

    /// The live blocks (address, block) at the reading, in no order; `at_end`: after the
    /// stream's last event.
    pub fn on_live_blocks(&mut self, blocks: impl Iterator<Item = (u64, Block)>, at_end: bool) {
        if self.split.is_some() {
            return;
        }
        // Block ids of a trace without addresses lie on no page.
        let mut live: Vec<(u64, Block)> = blocks
            .filter(|&(a, _)| a != 0 && a & SYNTHETIC_BIT == 0)
            .collect();
        live.sort_unstable_by_key(|&(a, _)| a);
        self.blocks.set_live(live);
        let split = split(&self.blocks, &HeapPages::new(&self.reading));
        self.blocks = HeapBlocks::new(self.reading.page_size);
        self.split = Some((split, at_end));
    }

    /// The reading and its split (per stack id in `Split::sites`). `complete`: every event of
    /// the stream was fed; else a reading after the cut has no split (its blocks are unknown).
    pub fn finish(self, complete: bool) -> Option<(SitesReading, Split)> {
        let (split, at_end) = self.split?;
        if at_end && !complete {
            return None;
        }
        let reading = SitesReading {
            seq: self.reading.seq,
            t_ns: self.reading.t_ns,
            parts: split.parts,
        };
        Some((reading, split))
    }
}
