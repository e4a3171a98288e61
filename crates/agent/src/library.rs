//! The agent library, embedded at build time and written once to a cache file at run time so the
//! single alloclens binary works anywhere (as the record shim is: crates/recorder/src/shim.rs).
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::AgentError;

static AGENT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_agent.so"));

/// Environment variable that points alloclens at another agent build (e.g. one built with ASan).
pub const ENV_AGENT_OVERRIDE: &str = "ALLOCLENS_AGENT";

/// The path of a usable agent library: `$ALLOCLENS_AGENT`, or the embedded one written to
/// `$XDG_CACHE_HOME/alloclens/agent-<crc>-<len>.so` (else `~/.cache/...`, else
/// `/tmp/alloclens-<uid>/`).
pub fn library_path() -> Result<PathBuf, AgentError> {
    if let Some(p) = std::env::var_os(ENV_AGENT_OVERRIDE).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let name = format!("agent-{:08x}-{}.so", crc32fast::hash(AGENT), AGENT.len());
    let mut last_err = None;
    for dir in cache_dirs() {
        let path = dir.join(&name);
        if fs::metadata(&path).is_ok_and(|m| m.len() == AGENT.len() as u64) {
            return Ok(path);
        }
        match write_atomically(&dir, &path) {
            Ok(()) => return Ok(path),
            Err(source) => last_err = Some(AgentError::Library { path, source }),
        }
    }
    Err(last_err.unwrap_or_else(|| AgentError::Library {
        path: PathBuf::from("/tmp"),
        source: std::io::Error::other("no cache directory"),
    }))
}

fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("alloclens"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(h).join(".cache/alloclens"));
    }
    // SAFETY: getuid cannot fail.
    dirs.push(PathBuf::from(format!("/tmp/alloclens-{}", unsafe {
        libc::getuid()
    })));
    dirs
}

fn write_atomically(dir: &Path, path: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(AGENT)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
