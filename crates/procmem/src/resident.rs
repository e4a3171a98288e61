//! [`ResidentSampler`]: the RSS and VSS of a whole tree in one cheap reading, for instants that must be
//! caught as they happen (a marker line of the command's output).
//!
//! A [`crate::TreeSampler`] sample reads smaps_rollup, whose page walk takes ~35-40 µs per resident
//! MB: by the time it is done, a program that moves on every few ms is at a later event. This
//! reads only /proc/PID/statm (the kernel's RSS and VSS counters, a few µs per process), so it can
//! be taken on the thread that reads the command's output, right after the line arrived.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::path::Path;
use std::time::Instant;

use hashbrown::HashMap;

use crate::error::Result;
use crate::exited_leader::reading_thread;
use crate::procfile::{parse_u64, reread};
use crate::sampler::SamplerOptions;
use crate::tree::{Member, TreeIndex, TreeRule};

/// The RSS and VSS of a tree at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentSample {
    /// When the reading ended (the figures are at most this late).
    pub at: Instant,
    /// Sum of the processes' RSS (statm `resident`, the counters behind status `VmRSS`), bytes.
    pub rss: u64,
    /// Sum of the processes' VSS (statm `size` = status `VmSize`), bytes.
    pub vss: u64,
    /// Processes with an address space that were read.
    pub processes: u32,
    /// Processes of the tree whose statm could not be read (not in the sums).
    pub unreadable: u32,
}

/// Processes whose statm is kept open between readings (beyond that, opened per reading).
const MAX_KEPT_OPEN: usize = 128;

/// Reads the RSS and VSS of a process and all its descendants from /proc/PID/statm.
pub struct ResidentSampler {
    index: TreeIndex,
    members: Vec<Member>,
    /// statm kept open per pid, with the start time of the process it was opened on.
    open: HashMap<u32, (u64, File)>,
    buf: Vec<u8>,
    path: String,
    page_size: u64,
}

impl ResidentSampler {
    /// Prepares to read the tree rooted at `root`, delimited as [`SamplerOptions`] says (its
    /// `pss_refresh` is irrelevant here). Lists /proc once, so that the first reading is as quick
    /// as the next ones.
    pub fn new(root: u32, options: SamplerOptions) -> Result<Self> {
        let mut index = TreeIndex::new(TreeRule {
            root,
            self_pid: std::process::id(),
            include_reparented_to_self: options.include_reparented_to_self,
            excluded: options.exclude_child,
        })?;
        let mut members = Vec::new();
        index.refresh(&mut members)?;
        // SAFETY: sysconf has no memory-safety preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Ok(ResidentSampler {
            index,
            members,
            open: HashMap::new(),
            buf: Vec::with_capacity(256),
            path: String::new(),
            page_size: u64::try_from(page_size).unwrap_or(4096),
        })
    }

    /// Finds the processes of the tree now and sums their RSS and VSS. Zombies and processes that
    /// exit meanwhile are skipped (`processes` is 0 once the whole tree is gone).
    pub fn sample(&mut self) -> Result<ResidentSample> {
        self.index.refresh(&mut self.members)?;
        let (mut rss, mut vss, mut processes, mut unreadable) = (0, 0, 0, 0);
        for i in 0..self.members.len() {
            match self.read_statm(self.members[i]) {
                Statm::Read { size, resident } => {
                    rss += resident * self.page_size;
                    vss += size * self.page_size;
                    processes += 1;
                }
                Statm::NoMemory => {}
                Statm::Unreadable => unreadable += 1,
            }
        }
        let members = &self.members;
        self.open
            .retain(|pid, _| members.binary_search_by_key(pid, |m| m.pid).is_ok());
        Ok(ResidentSample {
            at: Instant::now(),
            rss,
            vss,
            processes,
            unreadable,
        })
    }

    fn read_statm(&mut self, member: Member) -> Statm {
        if let Some((starttime, file)) = self.open.get(&member.pid) {
            if *starttime == member.starttime {
                match reread(file, &mut self.buf) {
                    Ok(()) => match parse_statm(&self.buf) {
                        // A zombie, or a leader that exited since (its threads run on): see below.
                        Statm::NoMemory => {}
                        outcome => return outcome,
                    },
                    // Gone, or the thread read through exited: see below.
                    Err(e) if gone(&e) => {}
                    Err(_) => return Statm::Unreadable,
                }
            }
            // A recycled pid (another process), or one to look at afresh.
            self.open.remove(&member.pid);
        }
        let outcome = self.open_statm(member.pid, None);
        // A process whose main thread exited shows the zombie leader's zeros: read it through a
        // live thread (crate::exited_leader). A plain zombie costs one read of its stat.
        if let (Statm::NoMemory | Statm::Unreadable, Some(tid)) =
            (&outcome.0, reading_thread(member.pid))
        {
            let through = self.open_statm(member.pid, Some(tid));
            return self.keep(member, through);
        }
        self.keep(member, outcome)
    }

    /// Opens and reads /proc/PID/statm, or /proc/PID/task/TID/statm.
    fn open_statm(&mut self, pid: u32, tid: Option<u32>) -> (Statm, Option<File>) {
        self.path.clear();
        let _ = match tid {
            Some(tid) => write!(self.path, "/proc/{pid}/task/{tid}/statm"),
            None => write!(self.path, "/proc/{pid}/statm"),
        };
        let file = match File::open(Path::new(&self.path)) {
            Ok(file) => file,
            Err(e) if gone(&e) => return (Statm::NoMemory, None),
            Err(_) => return (Statm::Unreadable, None),
        };
        let outcome = match reread(&file, &mut self.buf) {
            Ok(()) => parse_statm(&self.buf),
            Err(e) if gone(&e) => Statm::NoMemory,
            Err(_) => Statm::Unreadable,
        };
        (outcome, Some(file))
    }

    /// Keeps a statm that was read open for the next readings.
    fn keep(&mut self, member: Member, (outcome, file): (Statm, Option<File>)) -> Statm {
        if let (Statm::Read { .. }, Some(file)) = (&outcome, file) {
            if self.open.len() < MAX_KEPT_OPEN {
                self.open.insert(member.pid, (member.starttime, file));
            }
        }
        outcome
    }
}

