//! The integration tests of `analyze`: one test binary (its modules link once).
//! Run one file's tests: `cargo test -p analyze --test integration -- MODULE::`.
mod call_sites;
mod file;
mod live_invariants;
mod running_extremes;
mod sampling;
mod semantics;
