//! A snapshot of a profile table: what the process holds now by call stack (in-use objects and
//! bytes) and what it allocated since the start, each an unbiased estimate with its standard
//! error (`estimate`), with the agent's exact counters beside them; written as pprof by
//! [`to_pprof`]. [`take`] reads one table file, [`take_pid`] the table of a running process,
//! [`take_all`] every table of a target (a pid, a directory, a file).
mod estimate;
mod find;
mod to_pprof;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

pub use estimate::{sample_probability, Estimate};
pub use find::{find, take_all, take_pid, Taken, Target};
pub use to_pprof::{to_pprof, to_pprof_with, SnapshotOptions, SnapshotProfile, STDERR_LABELS};

use crate::table::{Table, STATE_EXITED};
use crate::ProfileError;
use estimate::{add_live_block, Sum};

/// Where the process of a table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// It runs and still maps its table: the figures are of now.
    Running,
    /// Its image ended by exit or exec: the figures are of that moment.
    Exited,
    /// It is gone without the final update (SIGKILL, an OOM kill): the figures are of its last
    /// moment (the exact counters of the agent's last renewal).
    Killed,
}

/// The agent's exact counts of the program's heap calls (every call, not sampled), as of
/// `updated_unix_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub allocs: u64,
    pub frees: u64,
    pub live_blocks: u64,
    /// Usable sizes (the allocator's), not requested bytes.
    pub live_bytes: u64,
    pub requested: u64,
    pub rss: u64,
    pub updated_unix_ns: u64,
}

/// A loaded object of the process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Module {
    pub path: String,
    /// GNU build-id in lower-case hex.
    pub build_id: Option<String>,
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub bias: u64,
}

/// One call stack's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackEstimate {
    /// Its record in the table (0: the stack could not be taken or stored).
    pub stack: u32,
    /// Return addresses, innermost first (hex).
    #[serde(serialize_with = "hex_addresses")]
    pub frames: Vec<u64>,
    /// Sampled allocations since the start, and of them the blocks still live.
    pub samples: u64,
    pub live_samples: u64,
    pub inuse_objects: Estimate,
    pub inuse_space: Estimate,
    pub alloc_objects: Estimate,
    pub alloc_space: Estimate,
    /// The call site (first frame not the allocator's), once named by [`to_pprof`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

/// The figures of one profile table at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub path: PathBuf,
    pub pid: u32,
    pub ppid: u32,
    pub exe: String,
    pub state: ProcessState,
    pub start_unix_ns: u64,
    pub taken_unix_ns: u64,
    /// Mean requested bytes between two samples of a thread.
    pub sample_bytes: u64,
    pub counters: Counters,
    /// The header's sample counts: allocations sampled since the start, live entries now,
    /// sampled blocks not tabled (in `alloc_*` only), sampled allocations filed under the empty
    /// stack for want of room.
    pub samples: u64,
    pub live_entries: u64,
    pub dropped_live: u64,
    pub dropped_stacks: u64,
    /// Live entries being written when read (skipped).
    pub torn_entries: u64,
    pub modules: Vec<Module>,
    /// By in-use bytes, largest first.
    pub stacks: Vec<StackEstimate>,
}

/// The sum of every stack's estimates (their variances add: samples are independent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Totals {
    pub inuse_objects: Estimate,
    pub inuse_space: Estimate,
    pub alloc_objects: Estimate,
    pub alloc_space: Estimate,
}

impl Snapshot {
    pub fn totals(&self) -> Totals {
        totals(std::slice::from_ref(self))
    }

    /// The pprof profile of this snapshot alone ([`to_pprof`]).
    pub fn to_pprof(&mut self, options: &SnapshotOptions) -> SnapshotProfile {
        to_pprof(std::slice::from_mut(self), options)
    }
}

