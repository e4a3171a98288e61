//! Reading a results directory back: results.json, samples.csv and markers.csv. Reading is lenient:
//! unknown fields are ignored and missing ones take defaults, so results of an earlier alloclens, or of
//! a later one with the same schema version, still load; a newer schema version is refused.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use super::SCHEMA_VERSION;
use crate::results::RunResults;

#[derive(Debug, thiserror::Error)]
pub enum ResultsReadError {
    #[error("'{0}' is not a results directory of `alloclens run` (no results.json in it)")]
    NotResultsDir(PathBuf),
    #[error("cannot read '{path}': {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("cannot parse '{path}': {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "'{path}' has results schema version {found}, newer than this alloclens reads (version \
         {supported}): upgrade alloclens"
    )]
    NewerSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("cannot parse '{path}' line {line}: {message}")]
    Csv {
        path: PathBuf,
        line: u64,
        message: String,
    },
}

/// One row of samples.csv (the param columns are in results.json's runs, so they are not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    pub run: usize,
    pub t_s: f64,
    /// `interval` or `marker`.
    pub kind: String,
    pub label: String,
    /// None for the `total` row of a sample.
    pub pid: Option<u32>,
    pub ppid: Option<u32>,
    pub comm: String,
    pub rss: u64,
    pub pss: u64,
    pub uss: u64,
    pub vss: u64,
    pub swap: u64,
    pub anon: u64,
    /// samples.csv's KSM columns (`run --ksm` only; None without them).
    pub ksm: Option<SampleKsm>,
}

/// The KSM figures of a samples.csv row that reports draw, in bytes; None where the cell is empty
/// (the system's counters in `process` rows, or a kernel without them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleKsm {
    /// The tree's (or process's) merged bytes, `ksm_merging`.
    pub merging: Option<u64>,
    /// The system's `pages_sharing` and `pages_volatile` as bytes.
    pub sharing: Option<u64>,
    pub volatile: Option<u64>,
}

/// One row of markers.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkerRow {
    pub run: usize,
    pub t_s: f64,
    pub label: String,
    pub pss: Option<u64>,
    pub rss: Option<u64>,
    pub vss: Option<u64>,
    pub line: String,
}

/// A results directory, loaded.
#[derive(Debug, Clone)]
pub struct ResultsDirContents {
    pub dir: PathBuf,
    pub results: RunResults,
    pub samples: Vec<SampleRow>,
    pub markers: Vec<MarkerRow>,
}

impl ResultsDirContents {
    pub fn load(dir: &Path) -> Result<ResultsDirContents, ResultsReadError> {
        let json_path = dir.join("results.json");
        if !json_path.is_file() {
            return Err(ResultsReadError::NotResultsDir(dir.to_path_buf()));
        }
        let file = File::open(&json_path).map_err(|source| ResultsReadError::Io {
            path: json_path.clone(),
            source,
        })?;
        let results: RunResults =
            serde_json::from_reader(BufReader::new(file)).map_err(|source| {
                ResultsReadError::Json {
                    path: json_path.clone(),
                    source,
                }
            })?;
        // Additions keep the version (and load, unknown fields ignored); a newer version changed or
        // removed a field, so its figures would be read wrongly.
        if results.schema_version > SCHEMA_VERSION {
            return Err(ResultsReadError::NewerSchema {
                path: json_path,
                found: results.schema_version,
                supported: SCHEMA_VERSION,
            });
        }
        let samples = read_csv(&dir.join("samples.csv"), sample_row)?;
        let markers = read_csv(&dir.join("markers.csv"), marker_row)?;
        Ok(ResultsDirContents {
            dir: dir.to_path_buf(),
            results,
            samples,
            markers,
        })
    }

    /// Whether `dir` looks like a results directory (has results.json).
    pub fn is_results_dir(dir: &Path) -> bool {
        dir.join("results.json").is_file()
    }
}

type Header = BTreeMap<String, usize>;

