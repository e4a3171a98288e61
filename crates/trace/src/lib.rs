//! The alloclens trace format: the decoded records, the chunk codec, a writer and a streaming
//! reader. The byte-level specification is docs/trace-format.md; in short:
//!
//! - a file is `MAGIC`, `FORMAT_VERSION`, a JSON [`TraceHeader`], then self-delimiting chunks, each
//!   framed with a sync word, kind, stream id, length, record count and CRC32;
//! - each process image is a stream: a PROCESS chunk, EVENTS chunks (zstd-compressed columns with
//!   delta-coded sizes, frees as back-references to their allocation, predicted addresses and time
//!   anchors; or, recorded without addresses, blocks known by the seq of their allocation), and an
//!   END chunk saying why it ended;
//! - a truncated or damaged file reads up to the damage ([`TraceReader::damage`]); what a reader
//!   could not read, and a missing trailer, are said one way by [`Losses`]; a newer version is
//!   refused naming both versions; chunks decode independently ([`RawChunk::decode`]);
//! - recorded with `--stacks`, events carry a stack id ([`Event::stack`]) into the file's
//!   [`StackTable`] (STACKS chunks), and MODULES chunks say which [`Module`]s each process had
//!   mapped where, so the addresses can be symbolised offline;
//! - MEMORY chunks hold the recorder's readings of each image's resident memory, placed on its
//!   seq axis ([`TraceReader::memory_samples`], [`MemorySample`]), and RESIDENCY chunks which
//!   pages of its heap were resident at those samples ([`TraceReader::residency`], [`Residency`]).
//!
//! ```no_run
//! let mut reader = trace::TraceReader::open("run.alt")?;
//! for s in 0..reader.streams().len() {
//!     for record in reader.records(s)? {
//!         let _record = record?;
//!     }
//! }
//! # Ok::<(), trace::TraceError>(())
//! ```
pub mod codec;
pub mod error;
pub mod event;
pub mod format;
pub mod losses;
pub mod memory;
pub mod progress;
pub mod reader;
pub mod residency;
pub mod stacks;
mod varint;
pub mod writer;

pub use codec::{
    synthetic_address, ChunkEncoder, EncodedChunk, OrderError, RunEvent, RunEvents,
    UncompressedChunk, SYNTHETIC_BIT,
};
pub use error::{human_bytes, human_count, Damage, DamageKind, TraceError};
pub use event::{Event, Marker, Op, ProcessInfo, Record};
pub use format::{
    AttachFigures, EndReason, LeakSite, Leaks, TraceHeader, Trailer, Untraced, FORMAT_VERSION,
    MAGIC, VERSION_WITHOUT_SAMPLED_STACKS, VERSION_WITHOUT_STACKS,
};
pub use losses::{Losses, StreamLoss};
pub use memory::{memory_payload, MemoryFigures, MemorySample, MemorySummary};
pub use progress::{NoProgress, Progress};
pub use reader::{ChunkFile, ChunkRef, RawChunk, Records, Stream, TraceReader};
pub use residency::{residency_payload, Residency, ResidentMapping};
pub use stacks::{
    compressed_modules_payload, modules_payload, stacks_payload, Module, StackEncoder,
    StackSampling, StackTable,
};
pub use writer::{StreamId, TraceWriter};
