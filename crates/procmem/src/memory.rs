//! Memory figures of one process, read from /proc/PID/status and /proc/PID/smaps_rollup, and their sums.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::path::Path;

use serde::Serialize;

use hashbrown::HashMap;

use crate::procfile::{for_each_field, parse_size, reread};

/// Memory of one process at one instant. Every size is in bytes. See docs/memory-metrics.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessMemory {
    pub pid: u32,
    pub ppid: u32,
    /// Command name (status `Name`, at most 15 bytes, as the kernel escapes it).
    pub comm: String,
    /// Resident set size (smaps_rollup `Rss`).
    pub rss: u64,
    /// Proportional set size: each resident page divided by the number of processes mapping it
    /// (smaps_rollup `Pss`).
    pub pss: u64,
    /// Unique set size: pages mapped by this process only (`Private_Clean` + `Private_Dirty`).
    pub uss: u64,
    /// Swapped-out anonymous memory (smaps_rollup `Swap`).
    pub swap: u64,
    /// Resident anonymous memory (smaps_rollup `Anonymous`).
    pub anonymous: u64,
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
    /// Peak resident set size since start (status `VmHWM`).
    pub vm_hwm: u64,
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

/// What reading one process gave.
#[derive(Debug)]
pub(crate) enum ReadOutcome {
    Read(ProcessMemory),
    /// Exited between listing and reading, or a zombie / kernel thread without an address space.
    NoMemory,
    /// Permission denied, or another I/O error: counted in the sample, never fatal.
    Unreadable,
}

/// Processes whose /proc files are kept open between samples; beyond that, files are opened and
/// closed per sample, so a huge tree cannot exhaust the descriptor limit (two per process).
const MAX_KEPT_OPEN: usize = 128;

/// The two files read per process, kept open across samples (hot path: see `procfile`).
/// An open smaps_rollup stays bound to the address space it was opened on: after the process
/// execs or exits (and its pid is reused) it answers ESRCH, and the files are opened afresh.
#[derive(Debug)]
struct OpenFiles {
    status: File,
    rollup: File,
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
    pub fn read(&mut self, pid: u32) -> ReadOutcome {
        if let Some(files) = self.open.remove(&pid) {
            match self.read_with(pid, &files) {
                Ok(Some(m)) => {
                    self.open.insert(pid, files);
                    return ReadOutcome::Read(m);
                }
                // Gone, zombie, or exec'd since opened: try afresh below.
                Ok(None) | Err(Skip::Gone) => {}
                Err(Skip::Unreadable) => return ReadOutcome::Unreadable,
            }
        }
        let files = match (
            self.open_file(pid, "status"),
            self.open_file(pid, "smaps_rollup"),
        ) {
            (Ok(status), Ok(rollup)) => OpenFiles { status, rollup },
            (Err(Skip::Unreadable), _) | (_, Err(Skip::Unreadable)) => {
                return ReadOutcome::Unreadable
            }
            _ => return ReadOutcome::NoMemory,
        };
        match self.read_with(pid, &files) {
            Ok(Some(m)) => {
                if self.open.len() < MAX_KEPT_OPEN {
                    self.open.insert(pid, files);
                }
                ReadOutcome::Read(m)
            }
            Ok(None) | Err(Skip::Gone) => ReadOutcome::NoMemory,
            Err(Skip::Unreadable) => ReadOutcome::Unreadable,
        }
    }

    /// Closes the files of processes no longer in `members` (sorted).
    pub fn retain(&mut self, members: &[u32]) {
        self.open
            .retain(|pid, _| members.binary_search(pid).is_ok());
    }

    /// Reads status then smaps_rollup; `Ok(None)` for a process without an address space (zombie).
    fn read_with(&mut self, pid: u32, files: &OpenFiles) -> Result<Option<ProcessMemory>, Skip> {
        let mut m = ProcessMemory {
            pid,
            ppid: 0,
            comm: String::new(),
            rss: 0,
            pss: 0,
            uss: 0,
            swap: 0,
            anonymous: 0,
            pss_anon: None,
            pss_file: None,
            pss_shmem: None,
            shared_clean: 0,
            shared_dirty: 0,
            vss: 0,
            vm_hwm: 0,
        };

        // status first: a zombie still has one, but without Vm* lines.
        reread(&files.status, &mut self.buf).map_err(skip)?;
        let mut has_mm = false;
        for_each_field(&self.buf, |key, value| match key {
            b"Name" => m.comm = String::from_utf8_lossy(value).into_owned(),
            b"PPid" => {
                m.ppid = parse_size(value)
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0)
            }
            b"VmSize" => {
                has_mm = true;
                m.vss = parse_size(value).unwrap_or(0);
            }
            b"VmHWM" => m.vm_hwm = parse_size(value).unwrap_or(0),
            _ => {}
        });
        if !has_mm {
            return Ok(None);
        }

