//! The recorder's other threads: a pool of compressor threads turns sealed chunks (batches) into
//! zstd-compressed events chunks, and one writer thread writes every job to the file in the
//! order the server issued it.
//!
//! The drain thread encodes as it merges (`batch::ChunkBuilder`); zstd, a stronger level for
//! streams that compress well, and the writes run on the other threads.
//!
//! Order: the server numbers every job (process begin, events, end, note, flush, finish). Events
//! jobs go through the compressor queue, the others straight to the writer; the writer holds
//! early arrivals in a small reorder buffer and writes job `n` only after `n - 1`.
//!
//! Memory and back-pressure: the server issues job `n` only once the writer has written job
//! `n - limit`, so at most `limit` batches are anywhere in the pipeline. When the compressors or
//! the disk fall behind, the server waits and the rings fill, which is the back-pressure the
//! shim already handles. Chunk buffers are recycled.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use trace::{EncodedChunk, EndReason, ProcessInfo, TraceWriter, Trailer};

use crate::batch::Batch;
use crate::sys;

/// Unbuffered: a write that fails is seen with the chunk it failed on (`Output::handle`).
pub type FileWriter = TraceWriter<File>;

/// Streams a compressor thread remembers the last ratio of.
const REMEMBERED_STREAMS: usize = 8;

/// The zstd level for chunks of a stream whose last chunk compressed `STRONG_RATIO` times or
/// better, when no batch is waiting for a compressor. Real programs repeat their allocation
/// patterns (cc1's chunks compress 15-fold at the base level, python3's 20-fold) and leave the
/// compressors idle most of the time; there a stronger level pays. Re-encoding the bench/ traces
/// (chunks of 2^18 records): cc1 0.110 B/event at level 1, 0.078 at 9, 0.072 at 12; python3 0.113, 0.093, 0.090; the
/// whole trace's encoding took 2.0x (cc1) and 2.3x (python3) the time at 9, 2.3x and 3.6x at 12
/// (for cc1, 0.33 s over a run of several seconds, on the core the program leaves free).
/// An allocation-bound program's chunks compress 3-fold (nothing for a stronger level to find:
/// alloc-micro 1.198 at 1, 1.189 at 9) and keep the base level, as does any chunk while the
/// compressors are behind.
const STRONG_LEVEL: i32 = 12;
const STRONG_RATIO: usize = 8;

enum Job {
    Process(ProcessInfo),
    /// Stream, chunk, events among its records.
    Events(u32, EncodedChunk, u32),
    /// Compression failed: like a write error, writing stops.
    Failed(String),
    End(u32, EndReason, u64),
    Note(String),
    Untraced(trace::Untraced),
    Leaks(trace::Leaks),
    /// A STACKS chunk's payload.
    Stacks(Vec<u8>),
    Modules(Vec<trace::Module>),
    /// A MEMORY chunk: a stream's memory samples.
    Memory(u32, Vec<trace::MemorySample>),
    Residency(u32, Vec<trace::Residency>),
    Flush,
    Finish(Trailer),
}

/// What the writer thread reports when it stops.
pub struct Finished {
    pub bytes: u64,
    /// The first write error, if any (nothing was written after it).
    pub error: Option<String>,
    /// Events written, per stream (in the file, whatever happened after).
    pub events: Vec<u64>,
}

