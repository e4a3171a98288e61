//! Tables as data, the way hyperfine's `export/markup.rs` builds one table for every format: a
//! [`Table`] is a caption, column headers and rows of text, and each output renders it with its own
//! small renderer (`terminal::table`, `html`, `markdown::table`, `csv`). A result shown in several
//! outputs defines its columns once here (their header and cell in each output, and which columns
//! each output shows), so a new column or a new output is one change in one file.
pub(crate) mod run_summary;
pub(crate) mod watch;

/// A table: what every output renders. The first column names the row (left-aligned in the
/// terminal and Markdown); the others hold figures.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: Option<String>,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The outputs a table definition gives cells for: text for a reader in the first three, raw
/// numbers (seconds, bytes, units per second) for other tools in CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Terminal,
    Html,
    Markdown,
    Csv,
}
