//! When to re-read /proc/PID/smaps_rollup, the sampler's only costly file.
//!
//! Reading smaps_rollup makes the kernel walk every page table entry of the address space (~35-40 µs
//! per resident MB, ~93 % of the sampler's CPU), while status is a handful of counters. So every
//! sample reads status for every process, and smaps_rollup (PSS, USS, swap, sharing) only when its
//! figures may have moved since the last read; otherwise they are carried forward and aged.

use hashbrown::HashMap;

use crate::memory::RollupFigures;

/// How often the sampler re-reads smaps_rollup (PSS, USS, swap, `pss_*`, `shared_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PssRefresh {
    /// Read it for every process at every sample: exact, and ~10 times the cost.
    EverySample,
    /// Read it only for a process that is new, whose RSS moved by 1/64 or 256 KiB since its last
    /// read or fell below its last PSS, when the tree gained or lost a process, or when its last
    /// read is `max_age` samples old
    /// (0 or 1 = every sample). See docs/memory-metrics.md for the exact rule.
    Adaptive { max_age: u32 },
}

impl Default for PssRefresh {
    /// `Adaptive { max_age: 10 }`: at 10 Hz, PSS is at most 0.9 s old.
    fn default() -> Self {
        PssRefresh::Adaptive { max_age: 10 }
    }
}

/// An RSS move of this fraction of the RSS at the last read forces a new read...
const RSS_MOVE_DIVISOR: u64 = 64;
/// ...as does a move of this many bytes, whichever is smaller.
const RSS_MOVE_BYTES: u64 = 256 << 10;

/// What the sampler keeps of a process's last smaps_rollup read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastRead {
    /// Identifies the process with its pid: a recycled pid is a new process.
    pub starttime: u64,
    /// RSS (status) in the sample of the read.
    pub rss: u64,
    pub rollup: RollupFigures,
    /// Samples since the read (0 = this sample).
    pub age: u32,
}

/// Why smaps_rollup is read for a process in this sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Forced,
    EverySample,
    New,
    TreeChanged,
    AboveRss,
    RssMoved,
    TooOld,
}

/// The facts one decision is made on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub starttime: u64,
    pub rss: u64,
    /// A process joined or left the tree since the previous sample.
    pub tree_changed: bool,
    /// The caller asked for a full sample (`TreeSampler::sample_full`).
    pub forced: bool,
}

/// Whether smaps_rollup must be read now, and why; `None` = carry `last` forward, one sample older.
pub(crate) fn must_read(policy: PssRefresh, last: Option<&LastRead>, now: Now) -> Option<Reason> {
    let max_age = match policy {
        PssRefresh::EverySample => return Some(Reason::EverySample),
        PssRefresh::Adaptive { max_age } => max_age,
    };
    // The caller marks instants it will compare (phase markers): those need exact figures.
    if now.forced {
        return Some(Reason::Forced);
    }
    // Nothing to carry forward; a recycled pid (other start time) is another process.
    let Some(last) = last.filter(|l| l.starttime == now.starttime) else {
        return Some(Reason::New);
    };
    // A fork or an exit changes how many processes map each shared page, hence the PSS of every
    // process sharing with it, although no one's RSS moves.
    if now.tree_changed {
        return Some(Reason::TreeChanged);
    }
    // A PSS above the RSS of now cannot be this process's PSS any more (PSS ≤ RSS, page by page):
    // RSS fell by less than the threshold below, but through the carried figure.
    if last.rollup.pss > now.rss {
        return Some(Reason::AboveRss);
    }
    // Memory mapped or unmapped, touched or freed (or an exec) shows in RSS: PSS and USS moved too.
    let threshold = (last.rss / RSS_MOVE_DIVISOR).clamp(1, RSS_MOVE_BYTES);
    if now.rss.abs_diff(last.rss) >= threshold {
        return Some(Reason::RssMoved);
    }
    // What RSS does not show: a copy-on-write break (a write to a page shared with a parent or
    // child) moves the page from shared to private, so PSS and USS change while RSS stays the same;
    // so does swapping, KSM merging, or a process outside the tree mapping the same files. Reading
    // at least every max_age samples bounds how stale those figures can be.
    if last.age.saturating_add(1) >= max_age {
        return Some(Reason::TooOld);
    }
    None
}

/// The last smaps_rollup read of each process of the tree, by pid.
#[derive(Debug, Default)]
pub(crate) struct LastReads {
    by_pid: HashMap<u32, LastRead>,
}