/// State shared between the server and the writer thread.
#[derive(Default)]
struct Shared {
    /// Batches queued for the compressors and not taken yet.
    queued: AtomicUsize,
    /// Jobs written (or skipped after a failure).
    written: Mutex<u64>,
    progress: Condvar,
    /// The first write error, taken once by `failure`.
    error: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The server's side; stream ids are assigned here, in the order `begin_process` is called
/// (the same order the writer assigns them in).
pub struct Pipeline {
    compress_tx: Option<Sender<(u64, Batch)>>,
    write_tx: Option<Sender<(u64, Job)>>,
    /// Buffers of compressed batches, to seal chunks into again.
    returned: Receiver<Vec<u8>>,
    compressors: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<Finished>>,
    shared: Arc<Shared>,
    next_job: u64,
    /// Jobs issued but not yet written, at most.
    limit: u64,
    next_stream: u32,
    /// Codes STACKS chunks against the stacks written before (on the drain thread).
    stack_encoder: trace::StackEncoder,
}

impl Pipeline {
    /// Starts the writer and `available_parallelism` (at least 2) compressor threads.
    pub fn start(
        writer: FileWriter,
        level: i32,
        progress: Option<Arc<crate::RecordProgress>>,
    ) -> std::io::Result<Pipeline> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let shared = Arc::new(Shared::default());
        let (write_tx, write_rx) = channel();
        let (compress_tx, compress_rx) = channel();
        let (returned_tx, returned) = channel();
        let queue = Arc::new(Mutex::new(compress_rx));
        let s = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("alloclens-writer".into())
            .spawn(move || write_loop(writer, write_rx, &s, progress))?;
        let mut compressors = Vec::with_capacity(threads);
        for i in 0..threads {
            let (queue, out, back) = (Arc::clone(&queue), write_tx.clone(), returned_tx.clone());
            let s = Arc::clone(&shared);
            compressors.push(
                std::thread::Builder::new()
                    .name(format!("alloclens-zstd{i}"))
                    .spawn(move || compress_loop(&queue, &out, &back, &s, level))?,
            );
        }
        Ok(Pipeline {
            compress_tx: Some(compress_tx),
            write_tx: Some(write_tx),
            returned,
            compressors,
            writer: Some(writer),
            shared,
            next_job: 0,
            limit: 2 * threads as u64,
            next_stream: 0,
            stack_encoder: trace::StackEncoder::new(),
        })
    }

    /// The next job number, once the writer is less than `limit` jobs behind; `None` when the
    /// threads are gone.
    fn issue(&mut self) -> Option<u64> {
        self.write_tx.as_ref()?;
        let n = self.next_job;
        let shared = Arc::clone(&self.shared);
        let mut written = lock(&shared.written);
        while n >= *written + self.limit {
            written = shared
                .progress
                .wait_timeout(written, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            let writer_gone = self.writer.as_ref().is_none_or(JoinHandle::is_finished);
            if writer_gone || self.compressors.iter().all(JoinHandle::is_finished) {
                self.stop(); // a thread panicked: `failure` reports it
                return None;
            }
        }
        self.next_job += 1;
        Some(n)
    }

    fn stop(&mut self) {
        self.write_tx = None;
        self.compress_tx = None;
    }

    fn send(&mut self, job: Job) {
        let Some(n) = self.issue() else { return };
        if let Some(tx) = &self.write_tx {
            if tx.send((n, job)).is_err() {
                self.stop();
            }
        }
    }

    pub fn begin_process(&mut self, info: &ProcessInfo) -> u32 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.send(Job::Process(info.clone()));
        id
    }

    /// Queues a batch for compression; gives it back when the threads are gone.
    pub fn write_events(&mut self, batch: Batch) -> Option<Batch> {
        let Some(n) = self.issue() else {
            return Some(batch);
        };
        let Some(tx) = self.compress_tx.as_ref() else {
            return Some(batch);
        };
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        match tx.send((n, batch)) {
            Ok(()) => None,
            Err(e) => {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                self.stop();
                Some(e.0 .1)
            }
        }
    }

    /// Moves the buffers of the batches the compressors are done with into `spare` (keeping at
    /// most `keep`).
    pub fn recycle(&mut self, spare: &mut Vec<Vec<u8>>, keep: usize) {
        while let Ok(buffer) = self.returned.try_recv() {
            if spare.len() < keep {
                spare.push(buffer);
            }
        }
    }

    /// How many batches can be in the pipeline at once.
    pub fn in_flight(&self) -> usize {
        self.limit as usize
    }

    pub fn end_process(&mut self, stream: u32, reason: EndReason, records: u64) {
        self.send(Job::End(stream, reason, records));
    }

    pub fn note(&mut self, text: &str) {
        self.send(Job::Note(text.to_string()));
    }

    /// Stacks `first_id`.. (a STACKS chunk); encoded here, on the drain thread (rare and small).
    pub fn stacks(&mut self, first_id: u32, stacks: &[Vec<u64>]) {
        match self
            .stack_encoder
            .payload(first_id, stacks.iter().map(|s| s.as_slice()))
        {
            Ok(p) => self.send(Job::Stacks(p)),
            Err(e) => self.send(Job::Failed(format!("encoding stacks: {e}"))),
        }
    }

