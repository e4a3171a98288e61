//! Shared by the recorder's integration tests: the test programs, recording them and reading the
//! trace back.
#![allow(dead_code)]
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use trace::{EndReason, Event, Marker, Op, ProcessInfo, Record, TraceReader};

pub struct Programs {
    /// Where the tests write their traces.
    pub dir: tempfile::TempDir,
    pub traced: PathBuf,
    pub plugin: PathBuf,
    pub newdelete: PathBuf,
    /// testkit's counter.c: counts each thread's calls independently of the shim.
    pub counter: PathBuf,
    /// testkit's sigsafe.c: an allocator a signal handler may call (glibc's may deadlock there).
    pub sigsafe: PathBuf,
    /// testkit's sites.c: known call sites for `--stacks`.
    pub sites: PathBuf,
}

/// The test programs (testkit's, built once) and a folder for the traces.
pub fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        let built = |name: &str| testkit::program(name).to_path_buf();
        Programs {
            sigsafe: built("sigsafe.so"),
            sites: built("sites"),
            counter: built("counter.so"),
            traced: built("traced"),
            plugin: built("plugin.so"),
            newdelete: built("newdelete"),
            dir: tempfile::tempdir().unwrap(),
        }
    })
}

/// One process image read back from a trace.
pub struct Image {
    pub info: ProcessInfo,
    pub end: Option<EndReason>,
    pub records: Vec<Record>,
}

impl Image {
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.records.iter().filter_map(|r| {
            if let Record::Event(e) = r {
                Some(e)
            } else {
                None
            }
        })
    }

    pub fn markers(&self) -> Vec<&Marker> {
        self.records
            .iter()
            .filter_map(|r| {
                if let Record::Marker(m) = r {
                    Some(&**m)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Allocations of exactly `size` bytes by `op`.
    pub fn count(&self, op: Op, size: u64) -> usize {
        self.events()
            .filter(|e| e.op == op && e.size == size)
            .count()
    }

    /// Frees of blocks that were allocated with `size` bytes in this image.
    pub fn frees_of(&self, size: u64) -> usize {
        let mut live: HashMap<u64, u64> = HashMap::new();
        let mut n = 0;
        for e in self.events() {
            if e.op.is_free() {
                if live.remove(&e.addr) == Some(size) {
                    n += 1;
                }
            } else {
                if e.op.is_realloc() {
                    live.remove(&e.old_addr);
                }
                if e.addr != 0 {
                    live.insert(e.addr, e.size);
                }
            }
        }
        n
    }
}

/// What testkit's counter.c wrote: tid -> (calls, free(NULL) calls).
pub fn counted(path: &Path) -> HashMap<u32, (u64, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[0] as u32, (v[1], v[2]))
        })
        .collect()
}

/// Calls and free(NULL) calls of each thread in a trace.
pub fn calls_by_tid(img: &Image) -> HashMap<u32, (u64, u64)> {
    let mut out: HashMap<u32, (u64, u64)> = HashMap::new();
    for e in img.events() {
        let c = out.entry(e.tid).or_default();
        c.0 += 1;
        c.1 += u64::from(e.op == Op::Free && e.addr == 0);
    }
    out
}

pub fn read_trace(path: &Path) -> Vec<Image> {
    let mut reader = TraceReader::open(path).unwrap();
    assert!(reader.damage().is_none(), "{:?}", reader.damage());
    let mut out = Vec::new();
    for s in 0..reader.streams().len() {
        let stream = reader.streams()[s].clone();
        let records = reader
            .records(s)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(records.len() as u64, stream.records);
        out.push(Image {
            info: stream.info,
            end: stream.end,
            records,
        });
    }
    out
}

pub fn record(
    args: &[&str],
    configure: impl FnOnce(&mut recorder::RecordOptions),
) -> (recorder::RecordSummary, Vec<Image>) {
    let out = programs().dir.path().join(format!(
        "t-{}.alt",
        std::process::id() as u64 * 1000 + next_id()
    ));
    let mut command: Vec<OsString> = vec![programs().traced.clone().into()];
    command.extend(args.iter().map(OsString::from));
    let mut o = recorder::RecordOptions::new(command, out.clone());
    o.linger = std::time::Duration::from_secs(5);
    // Real pointers: `check_order` verifies that no address is handed out again before its free.
    o.addresses = true;
    configure(&mut o);
    let summary = recorder::record(&o).unwrap();
    let images = read_trace(&out);
    (summary, images)
}

fn next_id() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Invariants every recorded stream keeps: seqs strictly increase, and no address is handed out
/// again while the trace still has it live (a free recorded after the reuse would break the
/// causal order). Checked for the test programs' own blocks (sizes 1000..3000).
pub fn check_order(img: &Image) {
    let mut last: Option<u64> = None;
    let mut live: HashMap<u64, u64> = HashMap::new();
    for e in img.events() {
        assert!(
            last.is_none_or(|l| e.seq > l),
            "seq {} after {:?} in pid {}",
            e.seq,
            last,
            img.info.pid
        );
        last = Some(e.seq);
        if e.op.is_free() {
            live.remove(&e.addr);
            continue;
        }
        if e.op.is_realloc() {
            live.remove(&e.old_addr);
        }
        if e.addr != 0 {
            if let Some(size) = live.insert(e.addr, e.size) {
                assert!(
                    !(1000..3000).contains(&size),
                    "pid {}: {:#x} ({size} bytes) reused at seq {} before its free",
                    img.info.pid,
                    e.addr,
                    e.seq
                );
            }
        }
    }
}
