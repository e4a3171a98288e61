//! The agent crate's integration tests (one binary, as every crate's: docs/testing.md).
mod attach;
mod malloc_info;
