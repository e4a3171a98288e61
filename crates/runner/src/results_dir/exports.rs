//! The files `run --export-*` writes beside a results directory, checked before anything runs
//! (the summary is written after the last run, minutes later).
use std::path::{Path, PathBuf};

use super::is_own_entry;

/// One `--export-*` file: the option that names it, an example file name for the messages.
#[derive(Debug, Clone)]
pub struct Export {
    pub option: &'static str,
    pub example: &'static str,
    pub path: PathBuf,
}

/// Why an export was refused: one line naming the option, the file and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExportRefused(pub String);

macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err(ExportRefused(format!($($arg)*)))
    };
}

/// --export-* checked before anything runs (the summary is written after the last run, minutes
/// later): a file of the results directory itself would be replaced by the summary (`report` and
/// `diff` then fail), two exports to one file would keep only the last, and a directory, a
/// missing or an unwritable folder would fail only then. Paths are compared resolved (symbolic
/// links, `..`), files that do not exist yet included.
pub fn check_exports(output: &Path, exports: &[Export]) -> Result<(), ExportRefused> {
    let results = resolved(output);
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for Export {
        option,
        example,
        path,
    } in exports
    {
        let (option, example) = (*option, *example);
        let shown = path.display();
        let target = resolved(path);
        if target == results {
            refuse!("{option} '{shown}' is the results directory (-o): give the export a file name of its own, e.g. {}", output.join(example).display());
        }
        let parent = target.parent().unwrap_or(Path::new("/"));
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let own = parent == results && is_own_entry(&name);
        if own || target.starts_with(results.join("output")) {
            let inside = target
                .strip_prefix(&results)
                .unwrap_or(&target)
                .display()
                .to_string();
            refuse!("{option} '{shown}' is the run's own {inside} in '{}': the summary would replace it (report and diff read it); write the export under another name, e.g. {}", output.display(), output.join(example).display());
        }
        if let Some((_, other)) = seen.iter().find(|(p, _)| *p == target) {
            refuse!("{option} and {other} both write '{shown}': one would replace the other; give each export a file of its own");
        }
        seen.push((target.clone(), option));
        match std::fs::metadata(&target) {
            Ok(m) if m.is_dir() => {
                refuse!("{option} '{shown}' is a directory: give a file name (e.g. {})", path.join(example).display())
            }
            Ok(_) if !writable(&target) => {
                refuse!("{option} '{shown}' cannot be written (permission denied): choose a file you can write")
            }
            Ok(_) => {}
            // The results directory is created, with its missing parents, before the runs: an
            // export in it or beside it (`-o a/b/run --export-json a/b/run.json`) is fine.
            Err(_) if results.starts_with(parent) && !parent.exists() || parent == results => {}
            Err(_) => match std::fs::metadata(parent) {
                Ok(m) if !m.is_dir() => refuse!("{option} '{shown}': '{}' is not a directory", parent.display()),
                Ok(_) if !writable(parent) => refuse!("{option} '{shown}': the directory '{}' cannot be written (permission denied): choose one you can write", parent.display()),
                Ok(_) => {}
                Err(_) => refuse!("{option} '{shown}': the directory '{}' does not exist: create it first or choose another", parent.display()),
            },
        }
    }
    Ok(())
}

/// `path` as the file system resolves it: absolute, symbolic links followed (a dangling one to
/// where it points), the part that does not exist yet appended as given.
fn resolved(path: &Path) -> PathBuf {
    fn resolve(path: &Path, links: u32) -> PathBuf {
        if let Ok(real) = std::fs::canonicalize(path) {
            return real;
        }
        if links < 40 {
            if let Ok(to) = std::fs::read_link(path) {
                let to = match path.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
                return resolve(&to, links + 1);
            }
        }
        match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => resolve(dir, links).join(name),
            _ => path.to_path_buf(),
        }
    }
    resolve(
        &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        0,
    )
}

/// Whether this process may write `path` (access(2) with the effective ids).
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and constant flags; faccessat only reads them.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}
