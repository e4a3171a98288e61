//! The alloclens trace format: records, writer and reader. Specified in docs/trace-format.md.
pub mod event;
pub use event::{Event, Marker, Op, ProcessInfo, Record};
