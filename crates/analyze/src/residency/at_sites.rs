//! The one reading the per-site figures are taken at (`analyze --sites`, the report's flame
//! graphs, pprof's `resident_space`): the last of the readings with the most resident heap bytes.
//! The peak of the heap's RSS is when "heap is not RSS" matters; the last of equal readings is
//! the state the program holds there rather than a moment while it builds it. (The last reading
//! of all may follow the program's teardown frees, which leave the pages to free memory.)
use serde::{Deserialize, Serialize};
use trace::{Event, Residency};

use super::{Parts, ResidencyPass, Split};

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

/// The split at an image's [`site_reading`], fed the image's events beside the per-site pass.
#[derive(Clone)]
pub struct SitesResidency {
    pass: ResidencyPass,
    seq: u64,
    t_ns: u64,
}

impl SitesResidency {
    /// None when the image has no reading.
    pub fn new(readings: &[Residency]) -> Option<SitesResidency> {
        let r = &readings[site_reading(readings)?];
        Some(SitesResidency {
            pass: ResidencyPass::new(vec![r.clone()]),
            seq: r.seq,
            t_ns: r.t_ns,
        })
    }

    pub fn on_event(&mut self, e: &Event) {
        self.pass.on_event(e);
    }

    /// The reading and its split (per stack id in `Split::sites`). `complete`: every event of
    /// the stream was fed; else a reading after the cut has no split (its blocks are unknown).
    pub fn finish(self, complete: bool) -> Option<(SitesReading, Split)> {
        let (_, split) = self.pass.finish(complete).pop()?;
        let reading = SitesReading {
            seq: self.seq,
            t_ns: self.t_ns,
            parts: split.parts,
        };
        Some((reading, split))
    }
}