    pub fn modules(&mut self, modules: Vec<trace::Module>) {
        self.send(Job::Modules(modules));
    }

    pub fn memory(&mut self, stream: u32, samples: Vec<trace::MemorySample>) {
        self.send(Job::Memory(stream, samples));
    }

    pub fn leaks(&mut self, l: trace::Leaks) {
        self.send(Job::Leaks(l));
    }

    pub fn residency(&mut self, stream: u32, readings: Vec<trace::Residency>) {
        self.send(Job::Residency(stream, readings));
    }

    pub fn untraced(&mut self, u: &trace::Untraced) {
        self.send(Job::Untraced(u.clone()));
    }

    pub fn flush(&mut self) {
        self.send(Job::Flush);
    }

    /// The first write error the threads met, once (the caller stops writing).
    pub fn failure(&mut self) -> Option<String> {
        match lock(&self.shared.error).take() {
            Some(e) => Some(e),
            None if self.write_tx.is_none() => Some("the trace writer thread stopped".into()),
            None => None,
        }
    }

    /// Writes the trailer (with `Some`) and waits for the threads to write everything queued.
    pub fn finish(mut self, trailer: Option<Trailer>) -> Finished {
        if let Some(t) = trailer {
            self.send(Job::Finish(t));
        }
        self.stop();
        let mut panicked = false;
        for e in self.compressors.drain(..) {
            panicked |= e.join().is_err();
        }
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(f)) if !panicked || f.error.is_some() => f,
            Some(Ok(f)) => Finished {
                error: Some("a compressor thread panicked".into()),
                ..f
            },
            _ => Finished {
                bytes: 0,
                error: Some("the trace writer thread panicked".into()),
                events: Vec::new(),
            },
        }
    }
}

/// Sends a failure for the job a compressor holds if the thread unwinds, so the writer never
/// waits for a number that will not come.
struct Holding<'a> {
    job: u64,
    out: &'a Sender<(u64, Job)>,
    done: bool,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self
                .out
                .send((self.job, Job::Failed("a compressor thread panicked".into())));
        }
    }
}

fn compress_loop(
    queue: &Mutex<Receiver<(u64, Batch)>>,
    out: &Sender<(u64, Job)>,
    returned: &Sender<Vec<u8>>,
    shared: &Shared,
    level: i32,
) {
    yield_to_the_drain();
    let mut base = zstd::bulk::Compressor::new(level)
        .map_err(|e| format!("cannot set up zstd level {level}: {e}"));
    let strong_level = STRONG_LEVEL.max(level);
    let mut strong = zstd::bulk::Compressor::new(strong_level)
        .map_err(|e| format!("cannot set up zstd level {strong_level}: {e}"));
    // (stream, its last chunk compressed STRONG_RATIO times or better), the most recent last.
    let mut compressible: Vec<(u32, bool)> = Vec::new();
    loop {
        // Only one thread waits in `recv`; the others wait for the lock.
        let next = lock(queue).recv();
        let Ok((n, batch)) = next else { break };
        let behind = shared.queued.fetch_sub(1, Ordering::Relaxed) > 1;
        let mut holding = Holding {
            job: n,
            out,
            done: false,
        };
        let seen = compressible.iter().position(|&(s, _)| s == batch.stream);
        let strong_pays = seen.is_some_and(|i| compressible[i].1);
        let compressor = if strong_pays && !behind {
            &mut strong
        } else {
            &mut base
        };
        let job = match compressor.as_mut() {
            Ok(c) => match batch.chunk.compress(c) {
                Ok(encoded) => {
                    let ratio_pays = batch.chunk.raw.len() >= STRONG_RATIO * encoded.payload.len();
                    if let Some(i) = seen {
                        compressible.remove(i);
                    } else if compressible.len() >= REMEMBERED_STREAMS {
                        compressible.remove(0);
                    }
                    compressible.push((batch.stream, ratio_pays));
                    Job::Events(batch.stream, encoded, batch.events)
                }
                Err(e) => Job::Failed(format!("cannot compress events: {e}")),
            },
            Err(e) => Job::Failed(e.clone()),
        };
        holding.done = true;
        let _ = out.send((n, job));
        let _ = returned.send(batch.into_buffer());
    }
}

