//! What can stop a profile from being made.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error(
        "'{}' was recorded without stacks, and a profile needs call sites: record it again with \
         `alloclens record --stacks` (sampled) or `--stacks=all`",
        path.display()
    )]
    NoStacks { path: PathBuf },
    /// A profile table that cannot be read: damaged, truncated, of another version, or no table.
    #[error("'{}': {problem}", path.display())]
    Table { path: PathBuf, problem: String },
    /// No profile table where one was looked for, and how to get one.
    #[error("{0}")]
    NoTable(String),
}
