//! One session per directory: a lock file inside a results or watch directory, `flock`ed for the
//! session, so a second `--force` session into the same directory stops in one line naming the
//! first instead of both reporting success over each other's files.
//!
//! The file holds the holder's pid (for the message). It is removed when the session ends; a
//! session that took the lock on a file removed meanwhile (the holder ended between our open
//! and our lock) tries again on the new file, so two sessions never hold locks on two files.
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside the directory (hidden: readers of the directory skip it).
pub const LOCK_FILE: &str = ".alloclens.lock";

/// Why a directory could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another session holds it.
    Busy {
        dir: PathBuf,
        pid: Option<u32>,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy { dir, pid } => write!(
                f,
                "another alloclens ({}) is writing into '{}': wait for it to end, or give another directory",
                pid.map_or_else(|| "pid unknown".to_string(), |p| format!("pid {p}")),
                dir.display()
            ),
            LockError::Io { path, source } => {
                write!(f, "cannot lock '{}': {source}", path.display())
            }
        }
    }
}

impl std::error::Error for LockError {}

/// The lock, held until dropped.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    _file: File,
}

impl DirLock {
    /// Locks `dir` (which must exist) for this process, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        loop {
            // O_NOFOLLOW and no O_TRUNC: a link or a file planted under our name is never followed
            // or emptied.
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(io_err)?;
            let meta = file.metadata().map_err(io_err)?;
            if !meta.is_file() {
                return Err(io_err(io::Error::other("not a regular file")));
            }
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(io_err(err));
                }
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Busy {
                    dir: dir.to_path_buf(),
                    pid: text.trim().parse().ok(),
                });
            }
            // The holder we waited on may have removed the file between our open and our lock.
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.ino() == meta.ino() && now.dev() == meta.dev() => {}
                _ => continue,
            }
            // Our own lock file, locked: its old pid goes.
            file.set_len(0).map_err(io_err)?;
            file.rewind().map_err(io_err)?;
            writeln!(file, "{}", std::process::id()).map_err(io_err)?;
            return Ok(DirLock { path, _file: file });
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while still locked (the descriptor closes after), so a session that opened it
        // meanwhile sees the name changed and takes a fresh one.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_the_lock_goes_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path()).unwrap();
        // flock locks belong to the open file: a second open in this process conflicts as
        // another process's would.
        let err = DirLock::acquire(dir.path()).unwrap_err();
        let line = err.to_string();
        assert!(
            line.contains(&format!("pid {}", std::process::id())),
            "{line}"
        );
        drop(first);
        assert!(!dir.path().join(LOCK_FILE).exists());
        let _again = DirLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_link_under_the_lock_files_name_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(LOCK_FILE)).unwrap();
        assert!(DirLock::acquire(dir.path()).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }
}
