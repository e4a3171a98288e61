//! A file written whole: to a temporary file beside its name, renamed over it once complete, so a
//! full disk or an interruption never leaves half a file under that name and an earlier version
//! stays whole. Only a regular file (or no file) is ever replaced: the name is resolved through
//! its symbolic links first, as `open` resolves them, and a device, FIFO or socket is written into
//! directly (opened without `O_CREAT`/`O_TRUNC`), never renamed over.
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Links followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// What writing to a name means once its links are followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A regular file or nothing yet: written by rename at this path (the link's target).
    Replace(PathBuf),
    /// A character device, FIFO or socket: written into directly.
    Stream(PathBuf),
}

/// `path` with its final symbolic links followed (relative targets taken from the link's
/// directory), whether or not the last target exists: where `open(path, O_CREAT)` would write.
pub fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "'{}': too many levels of symbolic links",
        path.display()
    )))
}

/// How `path` is to be written, or why it cannot be (a directory, ...).
pub fn destination(path: &Path) -> io::Result<Destination> {
    let resolved = resolve_links(path)?;
    let meta = match std::fs::metadata(&resolved) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Destination::Replace(resolved)),
        Err(e) => return Err(e),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        Ok(Destination::Replace(resolved))
    } else if kind.is_char_device() || kind.is_fifo() || kind.is_socket() {
        Ok(Destination::Stream(resolved))
    } else {
        let what = if kind.is_dir() {
            "a directory"
        } else {
            "neither a file nor a device"
        };
        Err(io::Error::other(format!(
            "'{}' is {what}: name a file to write",
            path.display()
        )))
    }
}

/// A file being written (see the module's documentation); [`WholeFile::commit`] makes it whole.
/// Dropped without a commit, the temporary file goes and the name is untouched.
pub struct WholeFile {
    inner: Inner,
}

enum Inner {
    Renamed {
        tmp: tempfile::NamedTempFile,
        target: PathBuf,
    },
    Direct {
        file: File,
        path: PathBuf,
    },
}

impl WholeFile {
    /// Starts writing `path`. A new file is 0644, readable by whoever may read the folder
    /// (man(1) of another user, a web server), not a temporary file's 0600.
    pub fn create(path: &Path) -> io::Result<WholeFile> {
        let inner = match destination(path)? {
            Destination::Replace(target) => {
                let dir = match target.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                // The target's extension kept: a chart backend picks its encoder by it.
                let suffix = target
                    .extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_default();
                let tmp = tempfile::Builder::new()
                    .prefix(".alloclens-")
                    .suffix(&suffix)
                    .tempfile_in(dir)?;
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644))?;
                Inner::Renamed { tmp, target }
            }
            Destination::Stream(path) => Inner::Direct {
                file: OpenOptions::new().write(true).open(&path)?,
                path,
            },
        };
        Ok(WholeFile { inner })
    }

    /// The path to give a library that writes by name (a chart backend): the temporary file, or
    /// the device itself.
    pub fn path(&self) -> &Path {
        match &self.inner {
            Inner::Renamed { tmp, .. } => tmp.path(),
            Inner::Direct { path, .. } => path,
        }
    }

    /// Gives the file its name (or flushes what went into the device).
    pub fn commit(self) -> io::Result<()> {
        match self.inner {
            Inner::Renamed { tmp, target } => {
                tmp.as_file().sync_all()?;
                tmp.persist(&target).map_err(|e| e.error)?;
            }
            Inner::Direct { mut file, .. } => file.flush()?,
        }
        Ok(())
    }
}

impl Write for WholeFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Renamed { tmp, .. } => tmp.write(buf),
            Inner::Direct { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Renamed { tmp, .. } => tmp.flush(),
            Inner::Direct { file, .. } => file.flush(),
        }
    }
}

/// Removes `path` when it is a regular file (not following a link): undoing a file this session
/// wrote, never a device it wrote into or a link it wrote through.
pub fn remove_written(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => std::fs::remove_file(path),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `path` whole with what `fill` writes.
pub fn write_whole(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut out = BufWriter::new(WholeFile::create(path)?);
    fill(&mut out)?;
    out.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_is_followed_and_its_target_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("page.html");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link");
        symlink("page.html", &link).unwrap();
        write_whole(&link, |out| out.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn a_dangling_link_gets_its_target_created() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        symlink(dir.path().join("new.txt"), &link).unwrap();
        write_whole(&link, |out| out.write_all(b"x")).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
            "x"
        );
    }

    #[test]
    fn a_fifo_is_written_into_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_whole(&fifo, |out| out.write_all(b"through")).unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }

    #[test]
    fn a_directory_is_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_whole(dir.path(), |out| out.write_all(b"x")).unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
