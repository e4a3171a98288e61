//! CSV files for spreadsheets and plotting, one per figure family, plus summary.json (columns in
//! docs/metrics.md). Every row names its process (pid, exec) and scope (process, thread or phase).
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::{Analysis, Bucket, ProcessReport, ScopeReport};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot create output directory '{path}': {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write '{path}': {source}")]
    Csv { path: PathBuf, source: csv::Error },
    #[error("cannot write '{path}': {source}")]
    Json {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files `write_csv_dir` creates, in order.
pub const FILES: [&str; 10] = [
    "timeline.csv",
    "sizes_16.csv",
    "sizes_32k.csv",
    "sizes_pow2.csv",
    "lifetimes_cdf.csv",
    "per_process.csv",
    "per_thread.csv",
    "per_phase.csv",
    "leaks.csv",
    "summary.json",
];

/// Write all CSV files and summary.json into `dir` (created if missing); returns their paths.
pub fn write_csv_dir(analysis: &Analysis, dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    fs::create_dir_all(dir).map_err(|source| OutputError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let path = |name: &str| dir.join(name);
    write_rows(&path("timeline.csv"), timeline_rows(analysis))?;
    write_rows(
        &path("sizes_16.csv"),
        bucket_rows(analysis, |s| &s.sizes.buckets_16),
    )?;
    write_rows(
        &path("sizes_32k.csv"),
        bucket_rows(analysis, |s| &s.sizes.buckets_32k),
    )?;
    write_rows(
        &path("sizes_pow2.csv"),
        bucket_rows(analysis, |s| &s.sizes.buckets_pow2),
    )?;
    write_rows(&path("lifetimes_cdf.csv"), cdf_rows(analysis))?;
    write_rows(
        &path("per_process.csv"),
        summary_rows(analysis, |k| k == "process"),
    )?;
    write_rows(
        &path("per_thread.csv"),
        summary_rows(analysis, |k| k == "thread"),
    )?;
    write_rows(
        &path("per_phase.csv"),
        summary_rows(analysis, |k| k == "phase"),
    )?;
    write_rows(&path("leaks.csv"), leak_rows(analysis))?;
    let summary = path("summary.json");
    let file = fs::File::create(&summary).map_err(|source| OutputError::Json {
        path: summary.clone(),
        source,
    })?;
    super::json::write_json(analysis, std::io::BufWriter::new(file)).map_err(|source| {
        OutputError::Json {
            path: summary.clone(),
            source,
        }
    })?;
    Ok(FILES.iter().map(|f| path(f)).collect())
}

fn write_rows<T: Serialize>(path: &Path, rows: Vec<T>) -> Result<(), OutputError> {
    let err = |source| OutputError::Csv {
        path: path.to_path_buf(),
        source,
    };
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    for r in rows {
        w.serialize(r).map_err(err)?;
    }
    w.flush().map_err(|e| err(e.into()))
}

/// Which scope a row belongs to.
#[derive(Serialize)]
struct ScopeKey {
    pid: u32,
    exec: u32,
    /// "process", "thread" or "phase".
    scope: &'static str,
    /// Thread id, or phase name, empty for the process.
    id: String,
    /// Phase index, empty otherwise.
    phase_index: Option<u32>,
}

fn scopes(p: &ProcessReport) -> Vec<(ScopeKey, &ScopeReport)> {
    let key = |scope, id: String, phase_index| ScopeKey {
        pid: p.pid,
        exec: p.exec_index,
        scope,
        id,
        phase_index,
    };
    let mut v = vec![(key("process", String::new(), None), &p.stats)];
    v.extend(
        p.threads
            .iter()
            .map(|t| (key("thread", t.tid.to_string(), None), &t.stats)),
    );
    v.extend(
        p.phases
            .iter()
            .map(|ph| (key("phase", ph.name.clone(), Some(ph.index)), &ph.stats)),
    );
    v
}

#[derive(Serialize)]
struct TimelineRow {
    pid: u32,
    exec: u32,
    /// "calls" or "time": which axis the points are evenly stepped along.
    axis: &'static str,
    step: u64,
    calls: u64,
    t_ns: u64,
    live_bytes: u64,
    live_bytes_max: u64,
    live_bytes_min: u64,
    live_allocations: u64,
    live_allocations_max: u64,
    live_allocations_min: u64,
    cumulated_upper_bytes: u64,
    cumulated_lower_bytes: u64,
}

fn timeline_rows(a: &Analysis) -> Vec<TimelineRow> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (axis, step, points) in [
            ("calls", p.timeline_calls_step, &p.timeline_by_calls),
            ("time", p.timeline_time_step_ns, &p.timeline_by_time),
        ] {
            rows.extend(points.iter().map(|t| TimelineRow {
                pid: p.pid,
                exec: p.exec_index,
                axis,
                step,
                calls: t.calls,
                t_ns: t.t_ns,
                live_bytes: t.live_bytes,
                live_bytes_max: t.live_bytes_max,
                live_bytes_min: t.live_bytes_min,
                live_allocations: t.live_allocations,
                live_allocations_max: t.live_allocations_max,
                live_allocations_min: t.live_allocations_min,
                cumulated_upper_bytes: t.cumulated_upper_bytes,
                cumulated_lower_bytes: t.cumulated_lower_bytes,
            }));
        }
    }
    rows
}

#[derive(Serialize)]
struct BucketRow {
    low: u64,
    high: u64,
    count: u64,
}

fn bucket_rows(
    a: &Analysis,
    pick: impl Fn(&ScopeReport) -> &Vec<Bucket>,
) -> Vec<(ScopeKey, BucketRow)> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (key, s) in scopes(p) {
            for b in pick(s) {
                rows.push((
                    key_copy(&key),
                    BucketRow {
                        low: b.low,
                        high: b.high,
                        count: b.count,
                    },
                ));
            }
        }
    }
    rows
}

