//! [`TreeSampler`]: one call per sample gives the memory of every process of a tree.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::memory::{MemoryTotals, ProcessMemory, ProcessReader, ReadOutcome, RollupFigures};
use crate::refresh::{must_read, LastRead, LastReads, Now, PssRefresh};
use crate::tree::{Member, TreeIndex, TreeRule};

/// How the tree is delimited and how often its PSS is read. Build it with
/// `SamplerOptions { field: value, ..Default::default() }`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplerOptions {
    /// Also count processes whose parent is the sampling process itself, i.e. orphans of the tree
    /// reparented to us after [`crate::become_child_subreaper`]. This accepts *every* child of the
    /// calling process, so enable it only while the sampled tree is our only child.
    pub include_reparented_to_self: bool,
    /// A child of ours that is not part of the tree even so (the runner's watchdog).
    pub exclude_child: Option<u32>,
    /// When smaps_rollup (PSS, USS, swap, sharing) is re-read; default `Adaptive { max_age: 10 }`.
    pub pss_refresh: PssRefresh,
    /// Also read the KSM figures of every process, the system's KSM counters and ksmd's CPU time
    /// ([`TreeSample::ksm`]).
    pub ksm: bool,
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
    /// Processes whose smaps_rollup fields were carried forward from an earlier sample
    /// (`pss_age > 0`); 0 means every PSS in this sample is fresh.
    pub stale_processes: u32,
    /// KSM figures of the same processes, with [`SamplerOptions::ksm`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ksm: Option<crate::ksm::TreeKsm>,
}

/// Samples the memory of a process and all its descendants, reusing its caches between samples.
pub struct TreeSampler {
    index: TreeIndex,
    reader: ProcessReader,
    policy: PssRefresh,
    last_reads: LastReads,
    members: Vec<Member>,
    /// Members that had an address space in the previous sample (by pid), to detect forks and exits.
    previous_live: Vec<Member>,
    live: Vec<Member>,
    /// With `SamplerOptions::ksm`: Some(ksmd's pid, found once).
    ksm: Option<Option<u32>>,
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
            excluded: options.exclude_child,
        })?;
        Ok(TreeSampler {
            index,
            reader: ProcessReader::default(),
            policy: options.pss_refresh,
            last_reads: LastReads::default(),
            members: Vec::new(),
            previous_live: Vec::new(),
            live: Vec::new(),
            ksm: options.ksm.then(crate::ksm::find_ksmd),
        })
    }

    /// Prepares to sample the tree of a command about to be started, before it is: lists /proc now
    /// (every process in it is outside the tree), so that the first sample after
    /// [`TreeSampler::start`] costs what the later ones cost. Fails as [`TreeSampler::new`].
    pub fn before_start(options: SamplerOptions) -> Result<Self> {
        // No process has pid 0: until `start`, samples are empty.
        let mut sampler = TreeSampler::new(0, options)?;
        sampler.index.mark_existing_outside()?;
        Ok(sampler)
    }

    /// Names the root of a sampler made by [`TreeSampler::before_start`], once it is started.
    pub fn start(&mut self, root: u32) {
        self.index.set_root(root);
    }

    /// Finds the processes of the tree now and reads their memory; PSS and the other smaps_rollup
    /// fields are re-read as [`SamplerOptions::pss_refresh`] says. Processes that exit meanwhile
    /// are skipped, as are zombies (they hold no memory any more).
    pub fn sample(&mut self) -> Result<TreeSample> {
        self.take(false)
    }

    /// Like [`TreeSampler::sample`], but re-reads smaps_rollup for every process whatever the
    /// policy: every `pss_age` is 0. For instants that will be compared (phase markers).
    pub fn sample_full(&mut self) -> Result<TreeSample> {
        self.take(true)
    }

    fn take(&mut self, forced: bool) -> Result<TreeSample> {
        let at = Instant::now();
        self.index.refresh(&mut self.members)?;

        // Pass 1, cheap: status of every process, which also tells who has an address space.
        let mut processes = Vec::with_capacity(self.members.len());
        let mut unreadable = 0;
        self.live.clear();
        for &member in &self.members {
            match self.reader.read_status(member.pid) {
                ReadOutcome::Read(status) => {
                    let rollup = RollupFigures::default(); // filled in by pass 2
                    processes.push(ProcessMemory::new(member.pid, status, rollup, 0));
                    self.live.push(member);
                }
                ReadOutcome::NoMemory => {}
                ReadOutcome::Unreadable => unreadable += 1,
            }
        }
        // Zombies left `live` when they exited (their pages were released then), not when reaped.
        let tree_changed = self.live != self.previous_live;

        // Pass 2, costly: smaps_rollup where the policy asks for it, else the last read, aged.
        let mut stale_processes = 0;
        let mut kept = Vec::with_capacity(processes.len());
        for (mut p, member) in processes.into_iter().zip(&self.live) {
            let now = Now {
                starttime: member.starttime,
                rss: p.rss,
                tree_changed,
                forced,
            };
            let last = self.last_reads.get(p.pid);
            let carried = match must_read(self.policy, last, now) {
                None => self.last_reads.age(p.pid),
                Some(_) => None,
            };
            let (rollup, age) = match carried {
                // status RSS of this sample: `must_read` saw it is at least the carried PSS.
                Some(last) => (last.rollup, last.age),
                None => match self.reader.read_rollup(p.pid) {
                    ReadOutcome::Read(rollup) => {
                        let read = LastRead {
                            starttime: member.starttime,
                            rss: p.rss,
                            rollup,
                            age: 0,
                        };
                        self.last_reads.insert(p.pid, read);
                        // PSS and USS with the RSS of the same page walk, not the status read
                        // made before it: memory mapped in between would put PSS above RSS.
                        p.rss = rollup.rss;
                        p.vm_hwm = p.vm_hwm.max(rollup.rss);
                        (rollup, 0)
                    }
                    // Exited between the two reads: the next sample sees the tree changed.
                    ReadOutcome::NoMemory => {
                        self.last_reads.remove(p.pid);
                        continue;
                    }
                    ReadOutcome::Unreadable => {
                        self.last_reads.remove(p.pid);
                        unreadable += 1;
                        continue;
                    }
                },
            };
            let pss_age = age;
            p = ProcessMemory {
                pss: rollup.pss,
                uss: rollup.uss,
                swap: rollup.swap,
                pss_anon: rollup.pss_anon,
                pss_file: rollup.pss_file,
                pss_shmem: rollup.pss_shmem,
                shared_clean: rollup.shared_clean,
                shared_dirty: rollup.shared_dirty,
                pss_age,
                ..p
            };
            stale_processes += u32::from(pss_age > 0);
            kept.push(p);
        }

        let live = &self.live;
        let is_live = |pid| live.binary_search_by_key(&pid, |m| m.pid).is_ok();
        self.last_reads.retain(is_live);
        let members = &self.members;
        self.reader
            .retain(|pid| members.binary_search_by_key(&pid, |m| m.pid).is_ok());
        std::mem::swap(&mut self.live, &mut self.previous_live);

        let total = MemoryTotals::sum(&kept);
        let ksm = self.ksm.map(|ksmd| {
            let pids: Vec<u32> = kept.iter().map(|p| p.pid).collect();
            crate::ksm::read_tree_ksm(&pids, ksmd)
        });
        Ok(TreeSample {
            at,
            processes: kept,
            total,
            unreadable,
            stale_processes,
            ksm,
        })
    }
}
