use std::path::PathBuf;

/// What can go wrong on the alloclens side of the agent (the agent itself never fails the
/// program: it stops writing).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot write the watch agent library to {}: {source} (set XDG_CACHE_HOME to a writable directory)", path.display())]
    Library {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the watch agent library path {} contains a space or a colon, which LD_PRELOAD cannot carry (ALLOCLENS_AGENT must name a path without them)", path.display())]
    PreloadPath { path: PathBuf },
    #[error("cannot read the agent directory {}: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the agent snapshot {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the agent snapshot {} is damaged: {detail}", path.display())]
    Damaged { path: PathBuf, detail: String },
    #[error("cannot ask process {pid} to trim: {} cannot be written: {source} (is the agent directory still there?)", path.display())]
    Trim {
        pid: u32,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("malloc_info output is not what glibc writes: {0}")]
    MallocInfo(String),
}