fn key_copy(k: &ScopeKey) -> ScopeKey {
    ScopeKey {
        pid: k.pid,
        exec: k.exec,
        scope: k.scope,
        id: k.id.clone(),
        phase_index: k.phase_index,
    }
}

#[derive(Serialize)]
struct CdfRow {
    below_calls: u64,
    share_of_life: f64,
    fraction: f64,
}

fn cdf_rows(a: &Analysis) -> Vec<(ScopeKey, CdfRow)> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (key, s) in scopes(p) {
            for c in &s.lifetimes.cdf {
                rows.push((
                    key_copy(&key),
                    CdfRow {
                        below_calls: c.below_calls,
                        share_of_life: c.share_of_life,
                        fraction: c.fraction,
                    },
                ));
            }
        }
    }
    rows
}

#[derive(Serialize)]
struct SummaryRow {
    calls: u64,
    malloc: u64,
    calloc: u64,
    realloc: u64,
    free: u64,
    other_calls: u64,
    allocations: u64,
    requests: u64,
    requested_bytes: u64,
    cumulated_lower_bytes: u64,
    failed_allocations: u64,
    null_frees: u64,
    unmatched_frees: u64,
    unmatched_reallocs: u64,
    peak_live_bytes: u64,
    peak_live_bytes_call: u64,
    peak_live_bytes_ns: u64,
    peak_live_allocations: u64,
    peak_live_allocations_call: u64,
    peak_live_allocations_ns: u64,
    share_below_512: f64,
    lifetimes: u64,
    lifetime_share_zero: f64,
    lifetime_p10: Option<u64>,
    lifetime_p50: Option<u64>,
    lifetime_p90: Option<u64>,
    lifetime_p99: Option<u64>,
    lifetime_p999: Option<u64>,
    lifetime_median_ns: Option<u64>,
    leaked_allocations: u64,
    leaked_bytes: u64,
}

fn summary_rows(a: &Analysis, want: impl Fn(&str) -> bool) -> Vec<(ScopeKey, SummaryRow)> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (key, s) in scopes(p).into_iter().filter(|(k, _)| want(k.scope)) {
            let call = |name: &str| s.calls.get(name).copied().unwrap_or(0);
            let main = call("malloc") + call("calloc") + call("realloc") + call("free");
            let q = |q: f64| {
                s.lifetimes
                    .percentiles
                    .iter()
                    .find(|p| (p.q - q).abs() < 1e-9)
                    .map(|p| p.calls)
            };
            rows.push((
                key,
                SummaryRow {
                    calls: s.calls_total,
                    malloc: call("malloc"),
                    calloc: call("calloc"),
                    realloc: call("realloc"),
                    free: call("free"),
                    other_calls: s.calls_total - main,
                    allocations: s.allocations,
                    requests: s.requests,
                    requested_bytes: s.requested_bytes,
                    cumulated_lower_bytes: s.cumulated_lower_bytes,
                    failed_allocations: s.failed_allocations,
                    null_frees: s.null_frees,
                    unmatched_frees: s.unmatched_frees,
                    unmatched_reallocs: s.unmatched_reallocs,
                    peak_live_bytes: s.peak_live_bytes.value,
                    peak_live_bytes_call: s.peak_live_bytes.call,
                    peak_live_bytes_ns: s.peak_live_bytes.t_ns,
                    peak_live_allocations: s.peak_live_allocations.value,
                    peak_live_allocations_call: s.peak_live_allocations.call,
                    peak_live_allocations_ns: s.peak_live_allocations.t_ns,
                    share_below_512: s.sizes.share_below_512,
                    lifetimes: s.lifetimes.count,
                    lifetime_share_zero: s.lifetimes.share_zero,
                    lifetime_p10: q(0.10),
                    lifetime_p50: q(0.50),
                    lifetime_p90: q(0.90),
                    lifetime_p99: q(0.99),
                    lifetime_p999: q(0.999),
                    lifetime_median_ns: s.lifetimes.median_ns,
                    leaked_allocations: s.leaks.count,
                    leaked_bytes: s.leaks.bytes,
                },
            ));
        }
    }
    rows
}

#[derive(Serialize)]
struct LeakRow {
    size: u64,
    count: u64,
    bytes: u64,
}

fn leak_rows(a: &Analysis) -> Vec<(ScopeKey, LeakRow)> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (key, s) in scopes(p) {
            for l in &s.leaks.top_sizes {
                rows.push((
                    key_copy(&key),
                    LeakRow {
                        size: l.size,
                        count: l.count,
                        bytes: l.bytes,
                    },
                ));
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_key_columns_come_first() {
        let key = ScopeKey {
            pid: 1,
            exec: 0,
            scope: "thread",
            id: "7".into(),
            phase_index: None,
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize((
            key,
            LeakRow {
                size: 16,
                count: 2,
                bytes: 32,
            },
        ))
        .unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(
            text,
            "pid,exec,scope,id,phase_index,size,count,bytes\n1,0,thread,7,,16,2,32\n"
        );
    }
}
