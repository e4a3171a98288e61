//! The preload libraries alloclens carries inside its binary (the record shim, the watch agent, the
//! KSM library): built from shim/ by build.rs, embedded here, and written out as files for
//! `LD_PRELOAD`. Each is written once into a cache directory
//! under a name of its own per build (`<stem>-<crc>-<len>.so`), so two alloclens versions never
//! overwrite each other's library while a program still maps it.
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A preload library built from shim/ and carried in the binary.
pub struct Library {
    /// Its cache file's name starts with it.
    pub stem: &'static str,
    pub bytes: &'static [u8],
}

/// The record shim (shim/), preloaded by `record`.
pub static RECORD_SHIM: Library = Library {
    stem: "shim",
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_shim.so")),
};

/// The attach shim (shim/record built with AL_ATTACH_BUILD), loaded by `record --pid`.
pub static ATTACH_SHIM: Library = Library {
    stem: "attach",
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_attach.so")),
};

/// The watch agent (shim/agent), preloaded by `watch`.
pub static WATCH_AGENT: Library = Library {
    stem: "agent",
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_agent.so")),
};

/// The KSM library (shim/ksm), preloaded by `run --ksm --ksm-mechanism madvise`.
pub static KSM_MERGE: Library = Library {
    stem: "ksm",
    bytes: include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_ksm.so")),
};

impl Library {
    /// Its file in the cache directory, written there first if need be ([`cached_library`]).
    pub fn cached(&self) -> Result<PathBuf, CacheError> {
        cached_library(self.stem, self.bytes)
    }
}

/// Why no cache directory could take the library: the last path tried and its error.
#[derive(Debug)]
pub struct CacheError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Writes `bytes` to `<dir>/<stem>-<crc>-<len>.so` in the first cache directory that takes it
/// (`$XDG_CACHE_HOME/alloclens`, else `~/.cache/alloclens`, else `/tmp/alloclens-<uid>`), or finds
/// it there already, and returns its path. A directory whose path holds a space or a colon is
/// passed over: the dynamic loader splits LD_PRELOAD there, and would not load the library. The
/// file is written under a temporary name and renamed, so a concurrent alloclens never maps half a
/// library.
pub fn cached_library(stem: &str, bytes: &[u8]) -> Result<PathBuf, CacheError> {
    let name = format!("{stem}-{:08x}-{}.so", crc32fast::hash(bytes), bytes.len());
    let mut last_err = None;
    for dir in cache_dirs() {
        let path = dir.join(&name);
        if !preloadable(&path) {
            continue;
        }
        if fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(path);
        }
        match write_atomically(&dir, &path, bytes) {
            Ok(()) => return Ok(path),
            Err(source) => last_err = Some(CacheError { path, source }),
        }
    }
    Err(last_err.unwrap_or_else(|| CacheError {
        path: PathBuf::from("/tmp"),
        source: std::io::Error::other("no cache directory"),
    }))
}

/// Whether LD_PRELOAD can carry `path`: ld.so splits its value at spaces and colons.
pub fn preloadable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    !path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| *b == b' ' || *b == b':')
}

fn cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        dirs.push(PathBuf::from(x).join("alloclens"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        dirs.push(PathBuf::from(h).join(".cache/alloclens"));
    }
    // SAFETY: getuid has no preconditions.
    dirs.push(PathBuf::from(format!("/tmp/alloclens-{}", unsafe {
        libc::getuid()
    })));
    dirs
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_is_written_once_and_found_again() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("XDG_CACHE_HOME", dir.path());
        let a = cached_library("probe", b"\x7fELF first").unwrap();
        assert!(a.starts_with(dir.path().join("alloclens")));
        assert_eq!(fs::read(&a).unwrap(), b"\x7fELF first");
        assert_eq!(cached_library("probe", b"\x7fELF first").unwrap(), a);
        // Another build's bytes get another name: the first file is left alone.
        let b = cached_library("probe", b"\x7fELF second").unwrap();
        assert_ne!(a, b);
        assert_eq!(fs::read(&a).unwrap(), b"\x7fELF first");

        // A cache path LD_PRELOAD cannot carry is passed over, for every library.
        for unusable in ["with space", "with:colon"] {
            let odd = dir.path().join(unusable);
            std::env::set_var("XDG_CACHE_HOME", &odd);
            std::env::set_var("HOME", &odd);
            let c = cached_library("probe", b"\x7fELF third").unwrap();
            assert!(preloadable(&c), "{}", c.display());
            assert!(!c.starts_with(&odd), "{}", c.display());
        }
    }
}