/// The writer's state: the file until it fails or is finished.
struct Output {
    writer: Option<FileWriter>,
    bytes: u64,
    error: Option<String>,
    /// Events written, per stream.
    events: Vec<u64>,
    /// The caller's running totals (`RecordOptions::progress`).
    progress: Option<Arc<crate::RecordProgress>>,
}

/// How much lower the compressor and writer threads' priority is than the drain thread's (nice
/// levels; 10: a tenth of the CPU share when they compete for a core).
const HELPER_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority below the drain thread's. The drain is what the traced
/// program waits for when its ring is full; compression and writes can wait (the jobs in flight
/// are bounded, so they catch up when the drain idles). With one allocating thread on two cores,
/// the drain shares its core with these threads: alloc-micro with them at nice 10 ran in 0.235 s
/// against 0.251 s (medians of 10 interleaved `perf stat -r 3` rounds, faster in 8). On Linux the
/// nice value is per thread; a failure (a sandbox that forbids it) changes nothing else.
fn yield_to_the_drain() {
    sys::nice_this_thread(HELPER_NICE);
}

fn write_loop(
    writer: FileWriter,
    rx: Receiver<(u64, Job)>,
    shared: &Shared,
    progress: Option<Arc<crate::RecordProgress>>,
) -> Finished {
    yield_to_the_drain();
    let mut out = Output {
        writer: Some(writer),
        bytes: 0,
        error: None,
        events: Vec::new(),
        progress,
    };
    // Jobs that arrived before their turn (a compressor finished a later chunk first).
    let mut early: BTreeMap<u64, Job> = BTreeMap::new();
    let mut next = 0u64;
    for (n, job) in rx {
        early.insert(n, job);
        while let Some(job) = early.remove(&next) {
            out.handle(job, shared);
            next += 1;
            *lock(&shared.written) = next;
            shared.progress.notify_all();
        }
    }
    if let Some(w) = out.writer {
        out.bytes = w.bytes_written();
    }
    Finished {
        bytes: out.bytes,
        error: out.error,
        events: out.events,
    }
}

impl Output {
    fn handle(&mut self, job: Job, shared: &Shared) {
        let Some(w) = self.writer.as_mut() else {
            return; // failed: keep consuming so the server never blocks
        };
        let result = match job {
            Job::Process(info) => w.begin_process(&info).map(|_| ()),
            Job::Events(stream, chunk, events) => w.write_events(stream, &chunk).map(|()| {
                let s = stream as usize;
                if self.events.len() <= s {
                    self.events.resize(s + 1, 0);
                }
                self.events[s] += u64::from(events);
                if let Some(p) = &self.progress {
                    p.events.fetch_add(u64::from(events), Ordering::Relaxed);
                    p.bytes.store(w.bytes_written(), Ordering::Relaxed);
                }
            }),
            Job::Failed(text) => Err(std::io::Error::other(text)),
            Job::End(stream, reason, records) => w.end_process(stream, reason, records),
            Job::Note(text) => w.note(&text),
            Job::Untraced(u) => w.untraced(&u),
            Job::Leaks(l) => w.leaks(&l),
            Job::Stacks(payload) => w.write_stacks_payload(&payload),
            Job::Modules(m) => w.write_modules(&m),
            Job::Memory(stream, samples) => w.write_memory(stream, &samples),
            Job::Residency(stream, readings) => w.write_residency(stream, &readings),
            Job::Flush => w.flush(),
            Job::Finish(trailer) => {
                let Some(w) = self.writer.take() else { return };
                self.bytes = w.bytes_written();
                let done = w
                    .finish(&trailer)
                    .and_then(|mut out| std::io::Write::flush(&mut out));
                if let Err(e) = done {
                    self.error = Some(format!("cannot finish the trace file: {e}"));
                }
                return;
            }
        };
        if let Err(e) = result {
            let msg = e.to_string();
            end_at_last_chunk(w, &format!("writing stopped here: {msg}"));
            self.bytes = w.bytes_written();
            self.writer = None;
            *lock(&shared.error) = Some(msg.clone());
            self.error = Some(msg);
        }
    }
}

