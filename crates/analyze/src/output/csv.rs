//! CSV files for spreadsheets and plotting, one per figure family, plus summary.json (columns in
//! docs/metrics.md). Every row names its process (pid, exec) and scope (process, thread or phase).
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::analysis::{Analysis, Bucket, ProcessReport, ScopeReport};
use crate::metrics::{ScopeMetric, Value, SCOPE_METRICS, SIZE_HISTOGRAMS, TIMELINE_COLUMNS};

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
    write_table(
        &path("timeline.csv"),
        &timeline_header(),
        timeline_rows(analysis),
    )?;
    for h in SIZE_HISTOGRAMS {
        write_rows(
            &path(&format!("sizes_{}.csv", h.key)),
            bucket_rows(analysis, |s| (h.buckets)(&s.sizes)),
        )?;
    }
    write_rows(&path("lifetimes_cdf.csv"), cdf_rows(analysis))?;
    write_table(
        &path("per_process.csv"),
        &summary_header(),
        summary_rows(analysis, |k| k == "process"),
    )?;
    write_table(
        &path("per_thread.csv"),
        &summary_header(),
        summary_rows(analysis, |k| k == "thread"),
    )?;
    write_table(
        &path("per_phase.csv"),
        &summary_header(),
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

/// Rows whose columns are not all struct fields: `header` is written before the first row (none
/// without rows, as `write_rows` does).
fn write_table<T: Serialize>(
    path: &Path,
    header: &[&str],
    rows: Vec<T>,
) -> Result<(), OutputError> {
    let err = |source| OutputError::Csv {
        path: path.to_path_buf(),
        source,
    };
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_path(path)
        .map_err(err)?;
    if !rows.is_empty() {
        w.write_record(header).map_err(err)?;
    }
    for r in rows {
        w.serialize(r).map_err(err)?;
    }
    w.flush().map_err(|e| err(e.into()))
}

/// The names of the `ScopeKey` columns, for the tables that write their header themselves.
const SCOPE_KEY_COLUMNS: [&str; 5] = ["pid", "exec", "scope", "id", "phase_index"];

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

/// A row of timeline.csv: which timeline, then every column of `metrics::TIMELINE_COLUMNS`.
#[derive(Serialize)]
struct TimelineRow {
    pid: u32,
    exec: u32,
    /// "calls" or "time": which axis the points are evenly stepped along.
    axis: &'static str,
    step: u64,
    columns: Vec<u64>,
}

fn timeline_header() -> Vec<&'static str> {
    let mut header = vec!["pid", "exec", "axis", "step"];
    header.extend(TIMELINE_COLUMNS.iter().map(|c| c.key));
    header
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
                columns: TIMELINE_COLUMNS.iter().map(|c| (c.value)(t)).collect(),
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
    pick: impl Fn(&ScopeReport) -> &[Bucket],
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

/// The summary columns: every metric of `metrics::SCOPE_METRICS` that the CSV has.
fn summary_metrics() -> impl Iterator<Item = &'static ScopeMetric> {
    SCOPE_METRICS.iter().filter(|m| m.in_csv)
}

fn summary_header() -> Vec<&'static str> {
    let mut header = SCOPE_KEY_COLUMNS.to_vec();
    header.extend(summary_metrics().map(|m| m.key));
    header
}

fn summary_rows(a: &Analysis, want: impl Fn(&str) -> bool) -> Vec<(ScopeKey, Vec<Value>)> {
    let mut rows = Vec::new();
    for p in &a.processes {
        for (key, s) in scopes(p).into_iter().filter(|(k, _)| want(k.scope)) {
            rows.push((key, summary_metrics().map(|m| (m.value)(s)).collect()));
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
        assert!(text.starts_with(&SCOPE_KEY_COLUMNS.join(",")));
    }

    #[test]
    fn every_size_histogram_is_a_listed_file() {
        for h in SIZE_HISTOGRAMS {
            let name = format!("sizes_{}.csv", h.key);
            assert!(FILES.contains(&name.as_str()), "{name} not in FILES");
        }
    }
}
