//! The preload shim, embedded at build time and written once to a cache file at run time so the
//! single alloclens binary works anywhere.
use std::fs;
use std::io::Write;
use std::path::PathBuf;

use crate::{sys, RecordError};

static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_shim.so"));

/// Environment variable that points `record` at another shim build (e.g. one built with ASan).
pub const ENV_SHIM_OVERRIDE: &str = "ALLOCLENS_SHIM";

/// The path of a usable shim: `$ALLOCLENS_SHIM`, or the embedded one written to
/// `$XDG_CACHE_HOME/alloclens/shim-<crc>.so` (else `~/.cache/...`, else `/tmp/alloclens-<uid>/`).
pub fn shim_path() -> Result<PathBuf, RecordError> {
    if let Some(p) = std::env::var_os(ENV_SHIM_OVERRIDE) {
        return Ok(PathBuf::from(p));
    }
    cached_library("shim", SHIM)
}

/// Writes an embedded shared library once into the cache directory (as `shim_path` does) and
/// returns its path: `<stem>-<crc>-<len>.so`, so each build's library has a name of its own.
pub fn cached_library(stem: &str, bytes: &[u8]) -> Result<PathBuf, RecordError> {
    let name = format!("{stem}-{:08x}-{}.so", crc32fast::hash(bytes), bytes.len());
    let mut last_err = None;
    for dir in cache_dirs() {
        let path = dir.join(&name);
        if fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(path);
        }
        match write_atomically(&dir, &path, bytes) {
            Ok(()) => return Ok(path),
            Err(e) => last_err = Some((path, e)),
        }
    }
    let (path, source) = last_err.unwrap_or_else(|| {
        (
            PathBuf::from("/tmp"),
            std::io::Error::other("no cache directory"),
        )
    });
    Err(RecordError::Shim { path, source })
}

fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("alloclens"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(h).join(".cache/alloclens"));
    }
    dirs.push(PathBuf::from(format!("/tmp/alloclens-{}", sys::real_uid())));
    dirs
}

fn write_atomically(
    dir: &std::path::Path,
    path: &std::path::Path,
    bytes: &[u8],
) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
