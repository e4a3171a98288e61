//! The recorder's second thread: compresses events chunks and writes the file, so the thread
//! that drains the rings only drains, merges and encodes (on an allocation-bound program it is the
//! bottleneck; zstd would take 10-30 % of it).
//!
//! Jobs keep their order (one channel, one consumer), so the file's chunk order is the order the
//! server issued them in. The channel is bounded: when the writer falls behind, the server waits
//! and the rings fill, which is the back-pressure the shim already handles.
use std::fs::File;
use std::io::BufWriter;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use trace::{EndReason, ProcessInfo, TraceWriter, Trailer, UncompressedChunk};

type FileWriter = TraceWriter<BufWriter<File>>;

/// Chunks in flight between the threads (each up to a few MiB raw).
const QUEUE: usize = 4;

enum Job {
    Process(ProcessInfo),
    Events(u32, UncompressedChunk),
    End(u32, EndReason, u64),
    Note(String),
    Flush,
    Finish(Trailer),
}

/// What the writer thread reports when it stops.
pub struct Finished {
    pub bytes: u64,
    /// The first write error, if any (nothing was written after it).
    pub error: Option<String>,
}

/// The sending side; stream ids are assigned here, in the order `begin_process` is called
/// (the same order the writer assigns them in).
pub struct Pipeline {
    tx: Option<SyncSender<Job>>,
    thread: Option<JoinHandle<Finished>>,
    next_stream: u32,
    error: Arc<Mutex<Option<String>>>,
}

impl Pipeline {
    pub fn start(writer: FileWriter, level: i32) -> std::io::Result<Pipeline> {
        let (tx, rx) = sync_channel(QUEUE);
        let error = Arc::new(Mutex::new(None));
        let shared = Arc::clone(&error);
        let thread = std::thread::Builder::new()
            .name("alloclens-writer".into())
            .spawn(move || run(writer, level, rx, shared))?;
        Ok(Pipeline {
            tx: Some(tx),
            thread: Some(thread),
            next_stream: 0,
            error,
        })
    }

    fn send(&mut self, job: Job) {
        if let Some(tx) = &self.tx {
            if tx.send(job).is_err() {
                self.tx = None; // the thread ended (it panicked): `failure` reports it
            }
        }
    }

    pub fn begin_process(&mut self, info: &ProcessInfo) -> u32 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.send(Job::Process(info.clone()));
        id
    }

    pub fn write_events(&mut self, stream: u32, chunk: UncompressedChunk) {
        self.send(Job::Events(stream, chunk));
    }

    pub fn end_process(&mut self, stream: u32, reason: EndReason, records: u64) {
        self.send(Job::End(stream, reason, records));
    }

    pub fn note(&mut self, text: &str) {
        self.send(Job::Note(text.to_string()));
    }

    pub fn flush(&mut self) {
        self.send(Job::Flush);
    }

    /// The first write error the thread met, once (the caller stops writing).
    pub fn failure(&mut self) -> Option<String> {
        let e = self.error.lock().ok().and_then(|mut e| e.take());
        match e {
            Some(e) => Some(e),
            None if self.tx.is_none() => Some("the trace writer thread stopped".into()),
            None => None,
        }
    }

    /// Writes the trailer (with `Some`) and waits for the thread to write everything queued.
    pub fn finish(mut self, trailer: Option<Trailer>) -> Finished {
        if let Some(t) = trailer {
            self.send(Job::Finish(t));
        }
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(f)) => f,
            _ => Finished {
                bytes: 0,
                error: Some("the trace writer thread panicked".into()),
            },
        }
    }
}

fn run(
    writer: FileWriter,
    level: i32,
    rx: Receiver<Job>,
    shared: Arc<Mutex<Option<String>>>,
) -> Finished {
    let mut writer = Some(writer);
    let mut bytes = 0;
    let mut error: Option<String> = None;
    let mut compressor = match zstd::bulk::Compressor::new(level) {
        Ok(c) => Some(c),
        Err(e) => {
            error = Some(format!("cannot set up zstd level {level}: {e}"));
            writer = None;
            None
        }
    };
    for job in rx {
        let Some(w) = writer.as_mut() else {
            continue; // failed: keep consuming so the server never blocks
        };
        let result = match job {
            Job::Process(info) => w.begin_process(&info).map(|_| ()),
            Job::Events(stream, chunk) => match compressor.as_mut() {
                Some(c) => chunk.compress(c).and_then(|c| w.write_events(stream, &c)),
                None => Ok(()),
            },
            Job::End(stream, reason, records) => w.end_process(stream, reason, records),
            Job::Note(text) => w.note(&text),
            Job::Flush => w.flush(),
            Job::Finish(trailer) => {
                let Some(w) = writer.take() else { continue };
                bytes = w.bytes_written();
                let done = w
                    .finish(&trailer)
                    .and_then(|mut out| std::io::Write::flush(&mut out));
                if let Err(e) = done {
                    error = Some(format!("cannot finish the trace file: {e}"));
                }
                continue;
            }
        };
        if let Err(e) = result {
            bytes = w.bytes_written();
            writer = None;
            let msg = e.to_string();
            if let Ok(mut s) = shared.lock() {
                *s = Some(msg.clone());
            }
            error = Some(msg);
        }
    }
    if let Some(w) = writer {
        bytes = w.bytes_written();
    }
    Finished { bytes, error }
}
