//! The metrics of the analysis, one table per kind of result: `SCOPE_METRICS` for a process, thread or
//! phase (`ScopeReport`), `TIMELINE_COLUMNS` for a point of a timeline (`TimelinePoint`),
//! `SIZE_HISTOGRAMS` for the request-size histograms (`SizeReport`). Each entry
//! gives the name (the CSV and Parquet column), the unit, the meaning (docs/metrics.md) and the accessor;
//! every tabular output (CSV, text tables, HTML tables, headlines, Parquet, charts) reads its figures
//! from here and only chooses which ones it shows and how it labels them. The JSON is the serde form of
//! the report structs and does not go through these tables.
use serde::{Serialize, Serializer};

use crate::analysis::{Bucket, ScopeReport, SizeReport};
use crate::timeline::TimelinePoint;

/// What a figure counts, so that each output formats it its own way (1,234 / 1.2 KiB / 98.4%).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Calls, allocations, requests: a plain number.
    Count,
    Bytes,
    /// An index or a duration in allocator calls of the process.
    Calls,
    Nanoseconds,
    /// A fraction in [0, 1].
    Share,
}

/// One figure of one scope. `Missing` where it is not defined (no lifetime ended: no median).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u64),
    Share(f64),
    Missing,
}

impl Value {
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(v as f64),
            Value::Share(v) => Some(v),
            Value::Missing => None,
        }
    }
}

/// As the CSV has always written it: integers, floats (shortest round trip) and empty fields.
impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Value::Int(v) => s.serialize_u64(v),
            Value::Share(v) => s.serialize_f64(v),
            Value::Missing => s.serialize_none(),
        }
    }
}

/// A metric of a scope (process, thread or phase).
#[derive(Debug, Clone, Copy)]
pub struct ScopeMetric {
    /// Its name: the CSV column of per_process/per_thread/per_phase.csv.
    pub key: &'static str,
    pub unit: Unit,
    pub meaning: &'static str,
    pub value: fn(&ScopeReport) -> Value,
    /// Whether the summary CSV files have a column for it (a few figures are only shown).
    pub in_csv: bool,
}

const fn scope(
    key: &'static str,
    unit: Unit,
    meaning: &'static str,
    value: fn(&ScopeReport) -> Value,
) -> ScopeMetric {
    ScopeMetric {
        key,
        unit,
        meaning,
        value,
        in_csv: true,
    }
}

fn calls_of(s: &ScopeReport, name: &str) -> u64 {
    s.calls.get(name).copied().unwrap_or(0)
}

fn lifetime_percentile(s: &ScopeReport, q: f64) -> Value {
    s.lifetimes
        .percentiles
        .iter()
        .find(|p| (p.q - q).abs() < 1e-9)
        .map_or(Value::Missing, |p| Value::Int(p.calls))
}

fn maybe(v: Option<u64>) -> Value {
    v.map_or(Value::Missing, Value::Int)
}

use Unit::{Bytes, Calls, Count, Nanoseconds, Share};
use Value::Int;

