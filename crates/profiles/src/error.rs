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
}
