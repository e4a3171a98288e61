//! The decoded, in-memory view of a trace: what readers hand to analysis.
//!
//! Tags are explicit and never reused; the on-disk encoding is specified in docs/trace-format.md.

/// An allocator entry point. The numeric tags are part of the file format and shared with the C shim
/// (`shim/record/include/alloclens_shim.h`); never renumber one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Op {
    Malloc = 1,
    Calloc = 2,
    Realloc = 3,
    Free = 4,
    PosixMemalign = 5,
    AlignedAlloc = 6,
    Memalign = 7,
    Valloc = 8,
    Pvalloc = 9,
    Reallocarray = 10,
    FreeSized = 11,
    FreeAlignedSized = 12,
}

impl Op {
    pub const ALL: [Op; 12] = [
        Op::Malloc,
        Op::Calloc,
        Op::Realloc,
        Op::Free,
        Op::PosixMemalign,
        Op::AlignedAlloc,
        Op::Memalign,
        Op::Valloc,
        Op::Pvalloc,
        Op::Reallocarray,
        Op::FreeSized,
        Op::FreeAlignedSized,
    ];

    /// Called per record by the recorder and the decoder: a table lookup, inlinable across crates.
    #[inline]
    pub fn from_tag(tag: u8) -> Option<Op> {
        const BY_TAG: [Option<Op>; 16] = {
            let mut t = [None; 16];
            let mut i = 0;
            while i < Op::ALL.len() {
                t[Op::ALL[i] as usize] = Some(Op::ALL[i]);
                i += 1;
            }
            t
        };
        BY_TAG.get(usize::from(tag)).copied().flatten()
    }

    pub fn name(self) -> &'static str {
        match self {
            Op::Malloc => "malloc",
            Op::Calloc => "calloc",
            Op::Realloc => "realloc",
            Op::Free => "free",
            Op::PosixMemalign => "posix_memalign",
            Op::AlignedAlloc => "aligned_alloc",
            Op::Memalign => "memalign",
            Op::Valloc => "valloc",
            Op::Pvalloc => "pvalloc",
            Op::Reallocarray => "reallocarray",
            Op::FreeSized => "free_sized",
            Op::FreeAlignedSized => "free_aligned_sized",
        }
    }

    /// True for the calls that release a block (and nothing else).
    #[inline]
    pub const fn is_free(self) -> bool {
        matches!(self, Op::Free | Op::FreeSized | Op::FreeAlignedSized)
    }

    /// True for the calls that resize an existing block.
    #[inline]
    pub const fn is_realloc(self) -> bool {
        matches!(self, Op::Realloc | Op::Reallocarray)
    }
}

/// One allocator call as the traced program made it.
///
/// Semantics per op:
/// - allocations: `addr` is the returned pointer (0 when the call failed), `size` the requested bytes
///   (for calloc `nmemb * size`);
/// - frees: `addr` is the freed pointer (free(NULL) is recorded with addr 0), `size` is 0 (or the size
///   passed to free_sized);
/// - realloc: `old_addr` is the pointer passed in, `addr` the returned one, `size` the new size.
///   realloc(NULL, n) behaves as malloc and realloc(p, 0) as free, but keeps op Realloc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Position in the process's total order of allocator calls (0-based, dense within one
    /// process image). Respects causality across threads: a free comes after its allocation.
    pub seq: u64,
    /// Nanoseconds since the process image's start (see the format doc for how it is derived).
    pub t_ns: u64,
    /// Kernel thread id of the calling thread.
    pub tid: u32,
    /// The call stack of the call: an id in the trace's [`StackTable`](crate::StackTable), or 0
    /// when none was recorded (recorded without `--stacks`, a free without `--free-stacks`, or the
    /// stack could not be taken). Ids are unique within one trace, shared by all its processes.
    pub stack: u32,
    pub op: Op,
    pub addr: u64,
    pub size: u64,
    pub old_addr: u64,
}

/// A named point in the program's life: from `alloclens_mark()` or from a matching output line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The `seq` of the next event after the marker (events with seq >= this are after it).
    pub seq: u64,
    pub t_ns: u64,
    pub tid: u32,
    pub label: String,
}

/// What a process stream yields, in `seq` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Event(Event),
    /// Boxed: markers are rare, and a `Record` is then no larger than an `Event` (the enum's tag
    /// lives in a value `op` cannot take). The analysis writes and reads every decoded record;
    /// 56 instead of 64 bytes each is that much less memory traffic.
    Marker(Box<Marker>),
}

const _: () = assert!(std::mem::size_of::<Record>() == std::mem::size_of::<Event>());

/// One process image (a fork child and an exec'd image each get their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// Counts exec()s within the same pid: 0 for the first image.
    pub exec_index: u32,
    pub cmdline: Vec<String>,
    /// Wall-clock start of the image, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// True when the stream ended without a clean end marker (killed, crashed or recorder lost).
    pub truncated: bool,
}
