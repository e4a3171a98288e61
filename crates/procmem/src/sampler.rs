//! [`TreeSampler`]: one call per sample gives the memory of every process of a tree.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::memory::{MemoryTotals, ProcessMemory, ProcessReader, ReadOutcome};
use crate::tree::{TreeIndex, TreeRule};

/// How the tree is delimited.
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplerOptions {
    /// Also count processes whose parent is the sampling process itself, i.e. orphans of the tree
    /// reparented to us after [`crate::become_child_subreaper`]. This accepts *every* child of the
    /// calling process, so enable it only while the sampled tree is our only child.
    pub include_reparented_to_self: bool,
}

/// The memory of a tree at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct TreeSample {
    /// When the sample was taken (start of the /proc listing). Not serialised: an `Instant` has no
    /// meaning outside this process; callers record their own offsets from it.
    #[serde(skip)]
    pub at: Instant,
    /// Processes read, by increasing pid.
    pub processes: Vec<ProcessMemory>,
    /// Sum of every field over `processes`.
    pub total: MemoryTotals,
    /// Processes of the tree whose memory could not be read (permission denied, e.g. a setuid
    /// program, or another I/O error). They are missing from `processes` and `total`.
    pub unreadable: u32,
}

/// Samples the memory of a process and all its descendants, reusing its caches between samples.
pub struct TreeSampler {
    index: TreeIndex,
    reader: ProcessReader,
    members: Vec<u32>,
}

impl TreeSampler {
    /// Prepares to sample the tree rooted at `root`. Fails if /proc cannot be listed or the kernel has
    /// no smaps_rollup. `root` need not exist yet or any more: samples are then empty.
    pub fn new(root: u32, options: SamplerOptions) -> Result<Self> {
        let rollup = Path::new("/proc/self/smaps_rollup");
        if !rollup.exists() {
            return Err(Error::Unsupported {
                path: rollup.into(),
            });
        }
        let index = TreeIndex::new(TreeRule {
            root,
            self_pid: std::process::id(),
            include_reparented_to_self: options.include_reparented_to_self,
        })?;
        Ok(TreeSampler {
            index,
            reader: ProcessReader::default(),
            members: Vec::new(),
        })
    }

    /// Finds the processes of the tree now and reads their memory. Processes that exit meanwhile
    /// are skipped, as are zombies (they hold no memory any more).
    pub fn sample(&mut self) -> Result<TreeSample> {
        let at = Instant::now();
        self.index.refresh(&mut self.members)?;
        let mut processes = Vec::with_capacity(self.members.len());
        let mut unreadable = 0;
        for &pid in &self.members {
            match self.reader.read(pid) {
                ReadOutcome::Read(m) => processes.push(m),
                ReadOutcome::NoMemory => {}
                ReadOutcome::Unreadable => unreadable += 1,
            }
        }
        self.reader.retain(&self.members);
        let total = MemoryTotals::sum(&processes);
        Ok(TreeSample {
            at,
            processes,
            total,
            unreadable,
        })
    }
}
