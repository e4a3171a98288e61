//! Typed errors of the analysis of a trace file.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error("'{path}' has no process {pid} (processes in the trace: {available})")]
    NoSuchProcess {
        path: PathBuf,
        pid: u32,
        available: String,
    },
    #[error("no phase named '{name}' in the selected processes (phases: {available})")]
    NoSuchPhase { name: String, available: String },
}
