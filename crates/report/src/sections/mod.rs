//! One module per kind of report page: each turns a result into a `Document` by implementing
//! `document::Reportable`. A comparison is a kind of page too (two runs merged into one `RunData`; two
//! traces side by side).
pub(crate) mod dataset;
pub(crate) mod run;
pub(crate) mod run_compare;
mod run_ksm;
pub(crate) mod run_replay;
pub(crate) mod trace;
pub(crate) mod trace_compare;
pub(crate) mod trace_figures;
mod trace_residency;
pub(crate) mod trace_sites;
pub(crate) mod tune;
pub(crate) mod watch;
