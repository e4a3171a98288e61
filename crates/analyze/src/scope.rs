//! Running totals of one scope (a process, a thread or a phase), updated on the hot path, and their
//! conversion to a `ScopeReport` at the end.

use std::collections::BTreeMap;

use hashbrown::HashMap;
use trace::Op;

use crate::analysis::{
    CdfPoint, LeakReport, LeakSize, LifetimeReport, Peak, Percentile, ScopeReport,
};
use crate::histogram::{LogCounts, LogHistogram, SizeCounts};
use crate::sizes::{size_report, OverRepresentedRule};

/// The ranks reported as percentiles.
pub const PERCENTILES: [f64; 10] = [0.10, 0.25, 0.50, 0.75, 0.80, 0.90, 0.95, 0.99, 0.999, 1.0];

/// Maxima of live bytes and live allocations of a scope, with when they were first reached.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peaks {
    pub bytes: Peak,
    pub allocations: Peak,
}

impl Peaks {
    #[inline]
    pub fn observe(&mut self, live_bytes: u64, live_allocations: u64, call: u64, t_ns: u64) {
        if live_bytes > self.bytes.value {
            self.bytes = Peak {
                value: live_bytes,
                call,
                t_ns,
            };
        }
        if live_allocations > self.allocations.value {
            self.allocations = Peak {
                value: live_allocations,
                call,
                t_ns,
            };
        }
    }

    pub fn merge(&mut self, other: &Peaks) {
        if other.bytes.value > self.bytes.value {
            self.bytes = other.bytes;
        }
        if other.allocations.value > self.allocations.value {
            self.allocations = other.allocations;
        }
    }
}

/// Totals of a scope. The pass keeps one per (thread, phase) cell so that each event touches one;
/// process, thread and phase figures are merges of cells.
#[derive(Debug, Clone, Default)]
pub struct ScopeStats {
    /// Indexed by the op tag.
    pub calls: [u64; 16],
    pub allocations: u64,
    pub requests: u64,
    pub requested_bytes: u64,
    /// Wrapping arithmetic: reallocs that shrink subtract; the true total is never negative.
    pub cumulated_lower_bytes: u64,
    pub failed_allocations: u64,
    pub failed_bytes: u64,
    pub null_frees: u64,
    pub unmatched_frees: u64,
    pub unmatched_freed_bytes: u64,
    pub unmatched_reallocs: u64,
    /// Peaks are tracked outside the cells (a peak of a union is not a merge of peaks) and set
    /// before reporting.
    pub peaks: Peaks,
    pub sizes: SizeCounts,
    pub lifetime_calls: LogHistogram,
    pub lifetime_ns: LogCounts,
    pub leak_count: u64,
    pub leak_bytes: u64,
    pub leak_sizes: HashMap<u64, u64>,
}

impl ScopeStats {
    #[inline(always)]
    pub fn request(&mut self, size: u64) {
        self.requests += 1;
        self.requested_bytes = self.requested_bytes.wrapping_add(size);
        self.sizes.record(size);
    }

    /// An allocation of `size` bytes that returned NULL.
    #[inline]
    pub fn failed(&mut self, size: u64) {
        self.failed_allocations += 1;
        self.failed_bytes = self.failed_bytes.wrapping_add(size);
    }

    #[inline(always)]
    pub fn lifetime(&mut self, calls: u64, ns: u64) {
        self.lifetime_calls.record(calls);
        self.lifetime_ns.record(ns);
    }

    pub fn leak(&mut self, size: u64) {
        self.leak_count += 1;
        self.leak_bytes = self.leak_bytes.wrapping_add(size);
        *self.leak_sizes.entry(size).or_insert(0) += 1;
    }

    /// Add the totals of another scope (cells of one thread, or of one phase, are merged this way).
    /// Peaks keep the larger value.
    pub fn merge(&mut self, other: &ScopeStats) {
        for (a, b) in self.calls.iter_mut().zip(other.calls) {
            *a += b;
        }
        self.allocations += other.allocations;
        self.requests += other.requests;
        self.requested_bytes = self.requested_bytes.wrapping_add(other.requested_bytes);
        self.cumulated_lower_bytes = self
            .cumulated_lower_bytes
            .wrapping_add(other.cumulated_lower_bytes);
        self.failed_allocations += other.failed_allocations;
        self.failed_bytes = self.failed_bytes.wrapping_add(other.failed_bytes);
        self.null_frees += other.null_frees;
        self.unmatched_frees += other.unmatched_frees;
        self.unmatched_freed_bytes = self
            .unmatched_freed_bytes
            .wrapping_add(other.unmatched_freed_bytes);
        self.unmatched_reallocs += other.unmatched_reallocs;
        self.peaks.merge(&other.peaks);
        self.sizes.merge(&other.sizes);
        self.lifetime_calls.merge(&other.lifetime_calls);
        self.lifetime_ns.merge(&other.lifetime_ns);
        self.leak_count += other.leak_count;
        self.leak_bytes = self.leak_bytes.wrapping_add(other.leak_bytes);
        for (size, n) in &other.leak_sizes {
            *self.leak_sizes.entry(*size).or_insert(0) += n;
        }
    }

