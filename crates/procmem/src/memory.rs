//! Memory figures of one process, read from /proc/PID/status (cheap counters, every sample) and
//! /proc/PID/smaps_rollup (costly page-table walk, when `refresh` says so), and their sums.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::path::Path;

use serde::Serialize;

use hashbrown::HashMap;

use crate::exited_leader::{leader_has_exited, live_thread, reading_thread, status_name};
use crate::procfile::{for_each_field, parse_size, reread};

/// The figures of /proc/PID/status, cheap to read (the kernel keeps them as counters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatusFigures {
    pub ppid: u32,
    pub comm: String,
    pub rss: u64,
    pub anonymous: u64,
    pub rss_file: u64,
    pub rss_shmem: u64,
    pub vss: u64,
    pub vm_hwm: u64,
}

/// The figures of /proc/PID/smaps_rollup, costly to read: the kernel walks every page table entry
/// of the address space (~35-40 µs per resident MB). They all come from that one walk, page by page,
/// so `uss ≤ pss ≤ rss` holds exactly among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RollupFigures {
    /// Resident pages counted by the walk (`Rss`).
    pub rss: u64,
    pub pss: u64,
    pub uss: u64,
    pub swap: u64,
    pub pss_anon: Option<u64>,
    pub pss_file: Option<u64>,
    pub pss_shmem: Option<u64>,
    pub shared_clean: u64,
    pub shared_dirty: u64,
}

impl ProcessMemory {
    /// A process's memory from this sample's status and the given smaps_rollup read.
    pub(crate) fn new(
        pid: u32,
        status: StatusFigures,
        rollup: RollupFigures,
        pss_age: u32,
    ) -> Self {
        ProcessMemory {
            pid,
            ppid: status.ppid,
            comm: status.comm,
            rss: status.rss,
            pss: rollup.pss,
            uss: rollup.uss,
            swap: rollup.swap,
            anonymous: status.anonymous,
            rss_file: status.rss_file,
            rss_shmem: status.rss_shmem,
            pss_anon: rollup.pss_anon,
            pss_file: rollup.pss_file,
            pss_shmem: rollup.pss_shmem,
            shared_clean: rollup.shared_clean,
            shared_dirty: rollup.shared_dirty,
            vss: status.vss,
            vm_hwm: status.vm_hwm,
            pss_age,
        }
    }
}

/// Memory of one process at one instant. Every size is in bytes. See docs/memory-metrics.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessMemory {
    pub pid: u32,
    pub ppid: u32,
    /// Command name (status `Name`, at most 15 bytes, as the kernel escapes it).
    pub comm: String,
    /// Resident set size. When `pss_age` is 0, the `Rss` of the same smaps_rollup read as `pss` and
    /// `uss` (one page walk: `uss ≤ pss ≤ rss` exactly); otherwise status `VmRSS` of this sample,
    /// which the sampler keeps at or above the carried `pss`.
    pub rss: u64,
    /// Proportional set size: each resident page divided by the number of processes mapping it
    /// (smaps_rollup `Pss`).
    pub pss: u64,
    /// Unique set size: pages mapped by this process only (`Private_Clean` + `Private_Dirty`).
    pub uss: u64,
    /// Swapped-out anonymous memory (smaps_rollup `Swap`).
    pub swap: u64,
    /// Resident anonymous memory (status `RssAnon`; read at every sample).
    pub anonymous: u64,
    /// Resident file-backed memory (status `RssFile`; read at every sample).
    pub rss_file: u64,
    /// Resident shmem/tmpfs memory (status `RssShmem`; read at every sample).
    pub rss_shmem: u64,
    /// PSS of anonymous pages (smaps_rollup `Pss_Anon`, Linux >= 5.8).
    pub pss_anon: Option<u64>,
    /// PSS of file-backed pages (smaps_rollup `Pss_File`, Linux >= 5.8).
    pub pss_file: Option<u64>,
    /// PSS of shmem/tmpfs pages (smaps_rollup `Pss_Shmem`, Linux >= 5.8).
    pub pss_shmem: Option<u64>,
    /// Resident pages also mapped elsewhere, unmodified (smaps_rollup `Shared_Clean`).
    pub shared_clean: u64,
    /// Resident pages also mapped elsewhere, modified (smaps_rollup `Shared_Dirty`).
    pub shared_dirty: u64,
    /// Virtual size of the address space (status `VmSize`).
    pub vss: u64,
    /// Peak resident set size since start (status `VmHWM`, raised to `rss` when the page walk,
    /// made a moment after the status read, found more).
    pub vm_hwm: u64,
    /// Samples since the smaps_rollup fields (`pss`, `uss`, `swap`, `pss_*`, `shared_*`) were read:
    /// 0 = read in this sample, n = carried forward from the read n samples ago.
    pub pss_age: u32,
}