/// After a failed write (disk full, I/O error, file size limit): cuts the chunk the write left
/// half-written, so the file ends after the last whole chunk, and says why there when there
/// is room (cutting freed some). Best effort: a reader recovers every whole chunk anyway.
fn end_at_last_chunk(w: &mut FileWriter, why: &str) {
    let whole = w.bytes_written();
    let cut = |f: &mut &File| {
        f.set_len(whole)
            .and_then(|()| f.seek(SeekFrom::Start(whole)))
    };
    if cut(&mut w.get_ref()).is_ok() && w.note(why).is_err() {
        let _ = cut(&mut w.get_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anchors::AnchorSink;
    use crate::batch::ChunkBuilder;
    use crate::protocol::OP_SHIFT;
    use trace::{Op, Record, TraceHeader, TraceReader};

    /// A sealed chunk of mallocs `seqs` of thread `stream`, of `size(seq)` bytes, with anchors
    /// at both ends (10 ns per seq).
    fn batch_of(stream: u32, seqs: std::ops::Range<u64>, size: impl Fn(u64) -> u64) -> Batch {
        let mut b = ChunkBuilder::new(trace::ChunkEncoder::new(1), false);
        b.push_anchor(seqs.start, seqs.start * 10);
        let records: Vec<[u64; 4]> = seqs
            .clone()
            .map(|seq| {
                [
                    seq | (Op::Malloc as u64) << OP_SHIFT,
                    0x10 * seq,
                    size(seq),
                    0,
                ]
            })
            .collect();
        b.push_records(&records, stream);
        b.push_anchor(seqs.end, seqs.end * 10);
        let chunk = b.seal(Vec::new()).unwrap();
        Batch {
            stream,
            events: chunk.records,
            chunk,
        }
    }

    fn batch(stream: u32, seqs: std::ops::Range<u64>) -> Batch {
        batch_of(stream, seqs, |_| 8)
    }

    /// A pipeline writing into a new trace file `t.alt` in `dir`.
    fn pipeline(dir: &std::path::Path) -> (Pipeline, std::path::PathBuf) {
        let path = dir.join("t.alt");
        let file = File::create(&path).unwrap();
        let writer = TraceWriter::new(file, &TraceHeader::default()).unwrap();
        (Pipeline::start(writer, 1, None).unwrap(), path)
    }

    fn info(pid: u32) -> ProcessInfo {
        ProcessInfo {
            pid,
            ppid: 1,
            exec_index: 0,
            cmdline: vec!["x".into()],
            start_unix_ns: 0,
            truncated: false,
        }
    }

    /// A stream whose chunks compress well gets the strong level once a compressor has seen one
    /// of its chunks, while nothing waits (seen in the sizes: every batch has the same content,
    /// and the strong level makes its chunk 6 % smaller).
    #[test]
    fn compressible_streams_get_the_strong_level_when_the_compressors_keep_up() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, path) = pipeline(dir.path());
        let stream = p.begin_process(&info(100));
        // A pattern of 3,000 allocation sizes that repeats, as a program's phases do.
        let pattern: Vec<u64> = (0..3_000u64)
            .map(|i| 16 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 4000)
            .collect();
        let batches = 8;
        let per_batch = 60_000u64;
        for b in 0..batches {
            let first = b * per_batch;
            let batch = batch_of(stream, first..first + per_batch, |seq| {
                pattern[(seq % pattern.len() as u64) as usize]
            });
            assert!(p.write_events(batch).is_none());
            // One at a time: the compressors are never behind.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while *lock(&p.shared.written) < 2 + b && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        p.end_process(stream, EndReason::Exit, batches * per_batch);
        let done = p.finish(Some(Trailer {
            exit: "exit 0".into(),
            events: batches * per_batch,
            end_unix_ns: 1,
            attach: None,
        }));
        assert_eq!(done.error, None);
        let mut reader = TraceReader::open(&path).unwrap();
        let sizes: Vec<usize> = reader
            .chunks(0)
            .unwrap()
            .map(|c| c.unwrap().payload().len())
            .collect();
        assert_eq!(sizes.len(), batches as usize);
        let (small, large) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
        // Chunk headers differ by a few bytes (seqs, anchors); the levels by about 200.
        assert!(small * 100 < large * 97, "chunk sizes {sizes:?}");
        // Each compressor thread compresses its first chunk of the stream at the base level.
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let strong = sizes.iter().filter(|&&s| s * 100 < large * 97).count();
        assert!(
            strong + threads >= batches as usize,
            "chunk sizes {sizes:?}"
        );
    }

    /// The nice value (field 19 of /proc/self/task/TID/stat) of each of this process's threads
    /// whose name starts with `prefix`.
    fn nice_of_threads(prefix: &str) -> Vec<i64> {
        let mut nice = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if !comm.starts_with(prefix) {
                continue;
            }
            let stat = std::fs::read(task.path().join("stat")).unwrap_or_default();
            if let Some(stat) = procmem::parse_stat(&stat) {
                nice.push(stat.nice);
            }
        }
        nice
    }

    /// The compressor and writer threads run below the drain thread's priority (the test's
    /// own, here), so that the thread the traced program waits for gets the core they share.
    #[test]
    fn compressor_and_writer_threads_yield_to_the_drain() {
        let dir = tempfile::tempdir().unwrap();
        let (p, _path) = pipeline(dir.path());
        let own = nice_of_threads("").into_iter().min().unwrap();
        let want = (own + i64::from(HELPER_NICE)).min(19);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (mut zstd, mut writer) = (Vec::new(), Vec::new());
        while std::time::Instant::now() < deadline {
            zstd = nice_of_threads("alloclens-zstd");
            writer = nice_of_threads("alloclens-write");
            let lowered = |v: &[i64]| !v.is_empty() && v.iter().all(|&n| n == want);
            // Every compressor thread started (one may start after another lowered itself).
            if lowered(&zstd) && lowered(&writer) && zstd.len() >= p.compressors.len() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Other tests' pipelines may run at the same time: at least this one's threads.
        assert!(zstd.len() >= p.compressors.len() && !writer.is_empty());
        assert!(
            zstd.iter().chain(&writer).all(|&n| n == want),
            "compressors {zstd:?}, writer {writer:?}, want {want}"
        );
        p.finish(None);
    }

    /// Large and tiny batches alternate, so compressor threads finish them out of order; the
    /// file still has every job in the order it was issued.
    #[test]
    fn jobs_are_written_in_issue_order_whatever_the_compressors_finish_first() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, path) = pipeline(dir.path());
        let streams = [p.begin_process(&info(100)), p.begin_process(&info(101))];
        let mut next = [0u64; 2];
        for i in 0..40u64 {
            let s = (i % 2) as usize;
            let n = if i % 4 < 2 { 20_000 } else { 1 + i };
            assert!(p
                .write_events(batch(streams[s], next[s]..next[s] + n))
                .is_none());
            next[s] += n;
            if i % 10 == 9 {
                p.note(&format!("note {i}"));
                p.flush();
            }
        }
        p.end_process(streams[0], EndReason::Exit, next[0]);
        let trailer = Trailer {
            exit: "exit 0".into(),
            events: next[0] + next[1],
            end_unix_ns: 1,
            attach: None,
        };
        let done = p.finish(Some(trailer));
        assert_eq!(done.error, None);

        let mut r = TraceReader::open(&path).unwrap();
        let notes: Vec<String> = (0..4).map(|k| format!("note {}", k * 10 + 9)).collect();
        assert_eq!(r.notes(), notes);
        assert!(r.trailer().is_some());
        assert_eq!(r.streams()[0].end, Some(EndReason::Exit));
        assert_eq!(r.streams()[1].end, None);
        for (s, &count) in next.iter().enumerate() {
            let seqs: Vec<u64> = r
                .records(s)
                .unwrap()
                .map(|rec| match rec.unwrap() {
                    Record::Event(e) => {
                        assert_eq!(e.t_ns, e.seq * 10, "times from the batch's own anchors");
                        e.seq
                    }
                    Record::Marker(m) => panic!("no markers were sent: {m:?}"),
                })
                .collect();
            let first_wrong = seqs.iter().zip(0..).position(|(&a, b)| a != b);
            assert_eq!(
                (first_wrong, seqs.len() as u64),
                (None, count),
                "stream {s}"
            );
        }
    }
}
