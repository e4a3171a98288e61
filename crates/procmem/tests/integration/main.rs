//! The integration tests of `procmem`: one test binary (its modules link once).
//! Run one file's tests: `cargo test -p procmem --test integration -- MODULE::`.
mod common;
mod consistency;
mod orphan;
mod pss;
mod pss_adaptive;
mod refresh;
mod system;
mod tree;