/// Sums of [`ProcessMemory`] over the processes of one sample. Optional fields are `Some` only when
/// every process had them (they depend on the kernel version, so it is all or none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryTotals {
    /// Number of processes summed.
    pub processes: u32,
    pub rss: u64,
    /// Total PSS: the memory the tree accounts for, shared pages counted once in all.
    pub pss: u64,
    pub uss: u64,
    pub swap: u64,
    pub anonymous: u64,
    pub rss_file: u64,
    pub rss_shmem: u64,
    pub pss_anon: Option<u64>,
    pub pss_file: Option<u64>,
    pub pss_shmem: Option<u64>,
    pub shared_clean: u64,
    pub shared_dirty: u64,
    pub vss: u64,
    /// Sum of each process's own peak RSS: an upper bound of the tree's peak, not the peak itself.
    pub vm_hwm: u64,
}

impl MemoryTotals {
    /// Sums every field over `processes`.
    pub fn sum(processes: &[ProcessMemory]) -> Self {
        let mut t = MemoryTotals {
            processes: u32::try_from(processes.len()).unwrap_or(u32::MAX),
            pss_anon: Some(0),
            pss_file: Some(0),
            pss_shmem: Some(0),
            ..MemoryTotals::default()
        };
        for p in processes {
            t.rss += p.rss;
            t.pss += p.pss;
            t.uss += p.uss;
            t.swap += p.swap;
            t.anonymous += p.anonymous;
            t.rss_file += p.rss_file;
            t.rss_shmem += p.rss_shmem;
            t.pss_anon = t.pss_anon.zip(p.pss_anon).map(|(a, b)| a + b);
            t.pss_file = t.pss_file.zip(p.pss_file).map(|(a, b)| a + b);
            t.pss_shmem = t.pss_shmem.zip(p.pss_shmem).map(|(a, b)| a + b);
            t.shared_clean += p.shared_clean;
            t.shared_dirty += p.shared_dirty;
            t.vss += p.vss;
            t.vm_hwm += p.vm_hwm;
        }
        if processes.is_empty() {
            (t.pss_anon, t.pss_file, t.pss_shmem) = (None, None, None);
        }
        t
    }
}

/// What reading one file of a process gave.
#[derive(Debug)]
pub(crate) enum ReadOutcome<T> {
    Read(T),
    /// Exited between listing and reading, or a zombie / kernel thread without an address space.
    NoMemory,
    /// Permission denied, or another I/O error: counted in the sample, never fatal.
    Unreadable,
}

/// Processes whose /proc files are kept open between samples; beyond that, files are opened and
/// closed per read, so a huge tree cannot exhaust the descriptor limit (two per process).
const MAX_KEPT_OPEN: usize = 128;

/// The two files read per process, kept open across samples (hot path: see `procfile`).
/// status is bound to the process: once it exits (and its pid is reused) it answers ESRCH.
/// smaps_rollup is bound to the address space it was opened on, so it also answers ESRCH after an
/// exec; it is opened at the first full read only. Either is then opened afresh.
/// A process whose main thread has exited is read through a live thread (`crate::exited_leader`):
/// its files are then that thread's, until it exits too.
#[derive(Debug)]
struct OpenFiles {
    status: File,
    rollup: Option<File>,
    through: Option<Through>,
}

/// The live thread a process is read through, and the name of the process (its exited leader's:
/// a thread may have a name of its own).
#[derive(Debug, Clone)]
struct Through {
    tid: u32,
    comm: String,
}

/// Reads processes' memory with buffers and open files reused across calls.
#[derive(Debug, Default)]
pub(crate) struct ProcessReader {
    buf: Vec<u8>,
    path: String,
    open: HashMap<u32, OpenFiles>,
}

/// Why a file could not be read, as the sampler counts it.
enum Skip {
    Gone,
    Unreadable,
}

