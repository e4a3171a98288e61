//! The snapshot files the agent writes, and the trim request alloclens drops for it.
//!
//! A snapshot is text: a first line `alloclens-agent 1`; `key=value` lines (`count.*`: the
//! merged per-thread counters, `raw.*`: the allocator's figures by API name, `trim.*`: the last
//! trim's outcome); `section NAME LEN` followed by LEN bytes of text (glibc's malloc_info,
//! mimalloc's printed stats); and `end`.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{normalise, AgentError, AllocatorStats};

/// The latest word of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub pid: u32,
    pub ppid: u32,
    /// /proc/self/exe when the image started.
    pub exe: String,
    /// CLOCK_REALTIME, in ns since the epoch.
    pub taken_unix_ns: u64,
    /// Increases by one per snapshot of this pid (across exec too).
    pub seq: u64,
    /// Written at exit (the library's destructor, or _exit/_Exit): the last word of that pid. A
    /// process killed by a signal leaves its last periodic snapshot, not final. Serialised as
    /// `final_` (watch.json's key).
    #[serde(rename = "final_")]
    pub is_final: bool,
    /// The agent's interval.
    pub interval_ms: u64,
    /// RSS (/proc/self/statm) when the snapshot was taken.
    pub rss: u64,
    pub counters: Counters,
    pub allocator: AllocatorStats,
    pub trim: Option<TrimOutcome>,
    /// Loaded into the running process by an attach: the heap calls are not counted (`counters`
    /// stay 0), the allocator's statistics are the figures ([`Snapshot::live_bytes`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
}

impl Snapshot {
    /// The program's live bytes: the agent's count, or for an attached agent the bytes the
    /// allocator says it has handed out (in use), when it says.
    pub fn live_bytes(&self) -> Option<u64> {
        if self.attached {
            self.allocator.handed_out
        } else {
            Some(self.counters.live_bytes)
        }
    }

    /// The number of live blocks, counted by a preloaded agent only.
    pub fn live_blocks(&self) -> Option<u64> {
        (!self.attached).then_some(self.counters.live_blocks)
    }
}

/// The program's heap calls, merged from the per-thread counters at snapshot time. Sizes are
/// usable sizes (the allocator's malloc_usable_size), except `requested_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Usable bytes of the live blocks.
    pub live_bytes: u64,
    pub live_blocks: u64,
    /// Bytes requested, cumulative (malloc's size, calloc's n*size, realloc's new size).
    pub requested_bytes: u64,
    /// malloc, calloc and the aligned calls that returned a block.
    pub allocs: u64,
    /// free of a non-NULL block.
    pub frees: u64,
    pub reallocs: u64,
}

/// What a trim request did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimOutcome {
    pub at_unix_ns: u64,
    /// The allocator has a way to trim (tbbmalloc's and an unknown allocator's may not).
    pub done: bool,
    pub rss_before: u64,
    pub rss_after: u64,
    pub free_resident_before: Option<u64>,
    pub free_resident_after: Option<u64>,
}

const MAGIC: &str = "alloclens-agent 1";

/// Reads one snapshot file.
pub fn read_snapshot(path: &Path) -> Result<Snapshot, AgentError> {
    let bytes = fs::read(path).map_err(|source| AgentError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes).map_err(|detail| AgentError::Damaged {
        path: path.to_path_buf(),
        detail,
    })
}

/// The latest snapshot of every process that ran the agent with this directory (files
/// `<pid>.snap`), by pid. A file that is not a whole snapshot is left out (the agent renames
/// whole files into place, so only another writer can leave one).
pub fn read_snapshots(dir: &Path) -> Result<Vec<Snapshot>, AgentError> {
    let entries = fs::read_dir(dir).map_err(|source| AgentError::ReadDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_suffix(".snap")) else {
            continue;
        };
        if pid.parse::<u32>().is_err() {
            continue;
        }
        match read_snapshot(&e.path()) {
            Ok(s) => out.push(s),
            // Gone between the listing and the read (replaced: rename keeps the name, so this
            // is a process's directory entry vanishing), or damaged: left out.
            Err(_) => continue,
        }
    }
    out.sort_by_key(|s| s.pid);
    Ok(out)
}

