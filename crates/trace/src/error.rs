//! Typed errors of the reader, with the file and the place in it.
use std::fmt;
use std::path::PathBuf;

/// Why a trace cannot be read (or read further).
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read trace '{path}': {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("'{path}' is not an alloclens trace (wrong magic bytes)")]
    NotATrace { path: PathBuf },
    #[error("'{path}' is empty (0 bytes), not a trace of `alloclens record`")]
    Empty { path: PathBuf },
    #[error(
        "'{path}' is a directory, not a trace: give the file `alloclens record -o` wrote (a results \
         directory of `run` or `watch` has its page: `alloclens report {path}`)"
    )]
    Directory { path: PathBuf },
    #[error(
        "'{path}' is a trace of format version {found}, newer than this alloclens reads \
         (version {supported}): upgrade alloclens"
    )]
    NewerVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error(
        "'{path}' is a trace of format version {found}, written by an older alloclens; this one \
         reads version {supported}: record it again"
    )]
    OlderVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("'{path}': the trace header is damaged: {what}")]
    BadHeader { path: PathBuf, what: String },
    #[error("'{path}': chunk {chunk} at byte {offset} is corrupt: {what}")]
    CorruptChunk {
        path: PathBuf,
        chunk: u64,
        offset: u64,
        what: String,
    },
    #[error("'{path}': no process stream {stream} (the trace has {count})")]
    NoSuchStream {
        path: PathBuf,
        stream: usize,
        count: usize,
    },
}

/// Where and why the scan of a file stopped before its end: everything before is readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub kind: DamageKind,
    /// Byte offset of the first damaged chunk.
    pub offset: u64,
    /// Intact chunks before the damage.
    pub chunks_recovered: u64,
    /// Records (events and markers) in those chunks.
    pub records_recovered: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// The file ends in the middle of a chunk.
    Truncated,
    /// The bytes at `offset` are not a valid chunk frame.
    Corrupt(String),
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DamageKind::Truncated => write!(f, "truncated after chunk {}", self.chunks_recovered)?,
            DamageKind::Corrupt(what) => write!(
                f,
                "corrupt after chunk {} at byte {} ({what})",
                self.chunks_recovered, self.offset
            )?,
        }
        write!(
            f,
            " ({} records recovered)",
            human_count(self.records_recovered)
        )
    }
}

/// Bytes in binary units, the one formatter of every text alloclens prints: "512 B", "1.5 KiB",
/// "3.2 GiB" (the HTML report's figures have their own, with three significant digits).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// 1234567 -> "1.2 M".
pub fn human_count(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1} k", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} M", n as f64 / 1e6),
        _ => format!("{:.1} G", n as f64 / 1e9),
    }
}
