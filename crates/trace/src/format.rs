//! File-level constants and the small fixed structures: magic, version, header, chunk framing.
//! Each is specified in docs/trace-format.md; all integers are little-endian.
use serde::{Deserialize, Serialize};

/// First 8 bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"\x89ALCTRC\n";
/// Newest version of the format, the one this crate writes for traces with sampled call stacks
/// (5: their stack ids stored as samples, `TraceHeader::sampled_stack_chunks`). A trace with a
/// stack for every allocation is written as version 4 (`VERSION_WITHOUT_SAMPLED_STACKS`: stack
/// ids in events chunks, STACKS and MODULES chunks), one without stacks as version 3
/// (`VERSION_WITHOUT_STACKS`), each byte for byte what alloclens wrote before, so older readers
/// still read them. See docs/trace-format.md, "History".
pub const FORMAT_VERSION: u32 = 5;
/// The version of a trace recorded with a stack for every allocation (`--stacks=all`).
pub const VERSION_WITHOUT_SAMPLED_STACKS: u32 = 4;
/// The version of a trace recorded without stacks.
pub const VERSION_WITHOUT_STACKS: u32 = 3;
/// Oldest version this crate reads.
pub const OLDEST_READ_VERSION: u32 = 3;
/// Bytes before the header JSON: magic, version, header length, header CRC32.
pub const FILE_PREFIX_LEN: usize = 20;

/// First 4 bytes of every chunk: lets a reader tell a chunk boundary from garbage.
pub const CHUNK_SYNC: [u8; 4] = *b"ALCK";
/// Chunk frame: sync, kind, flags, reserved u16, stream u32, payload length u32, records u32, crc u32.
pub const CHUNK_FRAME_LEN: usize = 24;
/// Largest payload a reader accepts; larger lengths are corruption.
pub const MAX_PAYLOAD: u32 = 64 << 20;
/// Largest decoded events chunk a reader accepts.
pub const MAX_RAW_CHUNK: u32 = 256 << 20;
/// Records per events chunk the recorder aims for (readers accept any count). A chunk is zstd's
/// whole context: re-encoding the cc1 trace at level 12 gave 0.072 B/record with 2^18 records
/// and 0.054 with 2^19 (python3: 0.090, 0.087; alloc-micro unchanged), for 18 MiB of recorder
/// memory per batch in flight and 24 MiB per decoded chunk in `analyze`.
pub const DEFAULT_CHUNK_RECORDS: usize = 1 << 19;

/// Chunk kinds. Explicit tags, never reused. Readers skip kinds they do not know.
pub mod kind {
    /// A new process image: its stream id and `ProcessInfo`.
    pub const PROCESS: u8 = 1;
    /// A zstd-compressed block of one stream's records.
    pub const EVENTS: u8 = 2;
    /// The end of a stream and why it ended.
    pub const END: u8 = 3;
    /// A free-text warning from the recorder (UTF-8).
    pub const NOTE: u8 = 4;
    /// The last chunk of a finished recording (JSON `Trailer`).
    pub const TRAILER: u8 = 5;
    /// A program that ran under the recording without the shim (JSON `Untraced`). Added without
    /// a version bump: older readers skip it.
    pub const UNTRACED: u8 = 6;
    /// Call stacks, by id (`stacks::stacks_payload`); stream id 0xFFFFFFFF. Version 4.
    pub const STACKS: u8 = 7;
    /// Modules mapped in traced processes (JSON array of `Module`); stream id 0xFFFFFFFF.
    pub const MODULES: u8 = 8;
    /// The recorder's readings of one stream's memory (`memory::memory_payload`), on its seq
    /// axis. Added without a version bump: older readers skip it.
    pub const MEMORY: u8 = 9;
    /// Which pages of one stream's heap mappings were resident at its memory samples
    /// (`residency::residency_payload`). Added without a version bump: older readers skip it.
    pub const RESIDENCY: u8 = 10;
    /// `record --leaks`: the blocks still live when the recorded command exited, by kind and
    /// call site (JSON `Leaks`); stream id 0xFFFFFFFF. Added without a version bump.
    pub const LEAKS: u8 = 11;
}

