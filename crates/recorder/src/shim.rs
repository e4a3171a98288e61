//! The preload shim (`embedded::RECORD_SHIM`), written once to a cache file at run time so the
//! single alloclens binary works anywhere.
use std::path::PathBuf;

use crate::RecordError;

/// Environment variable that points `record` at another shim build (e.g. one built with ASan).
pub const ENV_SHIM_OVERRIDE: &str = "ALLOCLENS_SHIM";

/// The path of a usable shim: `$ALLOCLENS_SHIM`, or the embedded one written to
/// `$XDG_CACHE_HOME/alloclens/shim-<crc>.so` (else `~/.cache/...`, else `/tmp/alloclens-<uid>/`).
pub fn shim_path() -> Result<PathBuf, RecordError> {
    if let Some(p) = std::env::var_os(ENV_SHIM_OVERRIDE) {
        let path = PathBuf::from(p);
        if !embedded::preloadable(&path) {
            return Err(RecordError::Shim {
                path,
                source: std::io::Error::other(format!(
                    "{ENV_SHIM_OVERRIDE} holds a space or a colon, which LD_PRELOAD cannot carry"
                )),
            });
        }
        return Ok(path);
    }
    let shim = &embedded::RECORD_SHIM;
    cached_library(shim.stem, shim.bytes)
}

/// Writes an embedded shared library once into the cache directory (`embedded::cached_library`)
/// and returns its path.
pub fn cached_library(stem: &str, bytes: &[u8]) -> Result<PathBuf, RecordError> {
    embedded::cached_library(stem, bytes).map_err(|e| RecordError::Shim {
        path: e.path,
        source: e.source,
    })
}