/// The totals of several snapshots.
pub fn totals(snapshots: &[Snapshot]) -> Totals {
    let mut sums = [Sum::default(); 4];
    for s in snapshots.iter().flat_map(|s| &s.stacks) {
        let each = [
            s.inuse_objects,
            s.inuse_space,
            s.alloc_objects,
            s.alloc_space,
        ];
        for (sum, e) in sums.iter_mut().zip(each) {
            sum.add(e.value, e.variance());
        }
    }
    let [inuse_objects, inuse_space, alloc_objects, alloc_space] = sums.map(|s| s.estimate());
    Totals {
        inuse_objects,
        inuse_space,
        alloc_objects,
        alloc_space,
    }
}

/// Reads the profile table at `path` now.
pub fn take(path: &Path) -> Result<Snapshot, ProfileError> {
    let table = Table::open(path)?;
    let header = table.header();
    let live = table.live_entries();
    let mut records: HashMap<u32, crate::table::StackRecord> =
        table.stacks()?.into_iter().map(|s| (s.id, s)).collect();
    // In use, by stack: live blocks whose stack was stored after the index was read are read
    // now; one whose record is not committed yet is filed under the empty stack.
    let mut inuse: BTreeMap<u32, (u64, Sum, Sum)> = BTreeMap::new();
    for entry in &live.entries {
        let mut stack = entry.stack;
        if let std::collections::hash_map::Entry::Vacant(slot) = records.entry(stack) {
            match table.stack(stack)? {
                Some(record) => {
                    slot.insert(record);
                }
                None => stack = 0,
            }
        }
        let (count, objects, space) = inuse.entry(stack).or_default();
        *count += 1;
        add_live_block(objects, space, entry.size, header.sample_bytes);
    }
    let mut stacks: Vec<StackEstimate> = records
        .into_values()
        .filter_map(|record| {
            let (live_samples, objects, space) = inuse.get(&record.id).copied().unwrap_or_default();
            if record.samples == 0 && live_samples == 0 {
                return None;
            }
            let sum = |value: f64, variance: f64| Sum { value, variance }.estimate();
            Some(StackEstimate {
                stack: record.id,
                frames: record.frames,
                samples: record.samples,
                live_samples,
                inuse_objects: objects.estimate(),
                inuse_space: space.estimate(),
                alloc_objects: sum(record.alloc_objects, record.alloc_objects_var),
                alloc_space: sum(record.alloc_space, record.alloc_space_var),
                site: None,
            })
        })
        .collect();
    stacks.sort_by(|a, b| {
        b.inuse_space
            .value
            .total_cmp(&a.inuse_space.value)
            .then(b.alloc_space.value.total_cmp(&a.alloc_space.value))
            .then(a.stack.cmp(&b.stack))
    });
    let modules = table
        .modules()?
        .into_iter()
        .map(|m| Module {
            path: m.path,
            build_id: (!m.build_id.is_empty())
                .then(|| m.build_id.iter().map(|b| format!("{b:02x}")).collect()),
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
            bias: m.bias,
        })
        .collect();
    Ok(Snapshot {
        path: path.to_path_buf(),
        pid: header.pid,
        ppid: header.ppid,
        state: state_of(path, header.pid, header.state),
        exe: header.exe,
        start_unix_ns: header.start_unix_ns,
        taken_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        sample_bytes: header.sample_bytes,
        counters: Counters {
            allocs: header.allocs,
            frees: header.frees,
            live_blocks: header.live_blocks,
            live_bytes: header.live_bytes,
            requested: header.requested,
            rss: header.rss,
            updated_unix_ns: header.updated_unix_ns,
        },
        samples: header.samples,
        live_entries: header.live_entries,
        dropped_live: header.dropped_live,
        dropped_stacks: header.dropped_stacks,
        torn_entries: live.torn,
        modules,
        stacks,
    })
}

/// A table whose process did not say it ended is of a running process only if that process
/// still maps it (a pid is reused; a killed process maps nothing).
fn state_of(path: &Path, pid: u32, state: u32) -> ProcessState {
    if state == STATE_EXITED {
        return ProcessState::Exited;
    }
    if find::maps_table(pid, path) {
        ProcessState::Running
    } else {
        ProcessState::Killed
    }
}

fn hex_addresses<S: Serializer>(frames: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(frames.iter().map(|f| format!("{f:#x}")))
}

#[cfg(test)]
mod tests;