/// Header of a trace file (JSON after the fixed prefix; unknown fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TraceHeader {
    /// The recorded command line.
    pub command: Vec<String>,
    /// Host name of the machine that recorded.
    pub host: String,
    /// Allocator spec the command ran with ("glibc" when none was preloaded).
    pub allocator: String,
    /// Wall-clock start of the recording, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// Version of alloclens that wrote the file.
    pub writer: String,
    /// Recorded with `--no-addresses`: blocks are ids (docs/trace-format.md). Informational; the
    /// decoder goes by each chunk's flags.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_addresses: bool,
    /// Recorded with `--stacks`: allocations carry call stacks (the file is version 4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stacks: bool,
    /// Recorded with `--free-stacks`: frees carry call stacks too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_stacks: bool,
    /// `--stack-depth`: the most frames a stack keeps (absent without stacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_depth: Option<u32>,
    /// `--stack-sample`: the mean requested bytes between two allocations that carry a stack
    /// (per thread, a Poisson process over bytes: an allocation of `s` bytes carries one with
    /// probability `1 - exp(-s / stack_sample_bytes)`). 0 (absent): every allocation has a stack.
    /// Read it through `TraceReader::stack_sampling`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stack_sample_bytes: u64,
    /// `record --pid`: the process that was attached to, already running. The trace starts at
    /// the attach: blocks allocated before it are not in it (their frees carry the bytes the
    /// allocator says they held), and it ends at the detach (docs/attach.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_pid: Option<u32>,
}

impl TraceHeader {
    /// Events chunks store sampled stack ids as samples (`ChunkEncoder::with_sampled_stacks`):
    /// stacks sampled by bytes, frees without stacks.
    pub fn sampled_stack_chunks(&self) -> bool {
        self.stacks && self.stack_sample_bytes > 0 && !self.free_stacks
    }

    /// The format version a trace with this header is written as (`FORMAT_VERSION` only when
    /// it uses what is new in it).
    pub fn version(&self) -> u32 {
        if self.sampled_stack_chunks() {
            FORMAT_VERSION
        } else if self.stacks {
            VERSION_WITHOUT_SAMPLED_STACKS
        } else {
            VERSION_WITHOUT_STACKS
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A program that was exec'd (or spawned) during the recording but did not load the shim, so
/// none of its calls are in the trace: why, as far as the recorder could tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Untraced {
    /// Its process id.
    pub pid: u32,
    /// The process that exec'd or spawned it (for an exec in place, the process's parent).
    pub ppid: u32,
    /// The program: the executable the kernel ran (`/proc/PID/exe`) when the recorder saw it,
    /// else the path given to exec.
    pub program: String,
    /// argv[0] as given to exec.
    pub argv0: String,
    /// Why it was not traced, one sentence ("statically linked: the shim cannot be preloaded").
    pub reason: String,
    /// When the recorder learned of it, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// `record --leaks`: what the blocks still allocated when the recorded command exited were,
/// by call site (docs/trace-format.md, LEAKS; docs/leaks.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Leaks {
    /// The process (the command alloclens started) and its image, as in its PROCESS chunk.
    pub pid: u32,
    pub exec_index: u32,
    /// True when the process was stopped at its exit and its memory scanned: `sites` have
    /// memcheck's four kinds. False: degraded, every block is "not freed at exit".
    pub scanned: bool,
    /// Why the memory was not scanned, one sentence (absent when it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// Threads whose registers and stacks were roots.
    pub threads: u32,
    /// Bytes of root memory scanned (modules' data, stacks, TLS).
    pub root_bytes: u64,
    /// One entry per (call stack, kind).
    pub sites: Vec<LeakSite>,
}

/// The blocks of one call stack and one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LeakSite {
    /// Stack id (`Event::stack`) of the allocations; 0 without stacks or not sampled.
    pub stack: u32,
    /// "definitely lost", "indirectly lost", "possibly lost", "still reachable", or (degraded)
    /// "not freed at exit".
    pub kind: String,
    pub blocks: u64,
    /// Requested bytes.
    pub bytes: u64,
    /// For reachable and possibly lost blocks: the root that holds most of their bytes
    /// ("global cache in /usr/bin/prog", "stack of thread 12").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// Written last by a recording that finished (its absence means the recorder itself died).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Trailer {
    /// How the recorded command ended: "exit 0", "signal 9 (SIGKILL)", ...
    pub exit: String,
    /// Total events written, all streams.
    pub events: u64,
    /// Wall-clock end of the recording, nanoseconds since the Unix epoch.
    pub end_unix_ns: u64,
    /// `record --pid`: what the process held when alloclens attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachFigures>,
}

/// What an attached process held at the attach (`record --pid`), from its allocator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AttachFigures {
    /// The allocator's own count of the bytes in use, when it keeps one the shim can read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_in_use: Option<u64>,
    /// Where `heap_in_use` comes from: "glibc mallinfo2", "jemalloc stats.allocated", ...
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub heap_source: String,
    /// The GOT slots patched to reach the hooks.
    pub got_slots: u32,
}

