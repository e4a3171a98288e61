//! Records every allocator call of a command and of its whole process tree into an alloclens trace.
//!
//! [`record`] starts the command with the preload shim first in `LD_PRELOAD` (the shim forwards
//! every call to the next allocator, so any allocator variant can follow it), accepts one
//! connection per process image, drains the images' shared-memory rings, merges each image's
//! threads into seq order, encodes and compresses chunks and writes the trace. How and why:
//! docs/recording.md; the file format: docs/trace-format.md.
//!
//! Library only: nothing here prints. The program's output passes through untouched (it is read
//! line by line only when `marker` is set).
mod anchors;
mod attached;
mod batch;
mod block_ids;
mod exit_stop;
mod image;
mod leak_check;
mod memory;
mod output;
mod pipeline;
pub mod protocol;
mod server;
mod shim;
mod spawn;
mod stacks;
pub mod supervisor;
mod sys;
mod untraced;

pub use attached::{record_pid, Attached};
pub use output::{Existing, TraceFile};
pub use spawn::describe_status;
pub use sys::signal_name;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

pub use shim::{cached_library, shim_path, ENV_SHIM_OVERRIDE};
pub use trace::{EndReason, Untraced};

/// What to record and how.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// The trace file to write.
    pub output: PathBuf,
    /// What to do when `output` exists: refuse (the default) or replace it when the recording
    /// ends (`output` module).
    pub existing: Existing,
    /// Extra environment for the command (e.g. an allocator variant's). An `LD_PRELOAD` here
    /// replaces the inherited one; the shim is put first in either case.
    pub env: Vec<(OsString, OsString)>,
    /// Label of the allocator for the trace header ("glibc" when none).
    pub allocator: String,
    /// Output lines matching this become markers (label: first capture group, else the match).
    pub marker: Option<regex::Regex>,
    /// How long to keep following descendants after the command itself exited.
    pub linger: Duration,
    /// Records per chunk.
    pub chunk_records: usize,
    /// zstd level of the chunks (default 1: on bench/alloc-micro level 3 cost the compressors
    /// about a third more CPU for 0.3 % fewer bytes; the columns are already delta coded).
    /// Chunks of a stream that compresses well go through a stronger level while the
    /// compressor threads keep up (docs/recording.md).
    pub zstd_level: i32,
    /// Store heap addresses. By default (false) blocks are known by the seq of their allocation
    /// (docs/trace-format.md, "Chunks without addresses"): the same reports from traces several
    /// times smaller when blocks live long, for 32-64 bytes of recorder memory per live block.
    /// Addresses are for studies of heap layout, or exports joined with other pointer data.
    pub addresses: bool,
    /// The link to a supervisor (`supervisor::split`) that takes over should the recorder
    /// itself die: the command's pid and, with `marker`, its output pipes are sent there.
    pub supervisor: Option<supervisor::Link>,
    /// `--stacks`: record the call stack of every allocation (docs/trace-format.md, "Call
    /// stacks"); `None` records none, and the trace is what it was before stacks existed.
    pub stacks: Option<StackOptions>,
    /// Counters the recording updates as chunks reach the file, for a caller that shows progress.
    pub progress: Option<Arc<RecordProgress>>,
    /// How often the recorder reads each traced image's memory split and PSS from smaps (RSS
    /// and anonymous memory five times as often), into the trace's MEMORY chunks
    /// (docs/trace-format.md, "Memory samples"); `None` takes no samples. Default 100 ms.
    pub memory_interval: Option<Duration>,
    /// `record --leaks`: hold the command at its exit and classify its live blocks as memcheck
    /// does (docs/leaks.md), into a LEAKS chunk.
    pub leaks: bool,
}

/// How far a recording has come: events and bytes in the file so far (updated by the writer
/// thread after each chunk; read them from any thread).
#[derive(Debug, Default)]
pub struct RecordProgress {
    pub events: AtomicU64,
    pub bytes: AtomicU64,
}

/// How call stacks are recorded (`record --stacks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackOptions {
    /// The most frames kept per stack (1..=256), innermost first.
    pub depth: u32,
    /// Frees' stacks too (`--free-stacks`; only with `sample_bytes` 0).
    pub frees: bool,
    /// `--stack-sample BYTES`: the mean requested bytes between two allocations whose stack is
    /// taken, per thread (a Poisson process over bytes: an allocation of `s` bytes is sampled
    /// with probability `1 - exp(-s / sample_bytes)`); 0 takes every allocation's stack
    /// (`--stacks=all`). Written into the trace header as `stack_sample_bytes`.
    pub sample_bytes: u64,
}

impl StackOptions {
    /// Every allocation's stack (`--stacks=all`), at most `depth` frames.
    pub fn all(depth: u32) -> Self {
        StackOptions {
            depth,
            frees: false,
            sample_bytes: 0,
        }
    }

    /// Sampled stacks (`--stacks`), at the default rate.
    pub fn sampled(depth: u32) -> Self {
        StackOptions {
            depth,
            frees: false,
            sample_bytes: DEFAULT_STACK_SAMPLE_BYTES,
        }
    }
}

/// `--stack-sample`'s default: the mean bytes between sampled allocations (docs/recording.md,
/// "Sampled stacks", says how it was chosen).
pub const DEFAULT_STACK_SAMPLE_BYTES: u64 = 16 << 10;

