//! The files an attach gives the process, made where it can see them: its own /tmp (in a container,
//! the container's), reached from here through /proc/PID/root.
//!
//! `/tmp/alloclens-attach-UID/` (UID ours) holds the library under a name of its own per build
//! (`<stem>-<crc>-<len>.so`), so that attaching again reuses the copy the process has mapped
//! (dlopen of the same file returns the same handle: a process attached to 50 times maps the library
//! once). Only a directory we own and no one else may write is used: /tmp is shared, and a
//! directory or link planted there by another user must never receive our files.

use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::AttachError;
use crate::process::{seen_from_here, Target};

/// A file or directory staged for a process: its path as the process sees it, and as we do.
#[derive(Debug, Clone)]
pub struct Staged {
    pub theirs: PathBuf,
    /// Through /proc/PID/root: valid while the process lives.
    pub ours: PathBuf,
    /// Our directory, held open: what is ours in it can be removed after the process has exited
    /// (then /proc/PID/root leads nowhere, and a private /tmp of its own is only reachable so).
    parent: Arc<OwnedFd>,
    name: String,
}

impl Staged {
    /// Removes a directory made by [`scratch_directory`], as [`remove_scratch`] does, through our
    /// directory held open: it works after the process has exited too.
    pub fn remove(&self) {
        remove_scratch(&self.through_parent());
    }

    /// Its path through our own descriptor of its directory (valid while `self` lives).
    fn through_parent(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/self/fd/{}/{}",
            self.parent.as_raw_fd(),
            self.name
        ))
    }
}

/// Our directory in the process's /tmp, made if need be, checked to be ours alone; with a
/// descriptor of it, opened without following a link and checked through that descriptor.
fn own_directory(target: &Target) -> Result<(PathBuf, PathBuf, Arc<OwnedFd>), AttachError> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let theirs = PathBuf::from(format!("/tmp/alloclens-attach-{uid}"));
    let ours = seen_from_here(target, &theirs);
    let err = |source| AttachError::Stage {
        pid: target.pid,
        path: theirs.display().to_string(),
        source,
    };
    match fs::DirBuilder::new().mode(0o755).create(&ours) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e)),
    }
    let not_ours = || {
        err(std::io::Error::other(
            "it exists but is not a directory that only we may write: remove it",
        ))
    };
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&ours)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => not_ours(),
            _ => err(e),
        })?;
    let meta = dir.metadata().map_err(err)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(not_ours());
    }
    // The process may run as another user: it must read the library (0755 on the directory).
    dir.set_permissions(fs::Permissions::from_mode(0o755))
        .map_err(err)?;
    Ok((theirs, ours, Arc::new(OwnedFd::from(dir))))
}

/// Puts `bytes` as `<stem>-<crc>-<len>.so` in our directory of the process's /tmp (once: a copy
/// already there with that length is reused) and returns both paths.
pub fn stage(target: &Target, stem: &str, bytes: &[u8]) -> Result<Staged, AttachError> {
    let (dir_theirs, dir_ours, parent) = own_directory(target)?;
    let name = format!("{stem}-{:08x}-{}.so", crc32fast::hash(bytes), bytes.len());
    let staged = Staged {
        theirs: dir_theirs.join(&name),
        ours: dir_ours.join(&name),
        parent,
        name: name.clone(),
    };
    if fs::symlink_metadata(&staged.ours)
        .is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
    {
        return Ok(staged);
    }
    let err = |source| AttachError::Stage {
        pid: target.pid,
        path: staged.theirs.display().to_string(),
        source,
    };
    // A temporary name of our own in our own directory, renamed: a process never maps half a
    // library, and nothing but our own file is ever replaced.
    let tmp = dir_ours.join(format!(".{name}.{}", std::process::id()));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(err)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, &staged.ours)) {
        let _ = fs::remove_file(&tmp);
        return Err(err(e));
    }
    Ok(staged)
}

/// The lock of one attach to process `target.pid`, held while the session lasts: a second
/// alloclens attaching to the same process meanwhile is refused. Dropped, its file is removed
/// (through our directory held open: the process may have exited meanwhile).
#[derive(Debug)]
pub struct SessionLock {
    parent: Arc<OwnedFd>,
    name: std::ffi::CString,
    _file: fs::File,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // SAFETY: unlinkat of a plain name in a directory we hold open.
        unsafe { libc::unlinkat(self.parent.as_raw_fd(), self.name.as_ptr(), 0) };
    }
}

pub fn session_lock(target: &Target) -> Result<SessionLock, AttachError> {
    let (dir_theirs, dir_ours, parent) = own_directory(target)?;
    let name = format!("{}.lock", target.pid);
    let err = |source| AttachError::Stage {
        pid: target.pid,
        path: dir_theirs.join(&name).display().to_string(),
        source,
    };
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(dir_ours.join(&name))
        .map_err(err)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(AttachError::AlreadyAttached(target.pid));
        }
        return Err(err(e));
    }
    Ok(SessionLock {
        parent,
        name: std::ffi::CString::new(name).expect("digits and a dot"),
        _file: file,
    })
}

/// A fresh directory in our directory of the process's /tmp that the process may write (owned by
/// its user), for the files its library writes back. Remove it with [`Staged::remove`].
pub fn scratch_directory(target: &Target, label: &str) -> Result<Staged, AttachError> {
    let (dir_theirs, dir_ours, parent) = own_directory(target)?;
    let name = format!("{label}-{}-{}", target.pid, std::process::id());
    let staged = Staged {
        theirs: dir_theirs.join(&name),
        ours: dir_ours.join(&name),
        parent,
        name: name.clone(),
    };
    let err = |source| AttachError::Stage {
        pid: target.pid,
        path: staged.theirs.display().to_string(),
        source,
    };
    let here = staged.through_parent();
    match fs::DirBuilder::new().mode(0o700).create(&here) {
        Ok(()) => {}
        // Left by an alloclens of ours that was killed (same pids): empty it.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            remove_scratch(&here);
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&here)
                .map_err(err)?;
        }
        Err(e) => return Err(err(e)),
    }
    // SAFETY: geteuid has no preconditions.
    if target.uid != unsafe { libc::geteuid() } {
        std::os::unix::fs::chown(&here, Some(target.uid), Some(target.gid)).map_err(err)?;
    }
    Ok(staged)
}

/// Removes a directory made by [`scratch_directory`] and the plain files in it (the library's own
/// files and `record --pid`'s socket; nothing else is ever put there). Through /proc/PID/root, this fails once the process has
/// exited: [`Staged::remove`] does not. The library may be writing a file at that moment: the
/// removal is tried again until the directory is gone (at most a second), after which the library
/// finds no directory and stops writing.
pub fn remove_scratch(dir: &Path) {
    for _ in 0..100 {
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                // The library's files, and record --pid's socket.
                if e.file_type().is_ok_and(|t| t.is_file() || t.is_socket()) {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}
