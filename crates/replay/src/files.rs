//! The replay's own files in a results directory, written and read here only: `replay.json` (every
//! figure of every replay: [`VariantReplay`]s), `replay.csv` (RSS and live bytes on the call axis:
//! [`ReplayRow`]s) and `original.csv` (the original run's memory readings: [`OriginalRow`]s).
//! Columns and their meaning: docs/replay.md, "Figures"; `dataset` takes the column types from
//! [`REPLAY_COLUMNS`] and [`ORIGINAL_COLUMNS`].
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::VariantReplay;

pub const REPLAY_JSON: &str = "replay.json";
pub const REPLAY_CSV: &str = "replay.csv";
pub const ORIGINAL_CSV: &str = "original.csv";

/// A column's type, for readers that need one (the dataset's Parquet tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Int,
    Float,
    Text,
}

/// One measurement of one replay: a line of replay.csv.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRow {
    pub variant: String,
    pub repeat: u32,
    pub pid: u32,
    pub exec_index: u32,
    /// Calls performed before it, in recorded order.
    pub seq: u64,
    /// Seconds into the replay.
    pub t_s: f64,
    /// When the state measured began in the original run (its clock: seconds since the image
    /// started), the weight of the time-weighted mean. Absent in files of earlier versions.
    #[serde(default)]
    pub original_t_s: Option<f64>,
    pub rss: u64,
    pub live: u64,
}

/// replay.csv's columns, in order.
pub const REPLAY_COLUMNS: [(&str, Column); 9] = [
    ("variant", Column::Text),
    ("repeat", Column::Int),
    ("pid", Column::Int),
    ("exec_index", Column::Int),
    ("seq", Column::Int),
    ("t_s", Column::Float),
    ("original_t_s", Column::Float),
    ("rss", Column::Int),
    ("live", Column::Int),
];

/// One memory reading of the original run (recorded with the trace): a line of original.csv.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OriginalRow {
    pub pid: u32,
    pub exec_index: u32,
    pub seq: u64,
    /// Seconds since the image started.
    pub t_s: f64,
    pub rss: u64,
    pub anon: u64,
    pub pss: Option<u64>,
    pub heap: Option<u64>,
}

/// original.csv's columns, in order.
pub const ORIGINAL_COLUMNS: [(&str, Column); 8] = [
    ("pid", Column::Int),
    ("exec_index", Column::Int),
    ("seq", Column::Int),
    ("t_s", Column::Float),
    ("rss", Column::Int),
    ("anon", Column::Int),
    ("pss", Column::Int),
    ("heap", Column::Int),
];

/// The replay's files of a results directory, read.
#[derive(Debug, Clone, Default)]
pub struct ReplayFiles {
    /// replay.json; empty when it is missing or unreadable (a replay cut before its end).
    pub replays: Vec<VariantReplay>,
    pub rows: Vec<ReplayRow>,
    pub original: Vec<OriginalRow>,
}

impl ReplayFiles {
    /// The replay's files in `dir`; `None` when it holds neither replay.json nor replay.csv (not a
    /// replay's directory). Damaged lines are left out.
    pub fn read(dir: &Path) -> Option<ReplayFiles> {
        let json = dir.join(REPLAY_JSON);
        let csv = dir.join(REPLAY_CSV);
        if !json.is_file() && !csv.is_file() {
            return None;
        }
        let replays = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Some(ReplayFiles {
            replays,
            rows: read_csv(&csv),
            original: read_csv(&dir.join(ORIGINAL_CSV)),
        })
    }
}

fn read_csv<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    let Ok(mut r) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    r.deserialize().filter_map(Result::ok).collect()
}

/// Writes replay.json, replay.csv and (when the trace has readings) original.csv into `dir`.
/// Returns one line per file not written ("replay.csv: not written: ...").
pub fn write(dir: &Path, runs: &[VariantReplay]) -> Vec<String> {
    let mut problems = Vec::new();
    let json = serde_json::to_vec_pretty(runs).map_err(std::io::Error::other);
    if let Err(e) = json.and_then(|j| std::fs::write(dir.join(REPLAY_JSON), j)) {
        problems.push(format!("{REPLAY_JSON}: not written: {e}"));
    }
    let rows = runs.iter().flat_map(|r| {
        r.images.iter().flat_map(move |i| {
            i.samples.iter().map(move |s| ReplayRow {
                variant: r.variant.clone(),
                repeat: r.repeat,
                pid: i.pid,
                exec_index: i.exec_index,
                seq: s.seq,
                t_s: s.t_s,
                original_t_s: Some(s.original_t_s),
                rss: s.rss,
                live: s.live,
            })
        })
    });
    if let Err(e) = write_csv(&dir.join(REPLAY_CSV), rows) {
        problems.push(format!("{REPLAY_CSV}: not written: {e}"));
    }
    // The original run's readings, once per image (they are the trace's, not a replay's).
    let original: Vec<OriginalRow> = runs
        .first()
        .map_or(&[][..], |r| &r.images[..])
        .iter()
        .flat_map(|i| {
            i.original_memory.iter().map(|s| OriginalRow {
                pid: i.pid,
                exec_index: i.exec_index,
                seq: s.seq,
                t_s: s.t_ns as f64 / 1e9,
                rss: s.rss,
                anon: s.anon,
                pss: s.pss,
                heap: s.heap,
            })
        })
        .collect();
    if !original.is_empty() {
        if let Err(e) = write_csv(&dir.join(ORIGINAL_CSV), original) {
            problems.push(format!("{ORIGINAL_CSV}: not written: {e}"));
        }
    }
    problems
}

fn write_csv<T: Serialize>(
    path: &Path,
    rows: impl IntoIterator<Item = T>,
) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_path(path)?;
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(path: &Path) -> Vec<String> {
        let mut r = csv::Reader::from_path(path).unwrap();
        r.headers().unwrap().iter().map(str::to_string).collect()
    }

    /// The columns declared for readers are the ones written, in order; what is written reads
    /// back as written.
    #[test]
    fn the_files_have_the_declared_columns_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let row = ReplayRow {
            variant: "glibc".into(),
            repeat: 1,
            pid: 7,
            exec_index: 0,
            seq: 10,
            t_s: 0.5,
            original_t_s: Some(2.5),
            rss: 4096,
            live: 100,
        };
        write_csv(&dir.path().join(REPLAY_CSV), [row.clone()]).unwrap();
        let original = OriginalRow {
            pid: 7,
            exec_index: 0,
            seq: 3,
            t_s: 0.1,
            rss: 1,
            anon: 2,
            pss: None,
            heap: Some(3),
        };
        write_csv(&dir.path().join(ORIGINAL_CSV), [original.clone()]).unwrap();
        let names = |c: &[(&str, Column)]| c.iter().map(|c| c.0.to_string()).collect::<Vec<_>>();
        assert_eq!(header(&dir.path().join(REPLAY_CSV)), names(&REPLAY_COLUMNS));
        assert_eq!(
            header(&dir.path().join(ORIGINAL_CSV)),
            names(&ORIGINAL_COLUMNS)
        );
        let read = ReplayFiles::read(dir.path()).unwrap();
        assert_eq!((read.rows, read.original), (vec![row], vec![original]));
        assert!(ReplayFiles::read(&dir.path().join("none")).is_none());
    }
}
