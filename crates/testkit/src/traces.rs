//! Hand-built traces: records of known calls ([`Calls`], [`event`]) written as a real trace file
//! by the trace crate's own writer ([`TraceFile`]), for tests whose expected figures are worked
//! out by hand.

use std::path::Path;

use trace::{EndReason, Event, Marker, Op, ProcessInfo, Record, TraceHeader, TraceWriter, Trailer};

/// A process of pid `pid` (parent 1, first image) whose command line is `command`.
pub fn process_info(pid: u32, command: &str) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        exec_index: 0,
        cmdline: vec![command.into()],
        start_unix_ns: 0,
        truncated: false,
    }
}

/// One call of thread `tid` at time `seq` ns, no stack.
pub fn event(seq: u64, tid: u32, op: Op, addr: u64, size: u64, old_addr: u64) -> Record {
    Record::Event(Event {
        seq,
        t_ns: seq,
        tid,
        stack: 0,
        op,
        addr,
        size,
        old_addr,
    })
}

/// A sequence of calls: seq is dense, time advances 10 ns per call from 1 µs ([`Calls::t_of`])
/// plus the pauses of [`Calls::wait`]; calls are made by thread 100 until [`Calls::on_thread`].
pub struct Calls {
    pub records: Vec<Record>,
    seq: u64,
    pub tid: u32,
    /// Nanoseconds of [`Calls::wait`] so far, added to every later time.
    waited: u64,
}

impl Default for Calls {
    fn default() -> Self {
        Calls::new()
    }
}

impl Calls {
    pub fn new() -> Self {
        Calls {
            records: Vec::new(),
            seq: 0,
            tid: 100,
            waited: 0,
        }
    }

    /// The time of the call of seq `seq`.
    pub fn t_of(seq: u64) -> u64 {
        1_000 + seq * 10
    }

    /// The program waits `ns` before its next call (a quiet phase): later times are that much later.
    pub fn wait(&mut self, ns: u64) -> &mut Self {
        self.waited += ns;
        self
    }

    fn push(&mut self, op: Op, addr: u64, size: u64, old_addr: u64) -> u64 {
        let seq = self.seq;
        self.records.push(Record::Event(Event {
            seq,
            t_ns: Self::t_of(seq) + self.waited,
            tid: self.tid,
            stack: 0,
            op,
            addr,
            size,
            old_addr,
        }));
        self.seq += 1;
        seq
    }

    pub fn malloc(&mut self, addr: u64, size: u64) -> u64 {
        self.push(Op::Malloc, addr, size, 0)
    }
    pub fn calloc(&mut self, addr: u64, size: u64) -> u64 {
        self.push(Op::Calloc, addr, size, 0)
    }
    pub fn memalign(&mut self, addr: u64, size: u64) -> u64 {
        self.push(Op::PosixMemalign, addr, size, 0)
    }
    pub fn realloc(&mut self, old: u64, addr: u64, size: u64) -> u64 {
        self.push(Op::Realloc, addr, size, old)
    }
    pub fn free(&mut self, addr: u64) -> u64 {
        self.push(Op::Free, addr, 0, 0)
    }
    pub fn on_thread(&mut self, tid: u32) -> &mut Self {
        self.tid = tid;
        self
    }
    /// A phase marker (`alloclens_mark(label)`) before the next call.
    pub fn mark(&mut self, label: &str) {
        self.records.push(Record::Marker(Box::new(Marker {
            seq: self.seq,
            t_ns: Self::t_of(self.seq) + self.waited,
            tid: self.tid,
            label: label.to_string(),
        })));
    }
}

/// A trace file to write: a header, processes with their records (each ended by `exit`), a
/// trailer.
pub struct TraceFile {
    header: TraceHeader,
    processes: Vec<(ProcessInfo, Vec<Record>)>,
    trailer: Trailer,
    chunk_records: usize,
}

impl Default for TraceFile {
    fn default() -> Self {
        TraceFile::new()
    }
}

impl TraceFile {
    /// Default header and trailer, chunks of 64 records.
    pub fn new() -> TraceFile {
        TraceFile {
            header: TraceHeader::default(),
            processes: Vec::new(),
            trailer: Trailer::default(),
            chunk_records: 64,
        }
    }

    pub fn header(mut self, header: TraceHeader) -> TraceFile {
        self.header = header;
        self
    }

    pub fn trailer(mut self, trailer: Trailer) -> TraceFile {
        self.trailer = trailer;
        self
    }

    /// Records per encoded chunk (small values make multi-chunk streams of a few calls).
    pub fn chunk_records(mut self, n: usize) -> TraceFile {
        self.chunk_records = n;
        self
    }

    pub fn process(mut self, info: ProcessInfo, records: impl Into<Vec<Record>>) -> TraceFile {
        self.processes.push((info, records.into()));
        self
    }

    /// Writes it to `path`.
    pub fn write(&self, path: &Path) {
        let file = std::fs::File::create(path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        let mut w = TraceWriter::new(std::io::BufWriter::new(file), &self.header).unwrap();
        for (info, records) in &self.processes {
            let id = w.begin_process(info).unwrap();
            w.write_records(id, records, self.chunk_records).unwrap();
            w.end_process(id, EndReason::Exit, records.len() as u64)
                .unwrap();
        }
        w.finish(&self.trailer).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_trace_reads_back_as_built() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        let mut calls = Calls::new();
        calls.malloc(0x10, 24);
        calls.mark("phase");
        calls.on_thread(7).free(0x10);
        TraceFile::new()
            .chunk_records(1)
            .process(process_info(42, "built"), calls.records.clone())
            .write(&path);
        let mut reader = trace::TraceReader::open(&path).unwrap();
        assert_eq!(reader.streams().len(), 1);
        assert_eq!(reader.streams()[0].info, process_info(42, "built"));
        let read: Vec<Record> = reader.records(0).unwrap().map(Result::unwrap).collect();
        assert_eq!(read, calls.records);
    }
}
