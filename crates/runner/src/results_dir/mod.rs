//! The results directory of `alloclens run` (docs/results-format.md): results.json (the types of
//! [`crate::results`], serialised), samples.csv, markers.csv and, on request, output/run-N.log. This
//! module owns the format: [`ResultsDir`] writes it as a run goes and [`ResultsDirContents::load`]
//! reads it back, so a field added to a results type is written and read in one place.
mod exports;
mod read;
mod write;

pub use exports::{check_exports, Export, ExportRefused};
pub use read::{MarkerRow, ResultsDirContents, ResultsReadError, SampleKsm, SampleRow};
pub use write::{failure_warnings, is_own_entry, marker_warnings, ResultsDir, ResultsDirError};

/// The version results.json records in `schema_version`. Bumped when a field changes meaning or
/// disappears; additions keep it (older readers ignore the new field, newer ones default it).
pub const SCHEMA_VERSION: u32 = 1;
