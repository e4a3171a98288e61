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

/// A sample's time as samples.csv writes it (`t_s`, six decimals) and as the run's statistics use
/// it: whole microseconds. Computing results.json's time-weighted means from the very values the
/// file holds is what makes them equal to the same trapezoids over samples.csv (sql/figures/
/// run_memory_from_samples.sql): with `t_s` rounded to 0.1 ms, a 30-ms run of 5 samples differed
/// by 0.2 %.
pub fn sample_instant(since_start: std::time::Duration) -> std::time::Duration {
    let micros = (since_start.as_nanos() + 500) / 1000;
    std::time::Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// The seconds of a [`sample_instant`]: the `f64` nearest to its six-decimal text, so the value
/// read back from samples.csv is this one, bit for bit.
pub fn sample_seconds(instant: std::time::Duration) -> f64 {
    instant.as_micros() as f64 / 1e6
}
