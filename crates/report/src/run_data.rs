//! Reading a results directory of `alloclens run` back (docs/results-format.md): results.json, samples.csv
//! and markers.csv. Reading is lenient: unknown fields are ignored and missing ones take defaults, so
//! results of a later alloclens with the same schema version still load; a newer schema version is
//! refused.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::results_dir::RESULTS_SCHEMA_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum RunDataError {
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

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: u64,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ParamDef {
    pub name: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Variant {
    pub label: String,
    pub allocator: String,
    pub library: Option<String>,
    pub version: Option<String>,
    pub settings: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Stat {
    pub peak: f64,
    pub mean: f64,
    pub last: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Memory {
    pub samples: u64,
    pub pss: Stat,
    pub rss: Stat,
    pub uss: Stat,
    pub vss: Stat,
    pub swap: Stat,
    pub anon: Stat,
    pub max_processes: u64,
    pub distinct_processes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Ending {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub interrupted: bool,
    pub spawn_error: Option<String>,
    pub stopped_leftovers: u64,
}

impl Ending {
    /// Exited with status 0, not timed out nor interrupted (the rule of `runner`).
    pub fn ok(&self) -> bool {
        !self.timed_out
            && !self.interrupted
            && self.spawn_error.is_none()
            && self
                .status
                .as_ref()
                .is_some_and(|s| s.code == Some(0) && s.signal.is_none())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Run {
    pub index: usize,
    pub variant: String,
    pub allocator: String,
    pub params: BTreeMap<String, String>,
    pub repeat: u32,
    pub command: Vec<String>,
    pub ending: Ending,
    pub wall: f64,
    pub user: f64,
    pub sys: f64,
    pub memory: Memory,
    pub markers: u64,
    pub throughput: Option<f64>,
    pub throughput_source: Option<String>,
    pub allocator_check: String,
    pub other_allocators: Vec<String>,
    pub sampler_cpu: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct VariantSummary {
    pub variant: String,
    pub runs: u32,
    pub failed: u32,
    pub failures: Vec<String>,
    pub wall_median: Option<f64>,
    pub wall_min: Option<f64>,
    pub wall_max: Option<f64>,
    pub throughput_median: Option<f64>,
    pub peak_pss_median: Option<f64>,
    pub mean_pss_median: Option<f64>,
    pub peak_rss_median: Option<f64>,
    pub mean_rss_median: Option<f64>,
    pub wall_ratio: Option<f64>,
    pub peak_pss_ratio: Option<f64>,
    pub mean_pss_ratio: Option<f64>,
    pub throughput_ratio: Option<f64>,
    pub allocator_check: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Group {
    pub params: BTreeMap<String, String>,
    pub baseline: Option<String>,
    pub variants: Vec<VariantSummary>,
}

/// results.json, as far as reports need it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ResultsJson {
    pub schema_version: u32,
    pub tool: String,
    pub tool_version: String,
    pub created: String,
    pub host: Host,
    pub command: Vec<String>,
    pub params: Vec<ParamDef>,
    pub repeats: u32,
    pub interval_s: f64,
    pub marker: Option<String>,
    pub throughput: Option<String>,
    pub baseline: Option<String>,
    pub variants: Vec<Variant>,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    pub runs: Vec<Run>,
    pub summary: Vec<Group>,
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
pub struct RunData {
    pub dir: PathBuf,
    pub results: ResultsJson,
    pub samples: Vec<SampleRow>,
    pub markers: Vec<MarkerRow>,
    /// With `--compare`: one line per merged results directory (name = path: command).
    pub compared: Vec<String>,
}

impl RunData {
    pub fn load(dir: &Path) -> Result<RunData, RunDataError> {
        let json_path = dir.join("results.json");
        if !json_path.is_file() {
            return Err(RunDataError::NotResultsDir(dir.to_path_buf()));
        }
        let file = File::open(&json_path).map_err(|source| RunDataError::Io {
            path: json_path.clone(),
            source,
        })?;
        let results: ResultsJson =
            serde_json::from_reader(BufReader::new(file)).map_err(|source| RunDataError::Json {
                path: json_path.clone(),
                source,
            })?;
        // Additions keep the version (and load, unknown fields ignored); a newer version changed or
        // removed a field, so its figures would be read wrongly.
        if results.schema_version > RESULTS_SCHEMA_VERSION {
            return Err(RunDataError::NewerSchema {
                path: json_path,
                found: results.schema_version,
                supported: RESULTS_SCHEMA_VERSION,
            });
        }
        let samples = read_csv(&dir.join("samples.csv"), sample_row)?;
        let markers = read_csv(&dir.join("markers.csv"), marker_row)?;
        Ok(RunData {
            dir: dir.to_path_buf(),
            results,
            samples,
            markers,
            compared: Vec::new(),
        })
    }

    /// Whether `dir` looks like a results directory (has results.json).
    pub fn is_results_dir(dir: &Path) -> bool {
        dir.join("results.json").is_file()
    }

    pub fn run(&self, index: usize) -> Option<&Run> {
        self.results.runs.iter().find(|r| r.index == index)
    }
}

type Header = BTreeMap<String, usize>;

/// Reads a CSV by column name; a missing file gives no rows (an interrupted session may lack one).
fn read_csv<T>(
    path: &Path,
    parse: fn(&Header, &csv::StringRecord) -> Option<T>,
) -> Result<Vec<T>, RunDataError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let csv_err = |e: csv::Error| RunDataError::Csv {
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
                return Err(RunDataError::Csv {
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
