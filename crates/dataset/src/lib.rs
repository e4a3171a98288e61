//! The dataset of `alloclens merge` (docs/dataset.md): results directories and traces of many hosts
//! as one hive-partitioned Parquet directory (`kind=.../host=.../command=...`) that DuckDB and Spark
//! read as it is; appendable, with a `sources` table so nothing is counted twice. Reading it back
//! (`read`) serves `alloclens report DATASET` and the tests.
pub mod call_columns;
pub mod calls;
pub mod column_chunk;
pub mod encoding;
pub mod layout;
pub mod merge;
pub mod parquet_file;
pub mod read;
pub mod results_tables;
pub mod sources;
pub mod table;

use std::path::PathBuf;

pub use layout::Dataset;
pub use merge::{merge, MergeOptions, MergeSummary, Notice, SkipReason};
pub use read::{read_table, Rows};
pub use table::Cell;

/// The dataset's format version (dataset.json and every file's footer). Columns are added without
/// a bump; a changed or removed one bumps it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error(
        "'{0}' is not an alloclens result: neither a results directory (results.json of run, \
         replay or tune; watch.json of watch) nor a trace of `alloclens record`"
    )]
    NotAResult(PathBuf),
    #[error(
        "'{path}' has schema version {found}, newer than this alloclens reads (version \
         {supported}): upgrade alloclens to merge it"
    )]
    NewerResult {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    #[error(
        "'{path}' is a dataset of schema version {found}, newer than this alloclens reads (version \
         {SCHEMA_VERSION}): upgrade alloclens"
    )]
    NewerDataset { path: PathBuf, found: u64 },
    #[error(
        "'{0}' is not an alloclens dataset (no dataset.json) and not empty: give a new or empty \
         directory, or an existing dataset to append to"
    )]
    NotADataset(PathBuf),
    #[error("'{0}' is a watch directory, which records no host name: give it with --host NAME")]
    NoHost(PathBuf),
    #[error("{0}")]
    Trace(String),
    #[error("cannot read '{path}': {message}")]
    Io { path: PathBuf, message: String },
    #[error("cannot write '{path}': {message}")]
    Write { path: PathBuf, message: String },
    #[error(
        "{error}; '{path}' was not merged (its files are removed), the {merged_before} \
         merged before it are in the dataset"
    )]
    Source {
        path: PathBuf,
        merged_before: usize,
        error: Box<DatasetError>,
    },
}