/// Why a process stream ended. Tags are part of the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EndReason {
    /// exit() or return from main: the shim's destructor said goodbye.
    Exit = 1,
    /// _exit() / _Exit(): deliberate, destructors skipped.
    QuickExit = 2,
    /// The image was replaced by exec(); the next image of the same pid continues.
    Exec = 3,
    /// The process vanished without a goodbye: killed by a signal, crashed, or exit_group(2).
    Lost = 4,
    /// The recorder stopped following it (command ended while it still ran, or tracing failed).
    Abandoned = 5,
    /// `record --pid` detached from it: the process runs on, untraced.
    Detached = 6,
}

impl EndReason {
    pub fn from_tag(tag: u8) -> Option<EndReason> {
        [
            Self::Exit,
            Self::QuickExit,
            Self::Exec,
            Self::Lost,
            Self::Abandoned,
            Self::Detached,
        ]
        .into_iter()
        .find(|r| *r as u8 == tag)
    }

    /// True when the stream holds everything the process did while it was traced.
    pub fn is_clean(self) -> bool {
        matches!(
            self,
            Self::Exit | Self::QuickExit | Self::Exec | Self::Detached
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Exit => "exited",
            Self::QuickExit => "exited with _exit",
            Self::Exec => "replaced by exec",
            Self::Lost => "ended without a goodbye (killed or crashed)",
            Self::Abandoned => "still running when the recording ended",
            Self::Detached => "detached (the process runs on)",
        }
    }
}

/// A chunk frame as read from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub kind: u8,
    pub stream: u32,
    pub payload_len: u32,
    pub records: u32,
    pub crc: u32,
}

impl Frame {
    pub fn encode(&self) -> [u8; CHUNK_FRAME_LEN] {
        let mut b = [0u8; CHUNK_FRAME_LEN];
        b[0..4].copy_from_slice(&CHUNK_SYNC);
        b[4] = self.kind;
        b[8..12].copy_from_slice(&self.stream.to_le_bytes());
        b[12..16].copy_from_slice(&self.payload_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.records.to_le_bytes());
        b[20..24].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// Parses a frame; `None` when the sync bytes are wrong (not a chunk boundary).
    pub fn decode(b: &[u8; CHUNK_FRAME_LEN]) -> Option<Frame> {
        if b[0..4] != CHUNK_SYNC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(Frame {
            kind: b[4],
            stream: u32_at(8),
            payload_len: u32_at(12),
            records: u32_at(16),
            crc: u32_at(20),
        })
    }

    /// CRC32 over the frame bytes 4..20 (kind to records) and the payload.
    pub fn checksum(frame_bytes: &[u8; CHUNK_FRAME_LEN], payload: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&frame_bytes[4..20]);
        h.update(payload);
        h.finalize()
    }
}
