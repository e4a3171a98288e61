//! The KSM preload library (shim/ksm), embedded at build time (build.rs) and written once to the
//! cache like the record shim: `run --ksm --ksm-mechanism madvise` preloads it into the command.
use std::path::PathBuf;

static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/liballoclens_ksm.so"));

/// The path of the library, written to the cache directory when it is not there yet.
pub fn path() -> anyhow::Result<PathBuf> {
    Ok(recorder::cached_library("ksm", LIBRARY)?)
}
