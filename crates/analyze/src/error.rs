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
    #[error(
        "'{path}' has no heap residency readings: record it with `alloclens record --addresses` \
         (and memory samples, the default) to see which call sites hold the resident pages"
    )]
    NoResidency { path: PathBuf },
    #[error(
        "out of memory analysing process {pid} after {records} of its records ({live} blocks live): \
         {why}; raise it, or analyse on a machine with more memory"
    )]
    OutOfMemory {
        pid: u32,
        records: String,
        live: String,
        /// What refused the memory, e.g. "the address-space limit (ulimit -v) is 300 MiB".
        why: String,
    },
}

impl AnalyzeError {
    /// `OutOfMemory` for process `pid`, saying which limit applies.
    pub fn out_of_memory(pid: u32, records: u64, live: usize) -> AnalyzeError {
        let why = match blockmap::huge_pages::address_space_limit() {
            Some(bytes) => format!("the address-space limit (ulimit -v) is {} MiB", bytes >> 20),
            None => "the system refused more memory".to_string(),
        };
        AnalyzeError::OutOfMemory {
            pid,
            records: trace::human_count(records),
            live: trace::human_count(live as u64),
            why,
        }
    }
}
