//! What a PATH given to `merge` is (a results directory of run, replay or tune, a watch directory,
//! a trace), its checksum and identity, and the `sources` table that makes a second merge of the
//! same file or the same run a skip rather than a double count.
use std::fs::File;
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::layout::{command_partition, sanitize, xxh64_hex, Dataset};
use crate::parquet_file::Kind;
use crate::read::read_table;
use crate::table::{Cell, Table};
use crate::DatasetError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Run,
    Ksm,
    Replay,
    Tune,
    Watch,
    Trace,
}

impl SourceKind {
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Run => "run",
            SourceKind::Ksm => "ksm",
            SourceKind::Replay => "replay",
            SourceKind::Tune => "tune",
            SourceKind::Watch => "watch",
            SourceKind::Trace => "trace",
        }
    }
}

/// A PATH, identified and checked, not yet merged.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub kind: SourceKind,
    /// The file checksummed, relative to `path` for a directory.
    pub file: String,
    pub bytes: u64,
    pub checksum: String,
    pub run_key: String,
    /// The host name as recorded (empty when none is).
    pub hostname: String,
    /// The `host` partition value.
    pub host: String,
    pub command: Vec<String>,
    /// results.json or watch.json, parsed.
    pub json: Value,
    pub id: String,
}

/// Reads what `path` is. Errors: not an alloclens result, a newer schema version, unreadable.
pub fn identify(path: &Path, host: Option<&str>) -> Result<Source, DatasetError> {
    if path.is_dir() {
        if path.join("results.json").is_file() {
            return results_dir(path, host);
        }
        if watch::results::WatchDir::is_watch_dir(path) {
            return watch_dir(path, host);
        }
        return Err(DatasetError::NotAResult(path.to_path_buf()));
    }
    if !path.exists() {
        return Err(DatasetError::Io {
            path: path.to_path_buf(),
            message: "no such file or directory".into(),
        });
    }
    trace_file(path, host)
}

fn read_json(path: &Path) -> Result<(Vec<u8>, Value), DatasetError> {
    let bytes = std::fs::read(path).map_err(|e| DatasetError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let json = serde_json::from_slice(&bytes).map_err(|e| DatasetError::Io {
        path: path.to_path_buf(),
        message: format!("not valid JSON ({e})"),
    })?;
    Ok((bytes, json))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn check_version(path: &Path, json: &Value, supported: u32) -> Result<(), DatasetError> {
    let found = json
        .get("schema_version")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if found > u64::from(supported) {
        return Err(DatasetError::NewerResult {
            path: path.to_path_buf(),
            found,
            supported: u64::from(supported),
        });
    }
    Ok(())
}

fn results_dir(dir: &Path, host: Option<&str>) -> Result<Source, DatasetError> {
    let file = dir.join("results.json");
    let (bytes, json) = read_json(&file)?;
    check_version(&file, &json, runner::results_dir::SCHEMA_VERSION)?;
    let kind = if json.get("tune").is_some() {
        SourceKind::Tune
    } else if dir.join("replay.json").is_file() {
        SourceKind::Replay
    } else if json.get("ksm_savings").is_some() || json.get("ksm").is_some() {
        SourceKind::Ksm
    } else {
        SourceKind::Run
    };
    let hostname = json
        .pointer("/host/hostname")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let run_key = json
        .get("created")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let command = strings(json.get("command"));
    Ok(finish(
        dir,
        kind,
        "results.json",
        &bytes,
        run_key,
        hostname,
        host,
        command,
        json,
    ))
}

fn watch_dir(dir: &Path, host: Option<&str>) -> Result<Source, DatasetError> {
    let file = dir.join(watch::results::WATCH_JSON);
    let (bytes, json) = read_json(&file)?;
    check_version(&file, &json, watch::results::SCHEMA_VERSION)?;
    // watch.json records no host: it must be given.
    let Some(host) = host else {
        return Err(DatasetError::NoHost(dir.to_path_buf()));
    };
    let run_key = json
        .get("started_unix_ms")
        .map(Value::to_string)
        .unwrap_or_default();
    let mut command = strings(json.get("command"));
    if command.is_empty() {
        if let Some(pid) = json.get("pid").and_then(Value::as_u64) {
            command = vec![format!("pid-{pid}")];
        }
    }
    Ok(finish(
        dir,
        SourceKind::Watch,
        watch::results::WATCH_JSON,
        &bytes,
        run_key,
        String::new(),
        Some(host),
        command,
        json,
    ))
}

fn trace_file(path: &Path, host: Option<&str>) -> Result<Source, DatasetError> {
    let reader = trace::TraceReader::open(path).map_err(|e| match e {
        trace::TraceError::NotATrace { .. } => DatasetError::NotAResult(path.to_path_buf()),
        other => DatasetError::Trace(other.to_string()),
    })?;
    let header = reader.header().clone();
    drop(reader);
    let (bytes, checksum) = checksum_file(path)?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut source = finish(
        path,
        SourceKind::Trace,
        &name,
        &[],
        header.start_unix_ns.to_string(),
        header.host.clone(),
        host,
        header.command.clone(),
        Value::Null,
    );
    source.bytes = bytes;
    source.checksum = checksum;
    source.id = source_id(&source.host, &source.checksum);
    Ok(source)
}

/// XXH64 of a whole file, streamed (a trace can be gigabytes).
fn checksum_file(path: &Path) -> Result<(u64, String), DatasetError> {
    let io = |e: std::io::Error| DatasetError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut file = File::open(path).map_err(io)?;
    let mut h = twox_hash::XxHash64::with_seed(0);
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
        total += n as u64;
    }
    Ok((total, format!("{:016x}", h.finish())))
}

fn source_id(host: &str, checksum: &str) -> String {
    xxh64_hex(format!("{host}\0{checksum}").as_bytes())
}

#[allow(clippy::too_many_arguments)]
fn finish(
    path: &Path,
    kind: SourceKind,
    file: &str,
    bytes: &[u8],
    run_key: String,
    hostname: String,
    host: Option<&str>,
    command: Vec<String>,
    json: Value,
) -> Source {
    let host = sanitize(host.unwrap_or(&hostname));
    let checksum = xxh64_hex(bytes);
    Source {
        path: path.to_path_buf(),
        kind,
        file: file.to_string(),
        bytes: bytes.len() as u64,
        id: source_id(&host, &checksum),
        checksum,
        run_key,
        hostname,
        host,
        command,
        json,
    }
}

impl Source {
    pub fn command_partition(&self) -> String {
        command_partition(&self.command)
    }
}

/// A source already in the dataset.
#[derive(Debug, Clone)]
pub struct Known {
    pub id: String,
    pub checksum: String,
    pub host: String,
    pub run_key: String,
    pub merged_at: String,
    /// The rows it added, and what it lacks (`losses`: a damaged trace, damaged CSV lines).
    pub rows: u64,
    pub losses: Option<String>,
}

/// The sources a dataset holds.
pub fn known_sources(dataset: &Dataset) -> Result<Vec<Known>, DatasetError> {
    let rows = read_table(dataset, "sources")?;
    Ok((0..rows.len())
        .map(|i| {
            let t = |n: &str| rows.text(i, n).unwrap_or("").to_string();
            Known {
                id: t("source_id"),
                checksum: t("checksum"),
                host: t("host"),
                run_key: t("run_key"),
                merged_at: t("merged_at"),
                rows: rows.number(i, "rows").unwrap_or(0.0) as u64,
                losses: rows
                    .text(i, "losses")
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
            }
        })
        .collect())
}

/// The earlier source `source` is another copy of: the same file, or the same run (or recording)
/// of the same host.
pub fn same_as<'a>(source: &Source, known: &'a [Known]) -> Option<&'a Known> {
    known
        .iter()
        .find(|k| k.checksum == source.checksum)
        .or_else(|| {
            known
                .iter()
                .find(|k| same_run(k, &source.host, &source.run_key))
        })
}

