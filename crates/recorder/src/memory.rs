//! The traced images' memory over time: a thread of the recorder (not the shim: the program pays
//! nothing) reads each image's `/proc/PID/statm` and `/proc/PID/smaps` and places every reading
//! on the image's seq axis, from its counter read just before and just after
//! (docs/trace-format.md, "Memory samples"). The server writes the samples into MEMORY chunks.
//!
//! Two rates, because the two reads cost very differently: statm is a few counters (microseconds),
//! smaps walks every page table of the process (about 20 ms for a 330 MB python3 here). statm is
//! read every `interval / 5`, and a reading kept only when RSS or anonymous memory moved (a
//! peak between two smaps reads is seen); smaps (the heap split and PSS) every `interval`. Each
//! rate stretches so that its reads take at most 1/`COST_SHARE` of the thread's time: the
//! recorder spends at most about 5 % of a core on this, whatever the program's size or count.
//!
//! For a trace with addresses, each smaps reading is followed by a reading of which pages of the
//! heap's mappings are resident (`procmem::ResidencyReader`, RESIDENCY chunks): with the events'
//! addresses, `analyze --residency` tells which blocks and sites hold the resident pages. Without
//! addresses the blocks' places are unknown, so the reading would say nothing. Its cost is
//! counted with smaps's, so the smaps rate stretches to keep both within their share.
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use trace::{MemorySample, Residency, ResidentMapping};

use crate::sys::{self, Mapping};

/// Each kind of read may take one part in `COST_SHARE` of the time (2.5 % each).
const COST_SHARE: u64 = 40;
/// A statm reading is kept when RSS or anonymous memory moved by this fraction (1/64) of the last
/// kept one's, or by `MIN_MOVE` bytes, whichever is more.
const MOVE_SHIFT: u32 = 6;
const MIN_MOVE: u64 = 256 << 10;

/// An image to sample.
#[derive(Clone)]
struct Target {
    stream: u32,
    pid: u32,
    /// The image's clock origin (the shim's monotonic time at its hello).
    mono0: u64,
    /// The shared page holding the image's seq counter.
    page: Arc<Mapping>,
}

#[derive(Default)]
struct State {
    targets: Vec<Target>,
    /// Samples taken and not yet taken by the server, in the order taken, each with its heap
    /// residency when it was read.
    samples: Vec<(u32, MemorySample, Option<Residency>)>,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The sampling thread and what it shares with the server.
pub struct MemorySampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl MemorySampler {
    /// Starts the thread: smaps every `interval` (and heap residency with `residency`), statm
    /// five times as often.
    pub fn start(interval: Duration, residency: bool) -> std::io::Result<MemorySampler> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("alloclens-memory".into())
            .spawn(move || sample_loop(&s, interval, residency))?;
        Ok(MemorySampler {
            shared,
            thread: Some(thread),
        })
    }

    /// Samples image `stream` (process `pid`) from now on, a first reading at once.
    pub fn watch(&self, stream: u32, pid: u32, mono0: u64, page: Arc<Mapping>) {
        lock(&self.shared).targets.push(Target {
            stream,
            pid,
            mono0,
            page,
        });
        self.shared.wake.notify_all();
    }

    /// Stops sampling `stream` (it ended, or its process exec'd or hung up): no sample of it is
    /// added after this returns.
    pub fn unwatch(&self, stream: u32) {
        lock(&self.shared).targets.retain(|t| t.stream != stream);
    }

