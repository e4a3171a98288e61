//! PLACEHOLDER (s2-symbols): the shape of s1-capture's `analyze::sites` as docs/notes' interface gives
//! it, so that the call-site views compile before S1's module is merged. Replaced by S1's file on merge.
use crate::histogram::LogHistogram;

pub type Histogram = LogHistogram;

/// The figures of one stack in one process.
#[derive(Debug, Clone, Default)]
pub struct SiteStats {
    pub stack: u32,
    pub pid: u32,
    pub calls: u64,
    pub requested_bytes: u64,
    pub peak_live_bytes: u64,
    pub leaked_bytes: u64,
    pub leaked_blocks: u64,
    pub lifetime_zero: u64,
    pub lifetime_calls: Histogram,
    pub lifetime_ns: Histogram,
    pub sizes: Histogram,
}

impl crate::process::ProcessAnalyzer {
    /// PLACEHOLDER: S1's pass hands over its per-stack figures here.
    pub fn take_sites(&mut self) -> Vec<SiteStats> {
        Vec::new()
    }
}