impl LastReads {
    pub fn get(&self, pid: u32) -> Option<&LastRead> {
        self.by_pid.get(&pid)
    }

    pub fn insert(&mut self, pid: u32, read: LastRead) {
        self.by_pid.insert(pid, read);
    }

    /// Ages a carried-forward read by one sample and returns it.
    pub fn age(&mut self, pid: u32) -> Option<LastRead> {
        let last = self.by_pid.get_mut(&pid)?;
        last.age = last.age.saturating_add(1);
        Some(*last)
    }

    /// Forgets processes for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.by_pid.retain(|&pid, _| keep(pid));
    }

    pub fn remove(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTIVE: PssRefresh = PssRefresh::Adaptive { max_age: 10 };

    fn last(rss: u64, age: u32) -> LastRead {
        LastRead {
            starttime: 7,
            rss,
            rollup: RollupFigures::default(),
            age,
        }
    }

    fn now(rss: u64) -> Now {
        Now {
            starttime: 7,
            rss,
            tree_changed: false,
            forced: false,
        }
    }

    #[test]
    fn stable_process_is_carried_until_max_age() {
        let mb = 4 << 20;
        for age in 0..9 {
            assert_eq!(must_read(ADAPTIVE, Some(&last(mb, age)), now(mb)), None);
        }
        assert_eq!(
            must_read(ADAPTIVE, Some(&last(mb, 9)), now(mb)),
            Some(Reason::TooOld)
        );
    }

    #[test]
    fn rss_threshold_is_the_smaller_of_1_64_and_256_kib() {
        let small = 4 << 20; // 1/64 = 64 KiB
        let at = |rss, to| must_read(ADAPTIVE, Some(&last(rss, 0)), now(to));
        assert_eq!(at(small, small + (64 << 10) - 1), None);
        assert_eq!(at(small, small + (64 << 10)), Some(Reason::RssMoved));
        assert_eq!(at(small, small - (64 << 10)), Some(Reason::RssMoved));
        let big = 1 << 30; // 1/64 = 16 MiB: 256 KiB governs
        assert_eq!(at(big, big + (256 << 10) - 1), None);
        assert_eq!(at(big, big + (256 << 10)), Some(Reason::RssMoved));
        // An empty process that gains a page.
        assert_eq!(at(0, 4096), Some(Reason::RssMoved));
        assert_eq!(at(0, 0), None);
    }

    #[test]
    fn carried_pss_above_the_rss_of_now_is_read_again() {
        let mb = 4 << 20;
        let private = LastRead {
            rollup: RollupFigures {
                rss: mb,
                pss: mb,
                uss: mb,
                ..RollupFigures::default()
            },
            ..last(mb, 0)
        };
        // 4 KiB less RSS: far below the move threshold, but the carried PSS cannot be right.
        assert_eq!(
            must_read(ADAPTIVE, Some(&private), now(mb - 4096)),
            Some(Reason::AboveRss)
        );
        assert_eq!(must_read(ADAPTIVE, Some(&private), now(mb)), None);
    }

    #[test]
    fn new_recycled_changed_forced_and_every_sample_read() {
        let mb = 4 << 20;
        assert_eq!(must_read(ADAPTIVE, None, now(mb)), Some(Reason::New));
        let recycled = Now {
            starttime: 8,
            ..now(mb)
        };
        assert_eq!(
            must_read(ADAPTIVE, Some(&last(mb, 0)), recycled),
            Some(Reason::New)
        );
        let changed = Now {
            tree_changed: true,
            ..now(mb)
        };
        assert_eq!(
            must_read(ADAPTIVE, Some(&last(mb, 0)), changed),
            Some(Reason::TreeChanged)
        );
        let forced = Now {
            forced: true,
            ..now(mb)
        };
        assert_eq!(
            must_read(ADAPTIVE, Some(&last(mb, 0)), forced),
            Some(Reason::Forced)
        );
        assert_eq!(
            must_read(PssRefresh::EverySample, Some(&last(mb, 0)), now(mb)),
            Some(Reason::EverySample)
        );
        for max_age in [0, 1] {
            let policy = PssRefresh::Adaptive { max_age };
            assert_eq!(
                must_read(policy, Some(&last(mb, 0)), now(mb)),
                Some(Reason::TooOld)
            );
        }
    }
}