/// Asks process `pid` to give free memory back (glibc malloc_trim(0), jemalloc
/// arena.<all>.purge, tcmalloc MallocExtension_ReleaseFreeMemory, mimalloc mi_collect(true),
/// tbbmalloc scalable_allocation_command(TBBMALLOC_CLEAN_ALL_BUFFERS)). The agent does it at its
/// next interval; the outcome appears in that and every later snapshot's `trim`.
pub fn request_trim(dir: &Path, pid: u32) -> Result<(), AgentError> {
    let path: PathBuf = dir.join(format!("{pid}.trim"));
    fs::write(&path, b"").map_err(|source| AgentError::Trim { pid, path, source })
}

fn parse(bytes: &[u8]) -> Result<Snapshot, String> {
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    let mut raw = BTreeMap::new();
    let mut before = BTreeMap::new();
    let mut after = BTreeMap::new();
    let mut sections = BTreeMap::new();
    let mut rest = bytes;
    let mut first = true;
    let mut ended = false;
    while !rest.is_empty() {
        let nl = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        let line = std::str::from_utf8(&rest[..nl]).map_err(|_| "a line is not UTF-8")?;
        rest = &rest[(nl + 1).min(rest.len())..];
        if first {
            if line != MAGIC {
                return Err(format!("it does not start with '{MAGIC}'"));
            }
            first = false;
            continue;
        }
        if line == "end" {
            ended = true;
            break;
        }
        if let Some(sec) = line.strip_prefix("section ") {
            let (name, len) = sec.rsplit_once(' ').ok_or("a section line has no length")?;
            let len: usize = len
                .parse()
                .map_err(|_| "a section length is not a number")?;
            if rest.len() < len {
                return Err(format!("section {name} is cut"));
            }
            sections.insert(
                name.to_string(),
                String::from_utf8_lossy(&rest[..len]).into_owned(),
            );
            rest = &rest[len..];
            rest = rest.strip_prefix(b"\n").unwrap_or(rest);
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line '{line}' has no '='"))?;
        let num = || {
            v.parse::<u64>()
                .map_err(|_| format!("{k}={v} is not a number"))
        };
        if let Some(name) = k.strip_prefix("raw.") {
            raw.insert(name.to_string(), num()?);
        } else if let Some(name) = k.strip_prefix("trim.before.") {
            before.insert(name.to_string(), num()?);
        } else if let Some(name) = k.strip_prefix("trim.after.") {
            after.insert(name.to_string(), num()?);
        } else {
            fields.insert(k, v);
        }
    }
    if !ended {
        return Err("it has no 'end' line (cut)".into());
    }
    let text = |k: &str| fields.get(k).copied().ok_or(format!("{k} is missing"));
    let num = |k: &str| -> Result<u64, String> {
        text(k)?.parse().map_err(|_| format!("{k} is not a number"))
    };
    let allocator = text("allocator")?.to_string();
    let counters = Counters {
        live_bytes: num("count.bytes_in")?.saturating_sub(num("count.bytes_out")?),
        live_blocks: num("count.blocks_in")?.saturating_sub(num("count.blocks_out")?),
        requested_bytes: num("count.requested")?,
        allocs: num("count.allocs")?,
        frees: num("count.frees")?,
        reallocs: num("count.reallocs")?,
    };
    let none = BTreeMap::new();
    let trim = match fields.get("trim.at_unix_ns") {
        None => None,
        Some(_) => Some(TrimOutcome {
            at_unix_ns: num("trim.at_unix_ns")?,
            done: num("trim.done")? != 0,
            rss_before: num("trim.rss_before")?,
            rss_after: num("trim.rss_after")?,
            free_resident_before: normalise(&allocator, &before, &none).free_resident,
            free_resident_after: normalise(&allocator, &after, &none).free_resident,
        }),
    };
    Ok(Snapshot {
        pid: num("pid")? as u32,
        ppid: num("ppid")? as u32,
        exe: text("exe")?.to_string(),
        taken_unix_ns: num("taken_unix_ns")?,
        seq: num("seq")?,
        is_final: num("final")? != 0,
        interval_ms: num("interval_ms")?,
        rss: num("rss")?,
        counters,
        allocator: normalise(&allocator, &raw, &sections),
        trim,
        attached: fields.get("attached").is_some_and(|v| *v == "1"),
    })
}