/// Reads a CSV by column name; a missing file gives no rows (an interrupted session may lack one).
fn read_csv<T>(
    path: &Path,
    parse: fn(&Header, &csv::StringRecord) -> Option<T>,
) -> Result<Vec<T>, ResultsReadError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let csv_err = |e: csv::Error| ResultsReadError::Csv {
        path: path.to_path_buf(),
        line: e.position().map_or(0, |p| p.line()),
        message: e.to_string(),
    };
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(csv_err)?;
    let header: Header = reader
        .headers()
        .map_err(csv_err)?
        .iter()
        .enumerate()
        .map(|(i, h)| (h.to_string(), i))
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        match parse(&header, &record) {
            Some(row) => rows.push(row),
            None => {
                return Err(ResultsReadError::Csv {
                    path: path.to_path_buf(),
                    line: record.position().map_or(0, |p| p.line()),
                    message: "a required column is missing or not a number".into(),
                })
            }
        }
    }
    Ok(rows)
}

fn field<'a>(h: &Header, r: &'a csv::StringRecord, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|&i| r.get(i))
}

fn number<T: std::str::FromStr>(h: &Header, r: &csv::StringRecord, name: &str) -> Option<T> {
    field(h, r, name)?.parse().ok()
}

fn optional<T: std::str::FromStr>(
    h: &Header,
    r: &csv::StringRecord,
    name: &str,
) -> Option<Option<T>> {
    match field(h, r, name) {
        None | Some("") => Some(None),
        Some(v) => v.parse().ok().map(Some),
    }
}

fn sample_row(h: &Header, r: &csv::StringRecord) -> Option<SampleRow> {
    Some(SampleRow {
        run: number(h, r, "run")?,
        t_s: number(h, r, "t_s")?,
        kind: field(h, r, "kind")?.to_string(),
        label: field(h, r, "label").unwrap_or("").to_string(),
        pid: optional(h, r, "pid")?,
        ppid: optional(h, r, "ppid")?,
        comm: field(h, r, "comm").unwrap_or("").to_string(),
        rss: number(h, r, "rss")?,
        pss: number(h, r, "pss")?,
        uss: number(h, r, "uss")?,
        vss: number(h, r, "vss")?,
        swap: number(h, r, "swap")?,
        anon: optional(h, r, "anon")?.unwrap_or(0),
        ksm: if h.contains_key("ksm_merging") {
            Some(SampleKsm {
                merging: optional(h, r, "ksm_merging")?,
                sharing: optional(h, r, "ksm_sharing")?,
                volatile: optional(h, r, "ksm_volatile")?,
            })
        } else {
            None
        },
    })
}