/// Every metric of a scope, in the order of the summary CSV columns.
pub const SCOPE_METRICS: &[ScopeMetric] = &[
    scope("calls", Count, "allocator calls of every entry point", |s| {
        Int(s.calls_total)
    }),
    scope("malloc", Count, "malloc calls", |s| Int(calls_of(s, "malloc"))),
    scope("calloc", Count, "calloc calls", |s| Int(calls_of(s, "calloc"))),
    scope("realloc", Count, "realloc calls", |s| {
        Int(calls_of(s, "realloc"))
    }),
    scope("free", Count, "free calls", |s| Int(calls_of(s, "free"))),
    scope(
        "other_calls",
        Count,
        "calls of the other entry points (memalign, posix_memalign, ...)",
        |s| {
            let main = ["malloc", "calloc", "realloc", "free"]
                .iter()
                .map(|n| calls_of(s, n))
                .sum::<u64>();
            Int(s.calls_total - main)
        },
    ),
    scope(
        "allocations",
        Count,
        "successful calls that started an allocation (a realloc chain counts once)",
        |s| Int(s.allocations),
    ),
    scope(
        "requests",
        Count,
        "successful size requests: allocations plus reallocs that did not free",
        |s| Int(s.requests),
    ),
    scope(
        "requested_bytes",
        Bytes,
        "sum of the requested sizes: the cumulated upper bound",
        |s| Int(s.requested_bytes),
    ),
    scope(
        "cumulated_lower_bytes",
        Bytes,
        "sum over the allocations started in the scope of their last size: the cumulated lower bound",
        |s| Int(s.cumulated_lower_bytes),
    ),
    scope(
        "failed_allocations",
        Count,
        "allocation calls that returned NULL",
        |s| Int(s.failed_allocations),
    ),
    scope("null_frees", Count, "free(NULL) calls", |s| Int(s.null_frees)),
    scope(
        "unmatched_frees",
        Count,
        "frees of a pointer the trace never returned",
        |s| Int(s.unmatched_frees),
    ),
    scope(
        "unmatched_reallocs",
        Count,
        "reallocs of a pointer the trace never returned",
        |s| Int(s.unmatched_reallocs),
    ),
    scope("peak_live_bytes", Bytes, "maximum of the live bytes", |s| {
        Int(s.peak_live_bytes.value)
    }),
    scope(
        "peak_live_bytes_call",
        Calls,
        "call after which the live bytes first reached their peak",
        |s| Int(s.peak_live_bytes.call),
    ),
    scope(
        "peak_live_bytes_ns",
        Nanoseconds,
        "when the live bytes first reached their peak, since the process start",
        |s| Int(s.peak_live_bytes.t_ns),
    ),
    scope(
        "peak_live_allocations",
        Count,
        "maximum of the live allocations",
        |s| Int(s.peak_live_allocations.value),
    ),
    scope(
        "peak_live_allocations_call",
        Calls,
        "call after which the live allocations first reached their peak",
        |s| Int(s.peak_live_allocations.call),
    ),
    scope(
        "peak_live_allocations_ns",
        Nanoseconds,
        "when the live allocations first reached their peak, since the process start",
        |s| Int(s.peak_live_allocations.t_ns),
    ),
    scope(
        "share_below_512",
        Share,
        "fraction of the requests below 512 bytes (0 without requests)",
        |s| Value::Share(s.sizes.share_below_512),
    ),
    scope(
        "lifetimes",
        Count,
        "allocations whose end (free, or realloc to 0) was seen",
        |s| Int(s.lifetimes.count),
    ),
    scope(
        "lifetime_share_zero",
        Share,
        "fraction of the ended allocations with lifetime 0 (0 without any)",
        |s| Value::Share(s.lifetimes.share_zero),
    ),
    scope("lifetime_p10", Calls, "10th percentile of the lifetimes", |s| {
        lifetime_percentile(s, 0.10)
    }),
    scope("lifetime_p50", Calls, "median of the lifetimes", |s| {
        lifetime_percentile(s, 0.50)
    }),
    scope("lifetime_p90", Calls, "90th percentile of the lifetimes", |s| {
        lifetime_percentile(s, 0.90)
    }),
    scope("lifetime_p99", Calls, "99th percentile of the lifetimes", |s| {
        lifetime_percentile(s, 0.99)
    }),
    scope(
        "lifetime_p999",
        Calls,
        "99.9th percentile of the lifetimes",
        |s| lifetime_percentile(s, 0.999),
    ),
    scope(
        "lifetime_median_ns",
        Nanoseconds,
        "median of the lifetimes in time",
        |s| maybe(s.lifetimes.median_ns),
    ),
    ScopeMetric {
        in_csv: false,
        ..scope(
            "lifetime_median_calls",
            Calls,
            "median of the lifetimes in calls, from the lifetime histogram",
            |s| maybe(s.lifetimes.median_calls),
        )
    },
    scope(
        "leaked_allocations",
        Count,
        "allocations still live at the end of the stream",
        |s| Int(s.leaks.count),
    ),
    scope(
        "leaked_bytes",
        Bytes,
        "bytes of the allocations still live at the end",
        |s| Int(s.leaks.bytes),
    ),
];

/// The scope metric named `key`; a name no metric has is a bug of the output that asks for it.
pub fn scope_metric(key: &str) -> &'static ScopeMetric {
    SCOPE_METRICS
        .iter()
        .find(|m| m.key == key)
        .unwrap_or_else(|| panic!("no scope metric named '{key}'"))
}

/// A column of a timeline point.
#[derive(Debug, Clone, Copy)]
pub struct TimelineColumn {
    /// Its name: the column of timeline.csv and timeline.parquet.
    pub key: &'static str,
    pub unit: Unit,
    pub meaning: &'static str,
    pub value: fn(&TimelinePoint) -> u64,
}