    /// The samples taken so far (of `stream` only, with `Some`), grouped by stream, each group
    /// in the order taken.
    pub fn take(&self, stream: Option<u32>) -> Vec<Taken> {
        let taken: Vec<(u32, MemorySample, Option<Residency>)> = {
            let mut state = lock(&self.shared);
            match stream {
                None => std::mem::take(&mut state.samples),
                Some(s) => {
                    let (mine, rest) = std::mem::take(&mut state.samples)
                        .into_iter()
                        .partition(|(t, _, _)| *t == s);
                    state.samples = rest;
                    mine
                }
            }
        };
        let mut groups: Vec<Taken> = Vec::new();
        for (stream, sample, residency) in taken {
            let i = match groups.iter().position(|g| g.stream == stream) {
                Some(i) => i,
                None => {
                    groups.push(Taken {
                        stream,
                        samples: Vec::new(),
                        residency: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            groups[i].samples.push(sample);
            groups[i].residency.extend(residency);
        }
        groups
    }

    /// Stops the thread (samples already taken stay for `take`).
    pub fn stop(&mut self) {
        lock(&self.shared).stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MemorySampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One stream's samples and heap residency readings, in the order taken.
pub struct Taken {
    pub stream: u32,
    pub samples: Vec<MemorySample>,
    pub residency: Vec<Residency>,
}

/// What the thread remembers of one image between passes.
#[derive(Default)]
struct Progress {
    /// When smaps was last read (monotonic ns), and how long that took.
    smaps_at: Option<u64>,
    smaps_cost: u64,
    /// (rss, anon) of the last sample kept.
    kept: Option<(u64, u64)>,
}

fn sample_loop(shared: &Shared, interval: Duration, residency: bool) {
    // At the drain thread's priority, unlike the compressors: its cost is bounded by
    // `COST_SHARE`, and at nice 10 on a loaded machine (load 20 on 2 cores) it read a program
    // holding 24 MiB twice in a second, missing the top.
    let interval_ns = (interval.as_nanos() as u64).max(1_000_000);
    let tick_ns = interval_ns / 5;
    let page_size = sys::page_size();
    let mut progress: HashMap<u32, Progress> = HashMap::new();
    let mut pages = residency.then(procmem::ResidencyReader::new);
    loop {
        let targets = {
            let state = lock(shared);
            if state.stop {
                return;
            }
            state.targets.clone()
        };
        progress.retain(|stream, _| targets.iter().any(|t| t.stream == *stream));
        let mut statm_cost = 0u64;
        for t in &targets {
            let p = progress.entry(t.stream).or_default();
            let now = sys::monotonic_ns();
            let smaps_due = p.smaps_at.is_none_or(|at| {
                now.saturating_sub(at) >= interval_ns.max(p.smaps_cost * COST_SHARE)
            });
            // The cost is this thread's CPU time: on a loaded machine the wall time of a read
            // also counts the waits for a core, which cost the program nothing.
            let cpu = cpu_ns();
            let heap_pages = pages.as_mut().filter(|_| smaps_due);
            let Some((sample, heap_pages)) = read(t, smaps_due, heap_pages, page_size) else {
                continue; // gone (or a zombie): the server will unwatch it
            };
            let took = cpu_ns().saturating_sub(cpu);
            if smaps_due {
                p.smaps_at = Some(now);
                p.smaps_cost = took;
            } else {
                statm_cost += took;
                if p.kept
                    .is_some_and(|(rss, anon)| !moved(rss, sample.rss) && !moved(anon, sample.anon))
                {
                    continue;
                }
            }
            p.kept = Some((sample.rss, sample.anon));
            let mut state = lock(shared);
            // Not if the server stopped watching it meanwhile (its stream may have ended).
            if state.targets.iter().any(|w| w.stream == t.stream) {
                state.samples.push((t.stream, sample, heap_pages));
            }
        }
        let pause = tick_ns.max(statm_cost * COST_SHARE);
        let state = lock(shared);
        if state.stop {
            return;
        }
        // Woken early by `watch` (a new image's first reading) or `stop`.
        let known = state.targets.len() == targets.len()
            && state
                .targets
                .iter()
                .all(|t| progress.contains_key(&t.stream));
        if known {
            let _ = shared
                .wake
                .wait_timeout(state, Duration::from_nanos(pause))
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn cpu_ns() -> u64 {
    procmem::thread_cpu_time().as_nanos() as u64
}

fn moved(kept: u64, now: u64) -> bool {
    kept.abs_diff(now) >= (kept >> MOVE_SHIFT).max(MIN_MOVE)
}

/// One reading of image `t`: statm, and smaps too with `smaps`, then its heap residency with
/// `pages`, between two reads of its counter. `None` when the process is gone or has exited.
fn read(
    t: &Target,
    smaps: bool,
    pages: Option<&mut procmem::ResidencyReader>,
    page_size: u64,
) -> Option<(MemorySample, Option<Residency>)> {
    let seq = t.page.atomic_u64(crate::protocol::PAGE_COUNTER_OFFSET);
    let seq0 = seq.load(std::sync::atomic::Ordering::Acquire);
    let t_ns = sys::monotonic_ns().saturating_sub(t.mono0);
    let (resident, shared) = read_statm(t.pid)?;
    if resident == 0 {
        return None; // a zombie: its memory is gone, its figures read 0
    }
    let mut sample = MemorySample {
        seq: seq0,
        seq_end: seq0,
        t_ns,
        rss: resident * page_size,
        anon: resident.saturating_sub(shared) * page_size,
        pss: None,
        heap: None,
        file: None,
        stack: None,
    };
    if smaps {
        // Exact figures, all from the one walk (statm's counters lag by megabytes under growth).
        let r = procmem::smaps_reading(t.pid)
            .ok()
            .filter(|r| r.split.rss() > 0)?;
        sample.rss = r.split.rss();
        sample.anon = r.anonymous;
        sample.pss = r.pss;
        sample.heap = Some(r.split.heap);
        sample.file = Some(r.split.file);
        sample.stack = Some(r.split.stack);
    }
    let residency = pages.and_then(|reader| read_residency(reader, t.pid, seq0, t_ns));
    sample.seq_end = seq.load(std::sync::atomic::Ordering::Acquire).max(seq0);
    Some((sample, residency))
}

/// Which pages of process `pid`'s heap are resident, as the reading of the sample at `seq` and
/// `t_ns`.
/// `None` when the process is gone.
fn read_residency(
    reader: &mut procmem::ResidencyReader,
    pid: u32,
    seq: u64,
    t_ns: u64,
) -> Option<Residency> {
    let heap = reader.read(pid).ok()?;
    Some(Residency {
        seq,
        t_ns,
        page_size: heap.page_size,
        mappings: heap
            .mappings
            .into_iter()
            .map(|m| ResidentMapping {
                start: m.start,
                end: m.end,
                runs: m.runs,
            })
            .collect(),
    })
}

/// Resident and shared (file and shared-memory) pages from `/proc/PID/statm`.
fn read_statm(pid: u32) -> Option<(u64, u64)> {
    let read = |path: &std::path::Path| -> Option<(u64, u64)> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut fields = text.split_ascii_whitespace().skip(1);
        let resident = fields.next()?.parse().ok()?;
        let shared = fields.next()?.parse().ok()?;
        Some((resident, shared))
    };
    let statm = read(format!("/proc/{pid}/statm").as_ref())?;
    if statm.0 > 0 {
        return Some(statm);
    }
    // A zombie, or a process whose main thread has exited (pthread_exit) while others run on:
    // the latter is read through a live thread.
    read(&procmem::process_dir(pid).join("statm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statm_of_this_process_is_plausible() {
        let (resident, shared) = read_statm(std::process::id()).unwrap();
        assert!(resident > 0 && shared <= resident, "{resident} {shared}");
        assert!(read_statm(u32::MAX - 1).is_none());
    }

    #[test]
    fn small_moves_are_not_kept() {
        let mb = 1u64 << 20;
        assert!(!moved(100 * mb, 100 * mb + mb));
        assert!(moved(100 * mb, 102 * mb));
        assert!(!moved(mb, mb + 100_000));
        assert!(moved(mb, mb + 300_000));
    }
}
