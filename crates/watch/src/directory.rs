//! The watch directory: created, or emptied of an earlier watch's files with `--force`, and locked
//! for the session (`safe_output::DirLock`), so a second watch into it stops in one line. A
//! directory holding anything a watch did not write, at its top or in `agent/`, is refused, with or
//! without `--force`: only the watch's own regular files are ever removed (a link, a device or a
//! pipe under one of their names is not the watch's).
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::results::{
    AGENT_DIR, COLLECTOR_LOG, COLLECTOR_PID, PROGRAM_OUTPUT, SAMPLES_CSV, WATCH_JSON,
};

/// Files a watch writes at the top of its directory (an earlier watch's are replaced with
/// --force), beside its `agent/` directory; the `.tmp` ones are left by a kill while replacing.
const OURS: [&str; 8] = [
    "report.html",
    PROGRAM_OUTPUT,
    COLLECTOR_PID,
    COLLECTOR_LOG,
    WATCH_JSON,
    SAMPLES_CSV,
    "watch.json.tmp",
    "samples.csv.tmp",
];

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("{0} holds an earlier watch: pass --force to replace it, or give another -o")]
    EarlierWatch(PathBuf),
    #[error("{dir} holds files alloclens watch did not write ({names}): give an empty or new directory with -o")]
    Foreign { dir: PathBuf, names: String },
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Locked(#[from] safe_output::LockError),
}

/// The output directory as [`WatchDirectory::prepare`] left it, locked while it lives. Dropped
/// before [`WatchDirectory::keep`] (an error before the watch started: the command could not start,
/// the process is gone), it removes what this watch wrote, and the directory when the watch created
/// it: nothing is left that `report` would read as a watch.
pub struct WatchDirectory {
    path: PathBuf,
    created: bool,
    kept: bool,
    _lock: safe_output::DirLock,
}

impl WatchDirectory {
    /// Creates `dir`, or empties it of an earlier watch's files with `force`.
    pub fn prepare(dir: &Path, force: bool) -> Result<WatchDirectory, DirectoryError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        // Locked before anything in it changes: a second watch into it stops here.
        let lock = safe_output::DirLock::acquire(dir)?;
        // Kept until prepared: a refusal below leaves an earlier watch's files alone.
        let mut prepared = WatchDirectory {
            path: dir.to_path_buf(),
            created,
            kept: true,
            _lock: lock,
        };
        let ours = our_files(dir)?;
        if !ours.is_empty() {
            if !force {
                return Err(DirectoryError::EarlierWatch(dir.to_path_buf()));
            }
            remove_files(dir, &ours)?;
        }
        prepared.kept = false;
        Ok(prepared)
    }

    /// An earlier watch's directory to go on with (`live --pid` again): locked, and nothing in
    /// it removed, now or on drop.
    pub fn reopen(dir: &Path) -> Result<WatchDirectory, DirectoryError> {
        let lock = safe_output::DirLock::acquire(dir)?;
        Ok(WatchDirectory {
            path: dir.to_path_buf(),
            created: false,
            kept: true,
            _lock: lock,
        })
    }

    /// The watch ran: from here on, its directory stays whatever happens (still locked until
    /// dropped).
    pub fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for WatchDirectory {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        if let Ok(ours) = our_files(&self.path) {
            let _ = remove_files(&self.path, &ours);
        }
        if self.created {
            // Emptied above; anything else someone put there meanwhile stays.
            let _ = std::fs::remove_file(self.path.join(safe_output::LOCK_FILE));
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DirectoryError {
    let path = path.to_path_buf();
    move |source| DirectoryError::Io { what, path, source }
}

/// The files of an earlier watch in `dir` (paths relative to it, `agent/` last), or an error
/// naming what a watch does not write.
fn our_files(dir: &Path) -> Result<Vec<PathBuf>, DirectoryError> {
    let list = |d: &Path| -> Result<Vec<std::fs::DirEntry>, DirectoryError> {
        std::fs::read_dir(d)
            .and_then(|entries| entries.collect::<Result<_, _>>())
            .map_err(io("read", d))
    };
    let is_file = |e: &std::fs::DirEntry| e.file_type().is_ok_and(|t| t.is_file());
    let mut ours = Vec::new();
    let mut foreign = Vec::new();
    let mut agent_dir = false;
    for entry in list(dir)? {
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if name == AGENT_DIR && is_dir {
            for file in list(&entry.path())? {
                let inner = Path::new(AGENT_DIR).join(file.file_name());
                if is_file(&file) && is_agent_file(&file.file_name()) {
                    ours.push(inner);
                } else {
                    foreign.push(inner.display().to_string());
                }
            }
            agent_dir = true;
        } else if name == safe_output::LOCK_FILE && is_file(&entry) {
            // The session's lock (ours, or one a killed watch left): never another's to remove.
        } else if is_file(&entry) && OURS.iter().any(|o| OsStr::new(o) == name) {
            ours.push(PathBuf::from(name));
        } else {
            foreign.push(name.to_string_lossy().into_owned());
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        let more = foreign.len().saturating_sub(3);
        return Err(DirectoryError::Foreign {
            dir: dir.to_path_buf(),
            names: format!(
                "{}{}",
                foreign[..foreign.len().min(3)].join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        });
    }
    if agent_dir {
        ours.push(PathBuf::from(AGENT_DIR));
    }
    Ok(ours)
}

/// What the agent writes in its directory: `PID.snap`, `PID.snap.tmp`, and the trim request
/// `PID.trim` alloclens drops there.
fn is_agent_file(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    [".snap", ".snap.tmp", ".trim"].iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Removes `files` (relative to `dir`; a directory among them once emptied of the others).
fn remove_files(dir: &Path, files: &[PathBuf]) -> Result<(), DirectoryError> {
    for file in files {
        let path = dir.join(file);
        let removed = if file.as_os_str() == AGENT_DIR {
            std::fs::remove_dir(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("remove", &path)(e))
            }
            _ => {}
        }
    }
    Ok(())
}
