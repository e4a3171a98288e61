//! What alloclens shows and writes: the terminal summary table of a run, reports, diffs and Parquet
//! files. One module per output. (The results directory of a run is `runner::results_dir`'s.)
//!
//! Reports (docs/reports.md): a result (`run_data::RunData`, ...) becomes a `document::Document` through
//! the `document::Reportable` trait (one module per kind in `sections/`), which the renderers turn into
//! a self-contained HTML page (`html`) or PNG/SVG figures (`figures`).
pub mod format;
pub mod ksm_table;
pub mod run_table;

pub mod chart;
pub mod compare;
pub mod compare_trace;
pub mod diff;
pub mod document;
pub mod escape;
pub mod figures;
pub mod html;
pub mod parquet_table;
pub mod run_data;
pub mod run_parquet;
pub mod sections;
pub mod trace_parquet;

pub use ksm_table::render_ksm_table;
pub use run_table::{render_marker_table, render_run_table};

pub use document::{Document, Reportable};
pub use run_data::RunData;
