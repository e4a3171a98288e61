//! Finding profile tables: the one a running process maps, the newest of each process in a
//! directory (a watch directory's `agent/`, or any directory of `PID-N.prof` files), or a file.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{take, Snapshot};
use crate::table::Table;
use crate::ProfileError;

/// What to take a snapshot of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pid(u32),
    /// A table file, or a directory of them.
    Path(PathBuf),
}

/// The snapshots of a target (one per process), and the tables that could not be read beside
/// them in a directory.
#[derive(Debug, Clone)]
pub struct Taken {
    pub snapshots: Vec<Snapshot>,
    pub warnings: Vec<String>,
}

const HOW: &str = "start the program with `alloclens watch --profile -- CMD` (its agent keeps the \
                   table)";

/// Snapshots of every table `target` names, one per process.
pub fn take_all(target: &Target) -> Result<Taken, ProfileError> {
    let (paths, warnings) = find(target)?;
    let snapshots = paths.iter().map(|p| take(p)).collect::<Result<_, _>>()?;
    Ok(Taken {
        snapshots,
        warnings,
    })
}

/// A snapshot of the table process `pid` keeps now.
pub fn take_pid(pid: u32) -> Result<Snapshot, ProfileError> {
    take(&of_process(pid)?)
}

/// The table files `target` names, and what was skipped.
pub fn find(target: &Target) -> Result<(Vec<PathBuf>, Vec<String>), ProfileError> {
    match target {
        Target::Pid(pid) => Ok((vec![of_process(*pid)?], Vec::new())),
        Target::Path(path) if path.is_dir() => in_directory(path),
        Target::Path(path) => Ok((vec![path.clone()], Vec::new())),
    }
}

/// The table process `pid` maps (its own: a fork child may still map its parent's).
fn of_process(pid: u32) -> Result<PathBuf, ProfileError> {
    if !procmem::is_alive(pid) {
        return Err(ProfileError::NoTable(format!(
            "no process {pid} is running (a table left by a process that ended is read from its \
             file or directory)"
        )));
    }
    let files = procmem::mapped_files(pid).map_err(|e| {
        ProfileError::NoTable(format!("cannot read the mappings of process {pid}: {e}"))
    })?;
    files
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "prof"))
        .filter_map(|f| {
            let header = Table::open(&f).ok()?.header();
            (header.pid == pid).then_some((header.start_unix_ns, f))
        })
        .max()
        .map(|(_, f)| f)
        .ok_or_else(|| {
            ProfileError::NoTable(format!("process {pid} keeps no heap profile table: {HOW}"))
        })
}

/// The newest table of each process in `dir` (or in its `agent/`, for a watch directory).
fn in_directory(dir: &Path) -> Result<(Vec<PathBuf>, Vec<String>), ProfileError> {
    let agent = dir.join("agent");
    let dir = if agent.is_dir() {
        agent
    } else {
        dir.to_path_buf()
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| ProfileError::Table {
        path: dir.clone(),
        problem: format!("cannot list it: {e}"),
    })?;
    let mut newest: BTreeMap<u32, (u64, PathBuf)> = BTreeMap::new();
    let mut warnings = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "prof") {
            continue;
        }
        match Table::open(&path) {
            Ok(table) => {
                let h = table.header();
                let slot = newest
                    .entry(h.pid)
                    .or_insert((h.start_unix_ns, path.clone()));
                if h.start_unix_ns > slot.0 {
                    *slot = (h.start_unix_ns, path);
                }
            }
            Err(e) => warnings.push(format!("skipped {e}")),
        }
    }
    if newest.is_empty() {
        return Err(ProfileError::NoTable(format!(
            "'{}' holds no heap profile table (PID-N.prof): {HOW}",
            dir.display()
        )));
    }
    Ok((newest.into_values().map(|(_, p)| p).collect(), warnings))
}

/// Whether process `pid` runs and maps the table at `path`.
pub(super) fn maps_table(pid: u32, path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    procmem::is_alive(pid) && procmem::mapped_files(pid).is_ok_and(|files| files.contains(&path))
}
