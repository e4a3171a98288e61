//! One module per kind of result that can be reported; each implements `document::Reportable`.
pub mod run;
pub mod trace;
pub(crate) mod trace_figures;
