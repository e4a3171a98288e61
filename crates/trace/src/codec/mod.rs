//! The events chunk codec: columnar, delta-coded records, then zstd.
//!
//! A chunk is decodable on its own: every reference (a free pointing at its allocation, a
//! predicted address) stays inside the chunk, and the chunk carries the time anchors its events
//! interpolate between. Layout and modes are specified in docs/trace-format.md.
//!
//! The modules follow the format: `layout` (the op byte's bits, chunk flags, synthetic
//! addresses), `columns` (how values are laid into the columns and read back), `predictor` (the
//! address guesses both sides make), `encode` with `run_columns` (a run's columns, reserved
//! once), `decode` with `addresses` (an event's addresses from its mode bits) and `clock`
//! (event times from the anchors).
mod addresses;
mod clock;
mod columns;
mod decode;
mod encode;
mod layout;
mod predictor;
mod run_columns;
mod sampled;
#[cfg(test)]
mod tests;

pub use columns::{payload_columns, COLUMN_NAMES, SAMPLED_STACK_COLUMNS, STACKS_COLUMN};
pub use decode::{decode_payload, ChunkDecoder, DecodeError};
pub use encode::{
    append_anchor, ChunkEncoder, EncodedChunk, OrderError, RunEvent, RunEvents, UncompressedChunk,
};
pub use layout::{synthetic_address, SYNTHETIC_BIT};