        reread(&files.rollup, &mut self.buf).map_err(skip)?;
        if self.buf.is_empty() {
            return Ok(None); // the address space went away between the two reads
        }
        let (mut private_clean, mut private_dirty) = (0, 0);
        for_each_field(&self.buf, |key, value| {
            let field = match key {
                b"Rss" => &mut m.rss,
                b"Pss" => &mut m.pss,
                b"Swap" => &mut m.swap,
                b"Anonymous" => &mut m.anonymous,
                b"Shared_Clean" => &mut m.shared_clean,
                b"Shared_Dirty" => &mut m.shared_dirty,
                b"Private_Clean" => &mut private_clean,
                b"Private_Dirty" => &mut private_dirty,
                b"Pss_Anon" => return m.pss_anon = parse_size(value),
                b"Pss_File" => return m.pss_file = parse_size(value),
                b"Pss_Shmem" => return m.pss_shmem = parse_size(value),
                _ => return,
            };
            *field = parse_size(value).unwrap_or(0);
        });
        m.uss = private_clean + private_dirty;
        Ok(Some(m))
    }

    fn open_file(&mut self, pid: u32, name: &str) -> Result<File, Skip> {
        self.path.clear();
        let _ = write!(self.path, "/proc/{pid}/{name}");
        File::open(Path::new(&self.path)).map_err(skip)
    }
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

    #[test]
    fn reads_own_process() {
        let mut reader = ProcessReader::default();
        let me = std::process::id();
        let ReadOutcome::Read(m) = reader.read(me) else {
            panic!("cannot read our own memory");
        };
        assert_eq!(m.pid, me);
        assert_eq!(m.ppid, std::os::unix::process::parent_id());
        assert!(m.rss > 0 && m.rss % 1024 == 0);
        assert!(m.pss > 0 && m.pss <= m.rss);
        assert!(m.uss <= m.pss && m.uss > 0);
        assert_eq!(m.rss, m.uss + m.shared_clean + m.shared_dirty);
        assert!(m.vss >= m.rss);
        assert!(m.vm_hwm > 0);
    }

    #[test]
    fn kept_files_show_fresh_figures() {
        const GROWTH: usize = 32 << 20;
        let mut reader = ProcessReader::default();
        let me = std::process::id();
        let ReadOutcome::Read(before) = reader.read(me) else {
            panic!("cannot read our own memory");
        };
        assert!(reader.open.contains_key(&me));
        let mut block = vec![0u8; GROWTH];
        for i in (0..GROWTH).step_by(4096) {
            block[i] = 1;
        }
        let ReadOutcome::Read(after) = reader.read(me) else {
            panic!("cannot read our own memory");
        };
        std::hint::black_box(&block);
        // Other tests run in parallel threads and may free memory meanwhile: allow a margin.
        assert!(
            after.anonymous >= before.anonymous + GROWTH as u64 / 2,
            "{before:?} {after:?}"
        );
        reader.retain(&[]);
        assert!(reader.open.is_empty());
    }

    #[test]
    fn vanished_pid_is_no_memory() {
        // pid_max is at most 2^22, so this pid cannot exist.
        let mut reader = ProcessReader::default();
        assert!(matches!(reader.read(u32::MAX - 1), ReadOutcome::NoMemory));
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
            pss_anon,
            pss_file: Some(2),
            pss_shmem: Some(0),
            shared_clean: 6,
            shared_dirty: 1,
            vss: 100,
            vm_hwm: 12,
        };
        let t = MemoryTotals::sum(&[p(1, Some(3)), p(2, Some(4))]);
        assert_eq!(t.processes, 2);
        assert_eq!(
            (t.rss, t.pss, t.uss, t.swap, t.anonymous),
            (20, 10, 6, 2, 8)
        );
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
