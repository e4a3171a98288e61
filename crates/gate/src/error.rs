use std::path::PathBuf;

/// What stops the gate before it can judge: each names the problem and the fix.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("cannot read '{path}': {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("limits file '{path}': {what}")]
    Limits { path: PathBuf, what: String },
    #[error("'{path}' {what}")]
    Input { path: PathBuf, what: String },
    #[error("baseline '{path}': {what}")]
    Baseline { path: PathBuf, what: String },
    #[error("a limit is relative to the baseline (\"+N%\") but none was given: add --baseline FILE (first made with --update-baseline)")]
    NoBaseline,
    #[error("{0} needs per-site figures: give a trace recorded with `alloclens record --stacks`")]
    NeedsStacks(&'static str),
    #[error("cannot write '{path}': {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}
