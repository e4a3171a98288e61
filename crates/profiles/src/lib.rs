//! Heap profiles by call site, written in pprof's format so that `go tool pprof`, Pyroscope,
//! Parca, Grafana and speedscope open them.
//!
//! [`pprof`] builds and writes a profile from mappings, locations and samples with values,
//! whatever they come from; [`from_trace`] feeds it from a trace recorded with stacks
//! (`alloclens export --pprof`). The figures come from `analyze`'s per-site pass, so a profile and
//! `analyze --sites` agree (docs/profile.md). [`table`] reads the watch agent's heap profile
//! table, [`snapshot`] makes its estimates and their pprof (`alloclens snapshot`), [`diff`] the
//! growth between two profiles (`alloclens diff A.pb.gz B.pb.gz`).
pub mod diff;
mod error;
mod from_trace;
mod locations;
pub mod pprof;
pub mod snapshot;
pub mod table;

pub use error::ProfileError;
pub use from_trace::{from_trace, TraceOptions, TraceProfile};