fn marker_row(h: &Header, r: &csv::StringRecord) -> Option<MarkerRow> {
    Some(MarkerRow {
        run: number(h, r, "run")?,
        t_s: number(h, r, "t_s")?,
        label: field(h, r, "label")?.to_string(),
        pss: optional(h, r, "pss")?,
        rss: optional(h, r, "rss")?,
        vss: optional(h, r, "vss")?,
        line: field(h, r, "line").unwrap_or("").to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::RunSpec;
    use crate::results::{
        AllocatorCheck, Ending, MarkerCounts, MarkerRecord, MarkerStatus, RunRecord, SampleKind,
    };
    use crate::results_dir::ResultsDir;
    use crate::CommandExit;

    fn load_json(json: &str) -> Result<ResultsDirContents, ResultsReadError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("results.json"), json).unwrap();
        ResultsDirContents::load(dir.path())
    }

    #[test]
    fn what_the_writer_writes_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results");
        let mut writer = ResultsDir::create(&path, false, &[], false, false).unwrap();
        let run = RunRecord {
            variant: "glibc".into(),
            allocator: "glibc".into(),
            command: vec!["true".into()],
            ending: Ending {
                status: Some(CommandExit {
                    code: Some(0),
                    signal: None,
                }),
                ..Ending::default()
            },
            wall: 0.5,
            marker_figures: MarkerCounts {
                ok: 2,
                late: 1,
                missing: 0,
            },
            allocator_check: AllocatorCheck::NotApplicable,
            ..RunRecord::default()
        };
        let mut results = RunResults {
            schema_version: SCHEMA_VERSION,
            tool: "alloclens".into(),
            runs: vec![run],
            ..RunResults::default()
        };
        let spec = RunSpec {
            index: 0,
            variant: 0,
            assignment: Default::default(),
            repeat: 0,
        };
        let total = procmem::MemoryTotals {
            processes: 1,
            rss: 300,
            pss: 200,
            uss: 100,
            vss: 400,
            anonymous: 50,
            ..Default::default()
        };
        let sample = procmem::TreeSample {
            at: std::time::Instant::now(),
            processes: Vec::new(),
            total,
            unreadable: 0,
            stale_processes: 0,
            ksm: None,
        };
        writer.write_sample(
            &spec,
            "glibc",
            0.25,
            &SampleKind::Marker,
            Some("a"),
            &sample,
        );
        let marker = MarkerRecord {
            t: 0.25,
            label: "a".into(),
            line: "phase a, done".into(),
            rss: Some(300),
            vss: Some(400),
            delay: Some(0.001),
            status: MarkerStatus::Ok,
            pss: None,
            pss_delay: None,
            pss_status: MarkerStatus::Late,
        };
        writer.write_marker(&spec, "glibc", &marker);
        writer.finish_run(0);
        writer.write_results(&mut results);
        assert!(writer.problems().is_empty(), "{:?}", writer.problems());
        let read = ResultsDirContents::load(&path).unwrap();
        assert_eq!(read.results.runs, results.runs);
        assert_eq!(read.results.tool, "alloclens");
        let sample = SampleRow {
            run: 0,
            t_s: 0.25,
            kind: "marker".into(),
            label: "a".into(),
            pid: None,
            ppid: None,
            comm: String::new(),
            rss: 300,
            pss: 200,
            uss: 100,
            vss: 400,
            swap: 0,
            anon: 50,
            ksm: None,
        };
        assert_eq!(read.samples, [sample]);
        let marker = MarkerRow {
            run: 0,
            t_s: 0.25,
            label: "a".into(),
            pss: None,
            rss: Some(300),
            vss: Some(400),
            line: "phase a, done".into(),
        };
        assert_eq!(read.markers, [marker]);
    }

    #[test]
    fn an_older_results_json_without_later_fields_loads_with_defaults() {
        // No host, params, summary figures, marker counts, allocator check nor CSV files.
        let read = load_json(
            r#"{"schema_version": 1, "command": ["x"],
                "runs": [{"index": 3, "variant": "glibc", "ending": {"status": {"code": 0}},
                          "memory": {"pss": {"peak": 100}}}],
                "summary": [{"variants": [{"variant": "glibc", "runs": 1}]}]}"#,
        )
        .unwrap();
        let run = &read.results.runs[0];
        assert_eq!((run.index, run.variant.as_str()), (3, "glibc"));
        assert!(run.ending.ok());
        assert_eq!(run.memory.pss.peak, 100);
        assert_eq!(run.memory.rss.peak, 0);
        assert_eq!(run.marker_figures, MarkerCounts::default());
        assert_eq!(run.allocator_check, AllocatorCheck::Unverified);
        assert_eq!(read.results.summary[0].variants[0].wall_median, None);
        assert!(read.results.host.hostname.is_empty());
    }

    #[test]
    fn unknown_fields_and_values_of_a_later_alloclens_are_read_leniently() {
        let read = load_json(
            r#"{"schema_version": 1, "a_later_field": {"x": 1},
                "runs": [{"index": 0, "allocator_check": "a_later_check", "later": true}]}"#,
        )
        .unwrap();
        assert_eq!(
            read.results.runs[0].allocator_check,
            AllocatorCheck::Unverified
        );
    }

    #[test]
    fn a_newer_schema_version_is_refused_naming_both_versions() {
        let err = load_json(r#"{"schema_version": 2}"#).unwrap_err();
        assert!(matches!(
            err,
            ResultsReadError::NewerSchema {
                found: 2,
                supported: SCHEMA_VERSION,
                ..
            }
        ));
        let message = err.to_string();
        assert!(
            message.contains("schema version 2") && message.contains("(version 1)"),
            "{message}"
        );
        assert_eq!(message.lines().count(), 1);
    }

    #[test]
    fn a_directory_without_results_json_is_not_a_results_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!ResultsDirContents::is_results_dir(dir.path()));
        assert!(matches!(
            ResultsDirContents::load(dir.path()),
            Err(ResultsReadError::NotResultsDir(_))
        ));
    }
}
