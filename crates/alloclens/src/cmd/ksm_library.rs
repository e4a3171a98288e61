//! The KSM preload library (`embedded::KSM_MERGE`), written once to the cache like the record shim:
//! `run --ksm --ksm-mechanism madvise` preloads it into the command.
use std::path::PathBuf;

/// The path of the library, written to the cache directory when it is not there yet.
pub fn path() -> anyhow::Result<PathBuf> {
    let library = &embedded::KSM_MERGE;
    Ok(recorder::cached_library(library.stem, library.bytes)?)
}
