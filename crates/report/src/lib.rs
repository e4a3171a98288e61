//! What alloclens shows and writes: the terminal summary table of a run, reports, diffs and Parquet
//! files. (The results directory of a run is `runner::results_dir`'s.)
//!
//! Reports (docs/reports.md): a result (`RunData`, `TraceData`, or a comparison of two) becomes a
//! `Document` (sections of text blocks, tables and charts) through the `Reportable` trait, one module
//! per kind of page in `sections/`; the renderers turn a document into a self-contained HTML page
//! (`render/`) or PNG/SVG figures (`exports/`), and `exports/` also writes Parquet tables. Headline
//! figures, which `diff` matches, are listed in one place (`headlines`).
pub mod format;
pub mod run_data;

mod diff;
mod document;
mod exports;
mod headlines;
mod render;
mod sections;
mod site_diff;
mod trace_data;

pub use run_data::RunData;

pub use diff::{diff, Diff, DiffRow};
pub use document::chart::{palette, Axis, Band, Bar, Chart, Emphasis, Line, Series, Unit};
pub use document::flame::{FlameGraph, SiteColumn, SiteRow, SiteTable, MIN_FLAME_SHARE};
pub use document::{Block, Document, Reportable, Section, Table};
pub use exports::figures::{write_figures, FigureError, FigureFormat};
pub use exports::parquet_table::{describe as describe_parquet, ParquetError};
pub use exports::run_parquet::write_run_parquet;
pub use exports::summary::{export_summary, SummaryContext, SummaryFormat};
pub use exports::trace_parquet::{
    export_events, export_events_with, write_analysis_parquet, ExportError, Exported,
};
pub use headlines::{Headline, Headlines};
pub use render::html::render as render_html;
pub use render::ksm_table::render_ksm_table;
pub use render::run_table::{render_marker_table, render_run_table};
pub use render::watch_summary::render_watch_summary;
pub use sections::dataset::DatasetData;
pub use sections::run_compare::merge_runs;
pub use sections::trace_compare::TraceComparison;
pub use site_diff::diff_sites;
pub use trace_data::TraceData;
