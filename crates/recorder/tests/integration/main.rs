//! The integration tests of `recorder`: one test binary (its modules link once).
//! Run one file's tests: `cargo test -p recorder --test integration -- MODULE::`. The
//! sanitizer tests are their own binary (`--test sanitizers`): they set the shim for the process.
#[path = "../common.rs"]
mod common;
mod memory;
mod record;
mod shim_header;
mod stacks;
mod untraced;