    pub fn report(&self, life_calls: u64, settings: &ReportSettings) -> ScopeReport {
        let calls: BTreeMap<String, u64> = Op::ALL
            .iter()
            .filter(|op| self.calls[**op as usize] > 0)
            .map(|op| (op.name().to_string(), self.calls[*op as usize]))
            .collect();
        ScopeReport {
            calls_total: self.calls.iter().sum(),
            calls,
            allocations: self.allocations,
            requests: self.requests,
            requested_bytes: self.requested_bytes,
            cumulated_lower_bytes: self.cumulated_lower_bytes,
            failed_allocations: self.failed_allocations,
            failed_bytes: self.failed_bytes,
            null_frees: self.null_frees,
            unmatched_frees: self.unmatched_frees,
            unmatched_freed_bytes: self.unmatched_freed_bytes,
            unmatched_reallocs: self.unmatched_reallocs,
            peak_live_bytes: self.peaks.bytes,
            peak_live_allocations: self.peaks.allocations,
            sizes: size_report(&self.sizes, &settings.over_represented),
            lifetimes: self.lifetime_report(life_calls),
            leaks: self.leak_report(settings.top_leak_sizes),
        }
    }

    fn lifetime_report(&self, life_calls: u64) -> LifetimeReport {
        let h = &self.lifetime_calls;
        let share = |calls: u64| {
            if life_calls == 0 {
                0.0
            } else {
                calls as f64 / life_calls as f64
            }
        };
        let count = h.total();
        let percentiles = if count == 0 {
            Vec::new()
        } else {
            PERCENTILES
                .iter()
                .map(|&q| {
                    let calls = h.quantile(q).unwrap_or(0);
                    Percentile {
                        q,
                        calls,
                        share_of_life: share(calls),
                        ns: self.lifetime_ns.quantile(q).unwrap_or(0),
                    }
                })
                .collect()
        };
        // Log-spaced points, two per octave (1, 2, 3, 4, 6, 8, 12, ...): exact bucket edges.
        let mut cdf = Vec::new();
        if count > 0 {
            let mut k = 0u32;
            loop {
                let x = 1u64 << k;
                for below in [x, x + x / 2] {
                    cdf.push(CdfPoint {
                        below_calls: below,
                        share_of_life: share(below),
                        fraction: h.count_below(below) as f64 / count as f64,
                    });
                }
                if x > h.max() || k == 63 {
                    break;
                }
                k += 1;
            }
            cdf.dedup_by_key(|p| p.below_calls);
        }
        LifetimeReport {
            count,
            share_zero: if count == 0 {
                0.0
            } else {
                h.count_below(1) as f64 / count as f64
            },
            median_calls: h.quantile(0.5),
            median_ns: self.lifetime_ns.quantile(0.5),
            mean_calls: h.mean(),
            max_calls: h.max(),
            percentiles,
            cdf,
        }
    }

    fn leak_report(&self, top: usize) -> LeakReport {
        let mut sizes: Vec<LeakSize> = self
            .leak_sizes
            .iter()
            .map(|(size, count)| LeakSize {
                size: *size,
                count: *count,
                bytes: size.wrapping_mul(*count),
            })
            .collect();
        sizes.sort_by(|a, b| {
            b.bytes
                .cmp(&a.bytes)
                .then(b.count.cmp(&a.count))
                .then(a.size.cmp(&b.size))
        });
        sizes.truncate(top);
        LeakReport {
            count: self.leak_count,
            bytes: self.leak_bytes,
            top_sizes: sizes,
        }
    }
}

/// Knobs of the final reports (not of the hot path).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSettings {
    pub over_represented: OverRepresentedRule,
    pub top_leak_sizes: usize,
}

impl Default for ReportSettings {
    fn default() -> Self {
        ReportSettings {
            over_represented: OverRepresentedRule::default(),
            top_leak_sizes: 20,
        }
    }
}