enum Statm {
    /// Sizes in pages.
    Read {
        size: u64,
        resident: u64,
    },
    NoMemory,
    Unreadable,
}

/// "size resident shared text lib data dt", in pages; a zombie or kernel thread shows all zeros.
fn parse_statm(text: &[u8]) -> Statm {
    let mut fields = text
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let (Some(size), Some(resident)) = (
        fields.next().and_then(parse_u64),
        fields.next().and_then(parse_u64),
    ) else {
        return Statm::NoMemory; // empty: the process went away while being read
    };
    if size == 0 {
        Statm::NoMemory
    } else {
        Statm::Read { size, resident }
    }
}

/// ENOENT: gone before open; ESRCH: gone (or reaped) after open.
fn gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_is_parsed_in_pages_and_zombies_have_no_memory() {
        assert!(matches!(
            parse_statm(b"2048 512 100 10 0 300 0\n"),
            Statm::Read {
                size: 2048,
                resident: 512
            }
        ));
        assert!(matches!(parse_statm(b"0 0 0 0 0 0 0\n"), Statm::NoMemory));
        assert!(matches!(parse_statm(b""), Statm::NoMemory));
    }

    #[test]
    fn reads_own_process_like_status() {
        let me = std::process::id();
        let mut sampler = ResidentSampler::new(me, SamplerOptions::default()).unwrap();
        let s = sampler.sample().unwrap();
        assert_eq!((s.processes, s.unreadable), (1, 0));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb = |key: &str| -> u64 {
            let line = status.lines().find(|l| l.starts_with(key)).unwrap();
            line[key.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap()
                * 1024
        };
        // Other test threads allocate meanwhile (one grows by 32 MiB): close, not equal.
        assert!(s.rss.abs_diff(kb("VmRSS:")) < 48 << 20, "{s:?}");
        assert!(s.vss.abs_diff(kb("VmSize:")) < 256 << 20, "{s:?}");
        assert!(s.vss >= s.rss);
    }
}