fn same_run(k: &Known, host: &str, run_key: &str) -> bool {
    !run_key.is_empty() && k.host == host && k.run_key == run_key
}

/// Whether the copy with `rows` and `losses` holds more than `than`: a whole copy (no losses)
/// more than a partial one, else more rows (a copy cut later, or merged later in the recording).
pub fn more_complete(rows: u64, losses: Option<&str>, than: &Known) -> bool {
    match (losses.is_none(), than.losses.is_none()) {
        (true, false) => true,
        (false, true) => false,
        _ => rows > than.rows,
    }
}

/// Of the sources of one host and run that a dataset holds more than once (a merge stopped
/// between writing a more complete copy and removing the one it replaces), all but the most
/// complete.
pub fn superseded(known: &[Known]) -> Vec<Known> {
    let mut out = Vec::new();
    for k in known {
        let best = known
            .iter()
            .filter(|o| same_run(o, &k.host, &k.run_key))
            .fold(k, |best, o| {
                if more_complete(o.rows, o.losses.as_deref(), best) {
                    o
                } else {
                    best
                }
            });
        if best.id != k.id {
            out.push(k.clone());
        }
    }
    out
}

impl Known {
    pub fn of(source: &Source, merged_at: &str, rows: u64, losses: Option<&str>) -> Known {
        Known {
            id: source.id.clone(),
            checksum: source.checksum.clone(),
            host: source.host.clone(),
            run_key: source.run_key.clone(),
            merged_at: merged_at.to_string(),
            rows,
            losses: losses.map(str::to_string),
        }
    }
}

/// The source's row of `kind=sources`.
pub fn sources_table(source: &Source, merged_at: &str, rows: u64, losses: Option<&str>) -> Table {
    let mut t = Table::new(
        "sources",
        &[
            ("source_kind", Kind::Text),
            ("path", Kind::Text),
            ("file", Kind::Text),
            ("bytes", Kind::Int64),
            ("checksum", Kind::Text),
            ("run_key", Kind::Text),
            ("merged_at", Kind::Text),
            ("alloclens_version", Kind::Text),
            ("rows", Kind::Int64),
            ("losses", Kind::Text),
        ],
    );
    let text = |s: &str| Cell::Text(s.to_string());
    t.push(
        &source.id,
        vec![
            text(source.kind.name()),
            text(&source.path.to_string_lossy()),
            text(&source.file),
            Cell::Int(source.bytes as i64),
            text(&source.checksum),
            text(&source.run_key),
            text(merged_at),
            text(env!("CARGO_PKG_VERSION")),
            Cell::Int(rows as i64),
            losses.map_or(Cell::Null, text),
        ],
    );
    t
}
