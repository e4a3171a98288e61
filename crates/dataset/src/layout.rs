//! Where things go in a dataset (docs/dataset.md, "Layout"): dataset.json, the hive partitions
//! `kind=/host=/command=`, and the names of their values.
use std::hash::Hasher;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::{DatasetError, SCHEMA_VERSION};

pub const DATASET_JSON: &str = "dataset.json";
const FORMAT: &str = "alloclens-dataset";

/// XXH64 (seed 0) of `bytes`, as 16 hex digits.
pub fn xxh64_hex(bytes: &[u8]) -> String {
    let mut h = twox_hash::XxHash64::with_seed(0);
    h.write(bytes);
    format!("{:016x}", h.finish())
}

/// A partition value: characters outside `A-Z a-z 0-9 . _ -` become `_`, so any host name or
/// program name is one safe directory name; empty becomes `unknown`.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `.` and `..` alone would be directories of their own meaning.
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "unknown".to_string()
    } else {
        s
    }
}

/// The `command` partition: the program's file name (40 characters at most), `-`, and 8 hex digits
/// of the hash of the whole command, so two commands of one program are two partitions.
pub fn command_partition(command: &[String]) -> String {
    let program = command
        .first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or("");
    let program: String = sanitize(program).chars().take(40).collect();
    let hash = xxh64_hex(command.join(" ").as_bytes());
    format!("{program}-{}", &hash[..8])
}

/// An opened (or created) dataset directory.
pub struct Dataset {
    pub root: PathBuf,
}

impl Dataset {
    /// Opens the dataset at `root` for appending, creating it when `root` does not exist or is an
    /// empty directory. A directory with files but no dataset.json, or one of a newer schema
    /// version, is refused.
    pub fn open_or_create(root: &Path) -> Result<Dataset, DatasetError> {
        let io = |e: std::io::Error| DatasetError::Io {
            path: root.to_path_buf(),
            message: e.to_string(),
        };
        if root.join(DATASET_JSON).exists() {
            return Dataset::open(root);
        }
        if root.exists() {
            if !root.is_dir() {
                return Err(DatasetError::NotADataset(root.to_path_buf()));
            }
            if std::fs::read_dir(root).map_err(io)?.next().is_some() {
                return Err(DatasetError::NotADataset(root.to_path_buf()));
            }
        }
        std::fs::create_dir_all(root).map_err(io)?;
        let text = serde_json::to_string_pretty(&json!({
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "created_by": format!("alloclens {}", env!("CARGO_PKG_VERSION")),
        }))
        .expect("a JSON object serialises");
        let tmp = root.join(format!(".{DATASET_JSON}.{}.partial", std::process::id()));
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, root.join(DATASET_JSON)))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                io(e)
            })?;
        Ok(Dataset {
            root: root.to_path_buf(),
        })
    }

    /// Opens an existing dataset for reading, checking its schema version.
    pub fn open(root: &Path) -> Result<Dataset, DatasetError> {
        let path = root.join(DATASET_JSON);
        let text =
            std::fs::read(&path).map_err(|_| DatasetError::NotADataset(root.to_path_buf()))?;
        let meta: Value = serde_json::from_slice(&text).map_err(|e| DatasetError::Io {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if meta.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(DatasetError::NotADataset(root.to_path_buf()));
        }
        let version = meta
            .get("schema_version")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if version > u64::from(SCHEMA_VERSION) {
            return Err(DatasetError::NewerDataset {
                path,
                found: version,
            });
        }
        Ok(Dataset {
            root: root.to_path_buf(),
        })
    }

    /// Whether `dir` is a dataset (has a dataset.json naming the format).
    pub fn is_dataset(dir: &Path) -> bool {
        std::fs::read(dir.join(DATASET_JSON))
            .ok()
            .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
            .is_some_and(|m| m.get("format").and_then(Value::as_str) == Some(FORMAT))
    }

    /// The directory of a table's partition: `kind=K/host=H[/command=C]`.
    pub fn partition(&self, kind: &str, host: &str, command: Option<&str>) -> PathBuf {
        let mut p = self
            .root
            .join(format!("kind={kind}"))
            .join(format!("host={host}"));
        if let Some(c) = command {
            p.push(format!("command={c}"));
        }
        p
    }

    /// The complete Parquet files of a table (names starting with `.` are temporary), sorted, each
    /// with its partition values (`host`, `command`).
    pub fn files(&self, kind: &str) -> Vec<(PathBuf, Vec<(String, String)>)> {
        let mut out = Vec::new();
        collect(
            &self.root.join(format!("kind={kind}")),
            &mut Vec::new(),
            &mut out,
        );
        out.sort();
        out
    }
}

impl Dataset {
    /// Every file of source `id`: `ID.parquet` and `ID-K.parquet` in any partition (a trace's calls
    /// may be several files); its `sources` row first, so a removal stopped half-way leaves files
    /// no `sources` row names rather than a row whose files are gone.
    pub fn source_files(&self, id: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk_partitions(&self.root, &mut |path, name| {
            let stem = name.strip_suffix(".parquet").unwrap_or("");
            let own = stem == id
                || stem
                    .strip_prefix(id)
                    .and_then(|k| k.strip_prefix('-'))
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
            if own {
                out.push(path.to_path_buf());
            }
        });
        out.sort_by_key(|p| !p.components().any(|c| c.as_os_str() == "kind=sources"));
        out
    }

    /// The temporary files an earlier merge left when it was stopped (Ctrl-C, SIGTERM, SIGKILL, a
    /// crash): exactly the names `parquet_file` and `open_or_create` give them,
    /// `.ID[-K].parquet.PID.partial` in a partition and `.dataset.json.PID.partial` in the root,
    /// whose PID no longer runs (a merge running into the same dataset keeps its own).
    pub fn stale_partials(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let root = self.root.clone();
        walk_partitions(&self.root, &mut |path, name| {
            let in_root = path.parent() == Some(root.as_path());
            if let Some((target, pid)) = partial_name(name) {
                let ours = if in_root {
                    target == DATASET_JSON
                } else {
                    is_parquet_name(target)
                };
                if ours && !Path::new("/proc").join(pid.to_string()).exists() {
                    out.push(path.to_path_buf());
                }
            }
        });
        out
    }
}

/// `(NAME, PID)` of `.NAME.PID.partial`.
fn partial_name(file: &str) -> Option<(&str, u32)> {
    let middle = file.strip_prefix('.')?.strip_suffix(".partial")?;
    let (name, pid) = middle.rsplit_once('.')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, pid.parse().ok()?))
}

/// A data file's name: 16 hex digits (a source id), `-K` for a trace's further calls files,
/// `.parquet`.
fn is_parquet_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".parquet") else {
        return false;
    };
    let (id, k) = stem.split_once('-').unwrap_or((stem, "0"));
    id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_digit())
}

/// Calls `f(path, file name)` for each file in the root and in the `key=value` directories below
/// it (the partitions), hidden ones included; nothing else is entered.
fn walk_partitions(dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !name.starts_with('.') && name.contains('=') {
                walk_partitions(&path, f);
            }
        } else if kind.is_file() {
            f(&path, &name);
        }
    }
}

fn collect(
    dir: &Path,
    partitions: &mut Vec<(String, String)>,
    out: &mut Vec<(PathBuf, Vec<(String, String)>)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            if let Some((k, v)) = name.split_once('=') {
                partitions.push((k.to_string(), v.to_string()));
                collect(&path, partitions, out);
                partitions.pop();
            }
        } else if name.ends_with(".parquet") {
            out.push((path, partitions.clone()));
        }
    }
}