/// `RecordOptions::memory_interval`'s default.
pub const DEFAULT_MEMORY_INTERVAL: Duration = Duration::from_millis(100);

/// The deepest stack the shim keeps (`AL_MAX_STACK_DEPTH`).
pub const MAX_STACK_DEPTH: u32 = protocol::MAX_STACK_DEPTH as u32;

impl RecordOptions {
    pub fn new(command: Vec<OsString>, output: PathBuf) -> Self {
        RecordOptions {
            command,
            output,
            existing: Existing::Refuse,
            env: Vec::new(),
            allocator: "glibc".into(),
            marker: None,
            linger: Duration::from_secs(2),
            chunk_records: trace::format::DEFAULT_CHUNK_RECORDS,
            zstd_level: 1,
            addresses: false,
            supervisor: None,
            progress: None,
            stacks: None,
            memory_interval: Some(DEFAULT_MEMORY_INTERVAL),
            leaks: false,
        }
    }
}

/// One process image as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSummary {
    pub pid: u32,
    pub ppid: u32,
    pub exec_index: u32,
    /// argv[0].
    pub command: String,
    /// Events of this image in the trace.
    pub events: u64,
    /// Calls the shim saw but could not record (signal handlers, docs/recording.md,
    /// "Which calls are recorded"); also in a NOTE of the trace.
    pub unrecorded: u64,
    /// Seqs taken but never published (the process died in between); also in a NOTE.
    pub lost_in_flight: u64,
    pub end: Option<EndReason>,
}

/// The outcome of a recording.
#[derive(Debug, Clone)]
pub struct RecordSummary {
    /// How the command ended (its exit status is alloclens record's own).
    pub status: ExitStatus,
    pub processes: Vec<ProcessSummary>,
    /// Events written into the trace, all processes.
    pub events: u64,
    /// Events the shim intercepted: `events`, unless writing the trace failed (a full disk),
    /// after which the calls are no longer written.
    pub events_intercepted: u64,
    /// Output lines turned into markers.
    pub output_markers: u64,
    /// Size of the trace file.
    pub bytes: u64,
    /// Things that went wrong without stopping the command (also written into the trace).
    pub warnings: Vec<String>,
    /// Programs exec'd or spawned under the recording that did not load the shim: none of their
    /// calls are in the trace (also written into it).
    pub untraced: Vec<trace::Untraced>,
    /// `record --leaks`: the leak check's result (also written into the trace).
    pub leaks: Option<trace::Leaks>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("no command to record")]
    NoCommand,
    #[error("cannot install the preload shim at '{path}': {source}")]
    Shim {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the trace file '{path}': {source}")]
    Output {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("'{path}' exists; pass --force to replace it, or choose another name")]
    Exists { path: PathBuf },
    #[error(
        "cannot write the trace to '{path}': not a regular file (a trace is read back with \
         seeks, so it must be a regular file)"
    )]
    NotRegular { path: PathBuf },
    #[error(
        "cannot write the trace to '{path}': it is where this process's output goes, and the \
         command's output would overwrite it; give the trace a file of its own"
    )]
    OwnOutput { path: PathBuf },
    #[error("cannot set up the recorder socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("command not found: '{command}' (not in PATH; give a path or check the spelling)")]
    CommandNotFound { command: String },
    #[error("cannot run '{path}': no such file (check the path)")]
    NoSuchProgram { path: PathBuf },
    #[error("cannot run '{path}': its interpreter (#! line) or its dynamic loader is missing")]
    InterpreterMissing { path: PathBuf },
    #[error("cannot run '{path}': not an executable file (a directory, or no execute permission)")]
    NotExecutable { path: PathBuf },
    #[error("cannot start '{command}': {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot wait for the command: {0}")]
    Wait(#[source] std::io::Error),
    #[error(
        "--stacks needs libunwind, and libunwind.so.8 cannot be loaded: install it \
         (Debian: apt-get install libunwind8, or scripts/setup.sh), or record without --stacks"
    )]
    NoLibunwind,
    #[error("--stack-depth {0} is out of range: give 1 to {max}", max = MAX_STACK_DEPTH)]
    StackDepth(u32),
    #[error(transparent)]
    Attach(#[from] attach::AttachError),
    #[error(
        "--free-stacks takes the stack of every free, which sampled stacks do not: use it with \
         --stacks=all"
    )]
    SampledFreeStacks,
}

/// Runs the command under the shim and writes its trace. Returns once the command exited and
/// every traced process ended (or `linger` passed).
pub fn record(options: &RecordOptions) -> Result<RecordSummary, RecordError> {
    check_stacks(options)?;
    spawn::run(options)
}

/// What `record` checks of `--stacks` before starting anything (the depth, libunwind): callers
/// that fork first call it before.
pub fn check_stacks(options: &RecordOptions) -> Result<(), RecordError> {
    if let Some(s) = options.stacks {
        if s.depth == 0 || s.depth > MAX_STACK_DEPTH {
            return Err(RecordError::StackDepth(s.depth));
        }
        if s.frees && s.sample_bytes != 0 {
            return Err(RecordError::SampledFreeStacks);
        }
        if !sys::library_loads(c"libunwind.so.8") {
            return Err(RecordError::NoLibunwind);
        }
    }
    Ok(())
}
