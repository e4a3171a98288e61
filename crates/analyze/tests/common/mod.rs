//! A small builder of record sequences: seq is dense, time advances 10 ns per call.
#![allow(dead_code)]
use trace::{Event, Marker, Op, ProcessInfo, Record};

pub struct Seq {
    pub records: Vec<Record>,
    seq: u64,
    pub tid: u32,
}

impl Seq {
    pub fn new() -> Self {
        Seq {
            records: Vec::new(),
            seq: 0,
            tid: 100,
        }
    }

    pub fn t_of(seq: u64) -> u64 {
        1_000 + seq * 10
    }

    fn push(&mut self, op: Op, addr: u64, size: u64, old_addr: u64) -> u64 {
        let seq = self.seq;
        self.records.push(Record::Event(Event {
            seq,
            t_ns: Self::t_of(seq),
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
    pub fn mark(&mut self, label: &str) {
        self.records.push(Record::Marker(Box::new(Marker {
            seq: self.seq,
            t_ns: Self::t_of(self.seq),
            tid: self.tid,
            label: label.to_string(),
        })));
    }
}

pub fn info(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        exec_index: 0,
        cmdline: vec!["test".into()],
        start_unix_ns: 0,
        truncated: false,
    }
}