impl ProcessReader {
    /// Reads /proc/PID/status (cheap: every sample), or a live thread's when the main thread has
    /// exited.
    pub fn read_status(&mut self, pid: u32) -> ReadOutcome<StatusFigures> {
        if let Some(files) = self.open.get(&pid) {
            match reread(&files.status, &mut self.buf).map_err(skip) {
                Ok(()) => match status_outcome(&self.buf) {
                    ReadOutcome::Read(mut status) => {
                        if let Some(through) = &files.through {
                            status.comm.clone_from(&through.comm);
                        }
                        return ReadOutcome::Read(status);
                    }
                    // The leader exited since it was opened: read through a thread, below.
                    ReadOutcome::NoMemory if leader_has_exited(&self.buf) => {
                        self.open.remove(&pid);
                    }
                    outcome => return outcome,
                },
                // Gone (or the thread read through exited), or the pid now belongs to another
                // process: open afresh below.
                Err(Skip::Gone) => {
                    self.open.remove(&pid);
                }
                Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
            }
        }
        let status = match open_proc_file(&mut self.path, pid, None, "status") {
            Ok(file) => file,
            Err(Skip::Gone) => return ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
        };
        let outcome = match reread(&status, &mut self.buf).map_err(skip) {
            Ok(()) => status_outcome(&self.buf),
            Err(Skip::Gone) => ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => ReadOutcome::Unreadable,
        };
        if matches!(outcome, ReadOutcome::NoMemory) && leader_has_exited(&self.buf) {
            return self.read_status_through_thread(pid);
        }
        self.keep(pid, &outcome, status, None);
        outcome
    }

    /// Reads the status of a live thread of process `pid`, whose leader has exited (its status
    /// is in `self.buf`).
    fn read_status_through_thread(&mut self, pid: u32) -> ReadOutcome<StatusFigures> {
        let comm = status_name(&self.buf).unwrap_or_default();
        // No live thread: they all exited since the status read.
        let Some(tid) = live_thread(pid) else {
            return ReadOutcome::NoMemory;
        };
        let status = match open_proc_file(&mut self.path, pid, Some(tid), "status") {
            Ok(file) => file,
            Err(Skip::Gone) => return ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
        };
        let mut outcome = match reread(&status, &mut self.buf).map_err(skip) {
            Ok(()) => status_outcome(&self.buf),
            Err(Skip::Gone) => ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => ReadOutcome::Unreadable,
        };
        if let ReadOutcome::Read(figures) = &mut outcome {
            figures.comm.clone_from(&comm);
        }
        self.keep(pid, &outcome, status, Some(Through { tid, comm }));
        outcome
    }

    /// Keeps a status file that was read open for the next samples.
    fn keep<T>(
        &mut self,
        pid: u32,
        outcome: &ReadOutcome<T>,
        status: File,
        through: Option<Through>,
    ) {
        if matches!(outcome, ReadOutcome::Read(_)) && self.open.len() < MAX_KEPT_OPEN {
            self.open.insert(
                pid,
                OpenFiles {
                    status,
                    rollup: None,
                    through,
                },
            );
        }
    }

    /// Reads /proc/PID/smaps_rollup (costly: see [`RollupFigures`]), through the thread its status
    /// was read through, if any.
    pub fn read_rollup(&mut self, pid: u32) -> ReadOutcome<RollupFigures> {
        let kept = self.open.get(&pid);
        if let Some(rollup) = kept.as_ref().and_then(|f| f.rollup.as_ref()) {
            match reread(rollup, &mut self.buf).map_err(skip) {
                Ok(()) => return rollup_outcome(&self.buf),
                Err(Skip::Gone) => {} // exited, or exec'd since opened: open afresh below
                Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
            }
        }
        let tid = kept.and_then(|f| f.through.as_ref()).map(|t| t.tid);
        let mut opened = self.open_rollup(pid, tid);
        if opened.is_err() && tid.is_none() {
            // The leader has exited (its smaps_rollup fails with ESRCH) since its status was read,
            // or its status was read through a thread but not kept open (MAX_KEPT_OPEN).
            if let Some(thread) = reading_thread(pid) {
                opened = self.open_rollup(pid, Some(thread));
                // Files kept open, if any, are the leader's: the next status read opens afresh.
                self.open.remove(&pid);
            }
        }
        let (outcome, rollup) = match opened {
            Ok(read) => read,
            Err(Skip::Gone) => return ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
        };
        if let Some(files) = self.open.get_mut(&pid) {
            files.rollup = matches!(outcome, ReadOutcome::Read(_)).then_some(rollup);
        }
        outcome
    }

