//! Typed errors of the crate; each carries the path or pid it is about.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while reading /proc or /sys.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file under /proc or /sys could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// /proc itself could not be listed.
    #[error("cannot list /proc: {source} (is procfs mounted?)")]
    ListProc {
        #[source]
        source: nix::Error,
    },
    /// A file had content this crate does not understand.
    #[error("unexpected content in {path}: {what}")]
    Parse { path: PathBuf, what: String },
    /// The kernel lacks a file the sampler depends on.
    #[error("{path} does not exist: this kernel is too old for procmem (needs Linux >= 4.14 for smaps_rollup)")]
    Unsupported { path: PathBuf },
    /// prctl(PR_SET_CHILD_SUBREAPER) failed.
    #[error("cannot become a child subreaper (prctl PR_SET_CHILD_SUBREAPER): {source}; orphaned descendants will be reparented to init and missed")]
    Subreaper {
        #[source]
        source: nix::Error,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Error::Parse {
            path: path.into(),
            what: what.into(),
        }
    }
}
