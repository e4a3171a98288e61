//! Files written for other tools: PNG/SVG figures of a document's charts, and Parquet tables of a run
//! (runs, samples, markers) or of a trace (events; analysed timelines and size histograms), all through
//! one Parquet writer; and a run's summary table as Markdown, JSON or CSV (`summary/`).
pub(crate) mod figures;
pub(crate) mod parquet_table;
pub(crate) mod run_parquet;
pub(crate) mod summary;
pub(crate) mod trace_parquet;