    /// Opens and reads /proc/PID/smaps_rollup, or a thread's (/proc/PID/task/TID/smaps_rollup).
    fn open_rollup(
        &mut self,
        pid: u32,
        tid: Option<u32>,
    ) -> Result<(ReadOutcome<RollupFigures>, File), Skip> {
        let rollup = open_proc_file(&mut self.path, pid, tid, "smaps_rollup")?;
        reread(&rollup, &mut self.buf).map_err(skip)?;
        Ok((rollup_outcome(&self.buf), rollup))
    }

    /// Closes the files of processes for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        self.open.retain(|&pid, _| keep(pid));
    }
}

/// Parses status; a zombie or kernel thread has one, but without Vm* lines: no memory.
fn status_outcome(text: &[u8]) -> ReadOutcome<StatusFigures> {
    let mut s = StatusFigures::default();
    let mut has_mm = false;
    for_each_field(text, |key, value| {
        let field = match key {
            b"Name" => return s.comm = String::from_utf8_lossy(value).into_owned(),
            b"PPid" => {
                return s.ppid = parse_size(value)
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0)
            }
            b"VmSize" => {
                has_mm = true;
                &mut s.vss
            }
            b"VmHWM" => &mut s.vm_hwm,
            b"VmRSS" => &mut s.rss,
            b"RssAnon" => &mut s.anonymous,
            b"RssFile" => &mut s.rss_file,
            b"RssShmem" => &mut s.rss_shmem,
            _ => return,
        };
        *field = parse_size(value).unwrap_or(0);
    });
    if has_mm {
        ReadOutcome::Read(s)
    } else {
        ReadOutcome::NoMemory
    }
}

/// Parses smaps_rollup; empty when the address space went away (exit) after the status read.
fn rollup_outcome(text: &[u8]) -> ReadOutcome<RollupFigures> {
    if text.is_empty() {
        return ReadOutcome::NoMemory;
    }
    let mut r = RollupFigures::default();
    let (mut private_clean, mut private_dirty) = (0, 0);
    for_each_field(text, |key, value| {
        let field = match key {
            b"Rss" => &mut r.rss,
            b"Pss" => &mut r.pss,
            b"Swap" => &mut r.swap,
            b"Shared_Clean" => &mut r.shared_clean,
            b"Shared_Dirty" => &mut r.shared_dirty,
            b"Private_Clean" => &mut private_clean,
            b"Private_Dirty" => &mut private_dirty,
            b"Pss_Anon" => return r.pss_anon = parse_size(value),
            b"Pss_File" => return r.pss_file = parse_size(value),
            b"Pss_Shmem" => return r.pss_shmem = parse_size(value),
            _ => return,
        };
        *field = parse_size(value).unwrap_or(0);
    });
    r.uss = private_clean + private_dirty;
    ReadOutcome::Read(r)
}

/// Opens /proc/PID/NAME, or /proc/PID/task/TID/NAME to read through thread `tid`.
fn open_proc_file(path: &mut String, pid: u32, tid: Option<u32>, name: &str) -> Result<File, Skip> {
    path.clear();
    let _ = match tid {
        Some(tid) => write!(path, "/proc/{pid}/task/{tid}/{name}"),
        None => write!(path, "/proc/{pid}/{name}"),
    };
    File::open(Path::new(path)).map_err(skip)
}

