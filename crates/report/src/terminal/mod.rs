//! The terminal tables: `alloclens run`'s summary, markers and with `--ksm` the saving, and
//! `alloclens watch`'s summary.
pub(crate) mod ksm;
pub(crate) mod run_summary;
pub(crate) mod watch;
