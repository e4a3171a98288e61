//! What alloclens shows and writes: the terminal summary table, and the results directory of a run
//! (results.json, samples.csv, markers.csv; formats in docs/results-format.md). One module per output.
pub mod format;
pub mod host;
pub mod results_dir;
pub mod run_table;

pub use host::HostInfo;
pub use results_dir::{
    ResultsDir, ResultsDirError, RunResults, VariantInfo, RESULTS_SCHEMA_VERSION,
};
pub use run_table::render_run_table;
