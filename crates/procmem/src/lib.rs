//! Memory of a whole process tree, sampled from /proc.
//!
//! [`TreeSampler`] finds the processes of a tree (a root and all its descendants, including
//! short-lived fork workers and, after [`become_child_subreaper`], orphans reparented to us) by
//! scanning /proc, and reads each one's RSS, anonymous/file/shmem memory, VSS and peak RSS from
//! /proc/PID/status at every sample, and PSS, USS and swap from /proc/PID/smaps_rollup, which is ten
//! times costlier, only when they may have moved ([`PssRefresh`]); when it reads smaps_rollup, RSS
//! comes from that same read, so `uss ≤ pss ≤ rss` in every sample. It is cheap enough to run at
//! 10 Hz on a tree of dozens of processes (see bench/sampler-cost.sh). [`ResidentSampler`] reads
//! only the tree's RSS and VSS (/proc/PID/statm), for instants that must be caught at once.
//! A process whose main thread has exited while others run on is read through a live thread
//! ([`process_dir`]).
//! [`mapped_files`] tells which files a process maps (to verify a preloaded allocator),
//! [`smaps_split`] splits a process's RSS into heap, file-backed, stack and other (for `watch`),
//! [`ResidencyReader`] tells which pages of the heap's mappings are resident (pagemap),
//! [`read_ksm`] reads the kernel samepage merging counters, and [`own_cpu_time`] lets callers
//! report what sampling cost them.
//!
//! Every size is in bytes. The exact definition of each metric is in docs/memory-metrics.md.
//! Linux only; needs smaps_rollup (Linux >= 4.14).

mod error;
mod exited_leader;
mod ksm;
pub mod ksm_control;
mod maps;
mod memory;
mod process_control;
mod procfile;
mod refresh;
mod residency;
mod resident;
mod sampler;
mod smaps_split;
mod tree;

pub use error::{Error, Result};
pub use exited_leader::{process_dir, reading_thread};
pub use ksm::{
    find_ksmd, read_ksm, read_process_ksm, read_tree_ksm, KsmCounters, ProcessKsm, TreeKsm,
};
pub use maps::{mapped_files, parse_file_mapping, FileMapping};
pub use memory::{MemoryTotals, ProcessMemory};
pub use process_control::{become_child_subreaper, own_cpu_time, thread_cpu_time};
pub use procfile::{
    cpu_seconds, is_alive, parse_stat, read_stat, start_unix_ms, stat_comm, ProcStat,
};
pub use refresh::PssRefresh;
pub use residency::{HeapResidency, MappingResidency, PagemapMethod, ResidencyReader};
pub use resident::{ResidentSample, ResidentSampler};
pub use sampler::{SamplerOptions, TreeSample, TreeSampler};
pub use smaps_split::{
    parse_smaps, smaps_reading, smaps_split, split_smaps_text, SmapsReading, SmapsSplit,
};
