//! What alloclens shows and writes: the terminal summary table of a run, reports, diffs and Parquet
//! files. (The results directory of a run is `runner::results_dir`'s.)
//!
//! Reports (docs/reports.md): a result (`RunData`, `TraceData`, or a comparison of two) becomes a
//! `Document` (sections of text blocks, tables and charts) through the `Reportable` trait, one module
//! per kind of page in `sections/`. Headline figures, which `diff` matches, are listed in one place
//! (`headlines`).
//!
//! The modules are named by output, as ripgrep's printer is: `terminal` (the tables `run`, `replay`
//! and `watch` print), `html` (a document as a self-contained page), `figures` (a document's charts
//! as PNG/SVG), `markdown`, `csv` and `json` (the run summary for other tools, `summary_files`), and
//! `parquet_files`.
pub mod format;
pub mod run_data;

mod csv;
mod diff;
mod document;
mod figures;
mod headlines;
mod html;
mod json;
mod markdown;
mod parquet_files;
mod sections;
mod site_diff;
mod summary_files;
mod tables;
mod terminal;
mod trace_data;

pub use run_data::RunData;

pub use diff::{diff, Diff, DiffRow};
pub use document::chart::{palette, Axis, Band, Bar, Chart, Emphasis, Line, Series, Unit};
pub use document::flame::{FlameGraph, SiteColumn, SiteRow, SiteTable, MIN_FLAME_SHARE};
pub use document::{Block, Document, IntervalPlot, IntervalRow, Reportable, Section, Table};
pub use figures::{write_figures, FigureError, FigureFormat};
pub use headlines::{Headline, Headlines};
pub use html::render as render_html;
pub use parquet_files::run::write_run_parquet;
pub use parquet_files::trace::{
    export_events, export_events_with, write_analysis_parquet, ExportError, Exported,
};
pub use parquet_files::{describe as describe_parquet, ParquetError};
pub use sections::dataset::DatasetData;
pub use sections::run_compare::merge_runs;
pub use sections::trace_compare::TraceComparison;
pub use site_diff::diff_sites;
pub use summary_files::{export_summary, SummaryContext, SummaryFormat};
pub use terminal::ksm::render_ksm_table;
pub use terminal::render_terminal_table;
pub use terminal::replay::render_replay_tables;
pub use terminal::run_summary::{render_marker_table, render_run_table};
pub use terminal::tune::render_summary as render_tune_summary;
pub use terminal::watch::render_watch_summary;
pub use trace_data::TraceData;
