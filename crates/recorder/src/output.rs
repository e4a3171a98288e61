//! The trace file a recording writes, and what becomes of a file of that name already there.
//!
//! By default the name is reserved with `O_CREAT | O_EXCL` and the trace is written straight
//! into it: two recordings can never share one file (each would overwrite the other's chunks),
//! an existing trace is never destroyed, and a recorder that dies (or a machine that stops)
//! leaves a readable trace under the name asked for. With [`Existing::Replace`] (`--force`) the
//! trace is written into a partial file beside the target (`.NAME.PID.partial`, same directory
//! so that the rename is atomic) and renamed over the target once the recording ends: the old
//! file stays whole until there is a new one. Either way, a command that never starts leaves
//! nothing behind ([`TraceFile::discard`]).
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::{sys, RecordError};

/// What to do when the output file exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Existing {
    /// Refuse to start (the default).
    #[default]
    Refuse,
    /// Record beside it and replace it when the recording ends.
    Replace,
}

/// Where a recording's trace goes: the file asked for, and the file written (the same, or the
/// partial file renamed over it at the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFile {
    target: PathBuf,
    written: PathBuf,
}

impl TraceFile {
    /// Creates the file to write the trace into (see the module's documentation).
    pub fn create(target: &Path, existing: Existing) -> Result<(TraceFile, File), RecordError> {
        let output_error = |source: io::Error| RecordError::Output {
            path: target.to_path_buf(),
            source,
        };
        // Following symbolic links, as opening does: `/dev/stdout` is a terminal, a pipe, or the
        // file the shell redirected our output to.
        let mut target = safe_output::resolve_links(target).map_err(output_error)?;
        match std::fs::metadata(&target) {
            Ok(meta) if !meta.is_file() => return Err(RecordError::NotRegular { path: target }),
            Ok(meta) if is_our_output(&meta) => {
                return Err(RecordError::OwnOutput { path: target })
            }
            Ok(_) => {
                if existing == Existing::Refuse {
                    return Err(RecordError::Exists { path: target });
                }
                // Replace the file a symbolic link points to, as writing into it did, not the link.
                target = std::fs::canonicalize(&target).map_err(output_error)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(output_error(e)),
        }
        let written = match existing {
            Existing::Refuse => target.clone(),
            Existing::Replace => partial_path(&target),
        };
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&written)
            .map_err(|e| match e.kind() {
                // Made between our look and the open: another recording took the name.
                io::ErrorKind::AlreadyExists if written == target => RecordError::Exists {
                    path: target.clone(),
                },
                _ => output_error(e),
            })?;
        Ok((TraceFile { target, written }, file))
    }

    /// The file asked for.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The file the trace is being written into.
    pub fn written(&self) -> &Path {
        &self.written
    }

    /// The recording is over (complete or not): the trace takes the target's name.
    pub fn commit(&self) -> io::Result<()> {
        if self.written == self.target {
            return Ok(());
        }
        std::fs::rename(&self.written, &self.target)
    }

    /// The command never started: the file holds no recording, and the target (replaced or not)
    /// is left as it was.
    pub fn discard(&self) {
        let _ = std::fs::remove_file(&self.written);
    }

    /// The two paths as one message (`supervisor::Link`): written, NUL, target.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.written.as_os_str().as_bytes().to_vec();
        v.push(0);
        v.extend_from_slice(self.target.as_os_str().as_bytes());
        v
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<TraceFile> {
        let nul = bytes.iter().position(|&b| b == 0)?;
        let path = |b: &[u8]| PathBuf::from(std::ffi::OsStr::from_bytes(b));
        Some(TraceFile {
            written: path(&bytes[..nul]),
            target: path(&bytes[nul + 1..]),
        })
    }
}

/// `DIR/.NAME.PID.partial` for `DIR/NAME`: hidden, beside the target (a rename within one file
/// system is atomic), and named for what it is should it ever be left behind.
fn partial_path(target: &Path) -> PathBuf {
    let name = target.file_name().unwrap_or(target.as_os_str());
    let mut partial = std::ffi::OsString::from(".");
    partial.push(name);
    partial.push(format!(".{}.partial", std::process::id()));
    target.with_file_name(partial)
}

/// Whether the file is our own standard output or error, where the command's output goes too
/// (`record -o /dev/stdout > f`): the trace and the output would overwrite each other.
fn is_our_output(meta: &std::fs::Metadata) -> bool {
    [libc::STDOUT_FILENO, libc::STDERR_FILENO]
        .iter()
        .any(|&fd| sys::device_and_inode(fd) == Some((meta.dev(), meta.ino())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        std::fs::write(&path, "old").unwrap();
        let err = TraceFile::create(&path, Existing::Refuse).unwrap_err();
        assert!(matches!(err, RecordError::Exists { .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
    }

    #[test]
    fn replace_writes_beside_and_renames_over_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        std::fs::write(&path, "old").unwrap();
        let (out, mut file) = TraceFile::create(&path, Existing::Replace).unwrap();
        assert_eq!(out.written().parent(), path.parent());
        let name = out.written().file_name().unwrap().to_string_lossy();
        assert!(
            name.starts_with(".t.alt.") && name.ends_with(".partial"),
            "{name}"
        );
        io::Write::write_all(&mut file, b"new").unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"old",
            "untouched until the end"
        );
        out.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn discard_leaves_the_old_file_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        std::fs::write(&path, "old").unwrap();
        let (out, _file) = TraceFile::create(&path, Existing::Replace).unwrap();
        out.discard();
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let fresh = dir.path().join("u.alt");
        let (out, _file) = TraceFile::create(&fresh, Existing::Refuse).unwrap();
        out.discard();
        assert!(!fresh.exists());
    }

    #[test]
    fn only_regular_files() {
        for existing in [Existing::Refuse, Existing::Replace] {
            let err = TraceFile::create(Path::new("/dev/null"), existing).unwrap_err();
            assert!(matches!(err, RecordError::NotRegular { .. }), "{err}");
        }
    }

    #[test]
    fn the_paths_go_through_a_message_unchanged() {
        let out = TraceFile {
            target: "/a/b c.alt".into(),
            written: "/a/.b c.alt.7.partial".into(),
        };
        assert_eq!(TraceFile::from_bytes(&out.to_bytes()), Some(out));
    }
}