const fn column(
    key: &'static str,
    unit: Unit,
    meaning: &'static str,
    value: fn(&TimelinePoint) -> u64,
) -> TimelineColumn {
    TimelineColumn {
        key,
        unit,
        meaning,
        value,
    }
}

/// Every column of a timeline point, in the order of the CSV and Parquet columns.
pub const TIMELINE_COLUMNS: &[TimelineColumn] = &[
    column(
        "calls",
        Calls,
        "calls completed at the last sample of the step",
        |t| t.calls,
    ),
    column(
        "t_ns",
        Nanoseconds,
        "time of the last sample of the step, since the process start",
        |t| t.t_ns,
    ),
    column(
        "live_bytes",
        Bytes,
        "live bytes at the end of the step",
        |t| t.live_bytes,
    ),
    column(
        "live_bytes_max",
        Bytes,
        "maximum of the live bytes in the step",
        |t| t.live_bytes_max,
    ),
    column(
        "live_bytes_min",
        Bytes,
        "minimum of the live bytes in the step",
        |t| t.live_bytes_min,
    ),
    column(
        "live_allocations",
        Count,
        "live allocations at the end of the step",
        |t| t.live_allocations,
    ),
    column(
        "live_allocations_max",
        Count,
        "maximum of the live allocations in the step",
        |t| t.live_allocations_max,
    ),
    column(
        "live_allocations_min",
        Count,
        "minimum of the live allocations in the step",
        |t| t.live_allocations_min,
    ),
    column(
        "cumulated_upper_bytes",
        Bytes,
        "sum of the requested sizes so far: the cumulated upper bound",
        |t| t.cumulated_upper_bytes,
    ),
    column(
        "cumulated_lower_bytes",
        Bytes,
        "sum over the allocations so far of their last size: the cumulated lower bound",
        |t| t.cumulated_lower_bytes,
    ),
];

/// The timeline column named `key`; a name no column has is a bug of the output that asks for it.
pub fn timeline_column(key: &str) -> &'static TimelineColumn {
    TIMELINE_COLUMNS
        .iter()
        .find(|c| c.key == key)
        .unwrap_or_else(|| panic!("no timeline column named '{key}'"))
}

/// A histogram of the request sizes of a scope.
#[derive(Debug, Clone, Copy)]
pub struct SizeHistogram {
    /// Its name: sizes_KEY.csv, and the `buckets` column of sizes.parquet.
    pub key: &'static str,
    /// Its buckets, as a title says them ("16 B buckets").
    pub buckets_label: &'static str,
    /// Width of every bucket in bytes; `None` when the width grows (powers of two).
    pub width: Option<u64>,
    pub buckets: fn(&SizeReport) -> &[Bucket],
}

/// Every size histogram, in the order of the CSV files and the Parquet rows.
pub const SIZE_HISTOGRAMS: &[SizeHistogram] = &[
    SizeHistogram {
        key: "16",
        buckets_label: "16 B buckets",
        width: Some(16),
        buckets: |s| &s.buckets_16,
    },
    SizeHistogram {
        key: "32k",
        buckets_label: "32 KiB buckets",
        width: Some(32 * 1024),
        buckets: |s| &s.buckets_32k,
    },
    SizeHistogram {
        key: "pow2",
        buckets_label: "power-of-two buckets",
        width: None,
        buckets: |s| &s.buckets_pow2,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, m) in SCOPE_METRICS.iter().enumerate() {
            assert!(
                SCOPE_METRICS[i + 1..].iter().all(|o| o.key != m.key),
                "{}",
                m.key
            );
        }
        for (i, c) in TIMELINE_COLUMNS.iter().enumerate() {
            assert!(
                TIMELINE_COLUMNS[i + 1..].iter().all(|o| o.key != c.key),
                "{}",
                c.key
            );
        }
    }

    #[test]
    fn every_column_is_documented() {
        let doc = include_str!("../../../docs/metrics.md");
        let columns = SCOPE_METRICS
            .iter()
            .filter(|m| m.in_csv)
            .map(|m| m.key)
            .chain(TIMELINE_COLUMNS.iter().map(|c| c.key));
        for key in columns {
            assert!(
                doc.contains(key),
                "docs/metrics.md does not describe '{key}'"
            );
        }
    }
}
