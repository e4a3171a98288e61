//! The integration tests of `trace`: one test binary (its modules link once).
//! Run one file's tests: `cargo test -p trace --test integration -- MODULE::`.
mod robustness;
mod roundtrip;