/// ENOENT: gone before open; ESRCH: gone (or zombie, or exec'd) after open. Anything else
/// (EACCES for another user's or a setuid process) makes the process unreadable.
fn skip(e: io::Error) -> Skip {
    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        Skip::Gone
    } else {
        Skip::Unreadable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that read this process's own memory run one at a time: one of them grows the
    /// heap by 32 MiB, which breaks the other's rss ~ uss + shared identity when it lands
    /// between its two reads (seen once in a full workspace run).
    static OWN_MEMORY: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn read_self(reader: &mut ProcessReader) -> (StatusFigures, RollupFigures) {
        let me = std::process::id();
        let ReadOutcome::Read(status) = reader.read_status(me) else {
            panic!("cannot read our own status");
        };
        let ReadOutcome::Read(rollup) = reader.read_rollup(me) else {
            panic!("cannot read our own smaps_rollup");
        };
        (status, rollup)
    }

    #[test]
    fn reads_own_process() {
        let _serial = OWN_MEMORY.lock().unwrap_or_else(|e| e.into_inner());
        let mut reader = ProcessReader::default();
        let (s, r) = read_self(&mut reader);
        let m = ProcessMemory::new(std::process::id(), s, r, 0);
        assert_eq!(m.ppid, std::os::unix::process::parent_id());
        assert!(m.rss > 0);
        assert_eq!(m.rss % 1024, 0);
        assert_eq!(m.rss, m.anonymous + m.rss_file + m.rss_shmem);
        assert!(m.pss > 0 && m.uss > 0 && m.uss <= m.pss);
        // rss (status counters) and the rollup fields (page walk) are read a moment apart, while
        // other test threads allocate: the identity rss = uss + shared holds only roughly.
        let walked = m.uss + m.shared_clean + m.shared_dirty;
        assert!(m.rss.abs_diff(walked) <= m.rss / 8, "{m:?}");
        assert!(m.vss >= m.rss);
        assert!(m.vm_hwm > 0);
    }

    #[test]
    fn kept_files_show_fresh_figures() {
        let _serial = OWN_MEMORY.lock().unwrap_or_else(|e| e.into_inner());
        const GROWTH: usize = 32 << 20;
        let mut reader = ProcessReader::default();
        let (before, before_rollup) = read_self(&mut reader);
        let me = std::process::id();
        assert!(reader.open.get(&me).is_some_and(|f| f.rollup.is_some()));
        let mut block = vec![0u8; GROWTH];
        for i in (0..GROWTH).step_by(4096) {
            block[i] = 1;
        }
        let (after, after_rollup) = read_self(&mut reader);
        std::hint::black_box(&block);
        // Other tests run in parallel threads and may free memory meanwhile: allow a margin.
        assert!(
            after.anonymous >= before.anonymous + GROWTH as u64 / 2,
            "{before:?} {after:?}"
        );
        assert!(
            after_rollup.uss >= before_rollup.uss + GROWTH as u64 / 2,
            "{before_rollup:?} {after_rollup:?}"
        );
        reader.retain(|_| false);
        assert!(reader.open.is_empty());
    }

    #[test]
    fn vanished_pid_is_no_memory() {
        // pid_max is at most 2^22, so this pid cannot exist.
        let mut reader = ProcessReader::default();
        assert!(matches!(
            reader.read_status(u32::MAX - 1),
            ReadOutcome::NoMemory
        ));
        assert!(matches!(
            reader.read_rollup(u32::MAX - 1),
            ReadOutcome::NoMemory
        ));
    }

    #[test]
    fn totals_sum_every_field() {
        let p = |pid, pss_anon| ProcessMemory {
            pid,
            ppid: 1,
            comm: "x".into(),
            rss: 10,
            pss: 5,
            uss: 3,
            swap: 1,
            anonymous: 4,
            rss_file: 5,
            rss_shmem: 1,
            pss_anon,
            pss_file: Some(2),
            pss_shmem: Some(0),
            shared_clean: 6,
            shared_dirty: 1,
            vss: 100,
            vm_hwm: 12,
            pss_age: 3,
        };
        let t = MemoryTotals::sum(&[p(1, Some(3)), p(2, Some(4))]);
        assert_eq!(t.processes, 2);
        assert_eq!(
            (t.rss, t.pss, t.uss, t.swap, t.anonymous),
            (20, 10, 6, 2, 8)
        );
        assert_eq!((t.rss_file, t.rss_shmem), (10, 2));
        assert_eq!(
            (t.pss_anon, t.pss_file, t.pss_shmem),
            (Some(7), Some(4), Some(0))
        );
        assert_eq!(
            (t.shared_clean, t.shared_dirty, t.vss, t.vm_hwm),
            (12, 2, 200, 24)
        );
        assert_eq!(
            MemoryTotals::sum(&[p(1, Some(3)), p(2, None)]).pss_anon,
            None
        );
        assert_eq!(MemoryTotals::sum(&[]).pss_anon, None);
    }
}
