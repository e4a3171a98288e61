//! A profile table written the way shim/agent/profile_table.h lays it out (its AG_PROF_
//! constants), for the reader's tests: the agent's C is the real writer.
use std::path::Path;

use super::layout::{header, live, module, stack, MAGIC, STATE_RUNNING, VERSION};

const HEADER_BYTES: usize = 4096;
const BUCKET_KEYS: usize = 8;
const BUCKETS: usize = 8192;
const ENTRIES: usize = BUCKETS * BUCKET_KEYS;
const INDEX_SLOTS: usize = 32768;
const STACKS_BYTES: usize = 3 << 20;
const MODULES_BYTES: usize = 512 << 10;
pub const MAX_DEPTH: usize = 64;
const BUCKETS_OFF: usize = HEADER_BYTES;
const ENTRIES_OFF: usize = BUCKETS_OFF + BUCKETS * BUCKET_KEYS * 8;
const INDEX_OFF: usize = ENTRIES_OFF + ENTRIES * 32;
const STACKS_OFF: usize = INDEX_OFF + INDEX_SLOTS * 8;
const MODULES_OFF: usize = STACKS_OFF + STACKS_BYTES;
pub const FILE_BYTES: usize = MODULES_OFF + MODULES_BYTES;

pub struct TestTable {
    pub bytes: Vec<u8>,
    stacks_used: usize,
    modules_used: usize,
    index_used: usize,
}

impl TestTable {
    /// An empty table of a running process, with its empty stack at offset 0.
    pub fn new(sample_bytes: u64, pid: u32, exe: &str) -> TestTable {
        let mut t = TestTable {
            bytes: vec![0; FILE_BYTES],
            stacks_used: 0,
            modules_used: 0,
            index_used: 0,
        };
        t.bytes[..8].copy_from_slice(MAGIC);
        t.put32(header::VERSION, VERSION);
        t.put32(header::HEADER_BYTES, HEADER_BYTES as u32);
        t.put64(header::FILE_BYTES, FILE_BYTES as u64);
        t.put64(header::SAMPLE_BYTES, sample_bytes);
        t.put32(header::PID, pid);
        t.put32(header::PPID, 1);
        t.put64(header::START_UNIX_NS, 1_700_000_000_000_000_000);
        t.put32(header::MAX_DEPTH, MAX_DEPTH as u32);
        t.put32(header::STATE, STATE_RUNNING);
        t.put64(header::BUCKETS_OFF, BUCKETS_OFF as u64);
        t.put32(header::BUCKET_COUNT, BUCKETS as u32);
        t.put32(header::BUCKET_KEYS, BUCKET_KEYS as u32);
        t.put64(header::ENTRIES_OFF, ENTRIES_OFF as u64);
        t.put32(header::ENTRY_COUNT, ENTRIES as u32);
        t.put32(header::ENTRY_BYTES, 32);
        t.put64(header::INDEX_OFF, INDEX_OFF as u64);
        t.put64(header::INDEX_SLOTS, INDEX_SLOTS as u64);
        t.put64(header::STACKS_OFF, STACKS_OFF as u64);
        t.put64(header::STACKS_BYTES, STACKS_BYTES as u64);
        t.put64(header::MODULES_OFF, MODULES_OFF as u64);
        t.put64(header::MODULES_BYTES, MODULES_BYTES as u64);
        t.bytes[header::EXE..header::EXE + exe.len()].copy_from_slice(exe.as_bytes());
        t.stack_record(&[], 0, [0.0; 4]);
        t
    }

    pub fn put32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    pub fn put64(&mut self, at: usize, v: u64) {
        self.bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// A stack record with its sums (alloc objects, space, and their variances), in the index;
    /// its id.
    pub fn stack(&mut self, frames: &[u64], samples: u64, sums: [f64; 4]) -> u32 {
        let id = self.stack_record(frames, samples, sums);
        let slot = INDEX_OFF + self.index_used * 8;
        self.index_used += 7; // anywhere in the table, as hashing places them
        self.put64(slot, (0xabcd_u64 << 32) | u64::from(id));
        id
    }

    fn stack_record(&mut self, frames: &[u64], samples: u64, sums: [f64; 4]) -> u32 {
        let id = (self.stacks_used / 8) as u32;
        let at = STACKS_OFF + self.stacks_used;
        self.put32(at + stack::DEPTH_COMMIT, frames.len() as u32 + 1);
        self.put64(at + stack::HASH, 0xabcd_0000_1234);
        self.put64(at + stack::SAMPLES, samples);
        let fields = [
            stack::ALLOC_OBJECTS,
            stack::ALLOC_SPACE,
            stack::ALLOC_OBJECTS_VAR,
            stack::ALLOC_SPACE_VAR,
        ];
        for (field, v) in fields.into_iter().zip(sums) {
            self.put64(at + field, v.to_bits());
        }
        for (i, f) in frames.iter().enumerate() {
            self.put64(at + stack::SIZE + i * 8, *f);
        }
        self.stacks_used += stack::SIZE + frames.len() * 8;
        self.put64(header::STACKS_USED, self.stacks_used as u64);
        id
    }

    /// A live entry in slot `slot` with sequence number `seq` (odd: being written).
    pub fn live(&mut self, slot: usize, seq: u32, stack: u32, addr: u64, size: u64) {
        let at = ENTRIES_OFF + slot * live::SIZE;
        self.put32(at + live::SEQ, seq);
        self.put32(at + live::STACK, stack);
        self.put64(at + live::ADDR, addr);
        self.put64(at + live::SIZE_FIELD, size);
        self.put64(at + live::UNIX_NS, 1_700_000_000_000_000_001);
    }

    pub fn module(&mut self, start: u64, end: u64, build_id: &[u8], path: &str) {
        let at = MODULES_OFF + self.modules_used;
        let path_at = module::SIZE + build_id.len().next_multiple_of(8);
        let bytes = path_at + (path.len() + 1).next_multiple_of(8);
        self.put32(at + module::BUILD_ID_LEN, build_id.len() as u32);
        self.put64(at + module::START, start);
        self.put64(at + module::END, end);
        self.put64(at + module::FILE_OFFSET, 0x1000);
        self.put64(at + module::BIAS, start - 0x1000);
        self.bytes[at + module::SIZE..at + module::SIZE + build_id.len()].copy_from_slice(build_id);
        self.bytes[at + path_at..at + path_at + path.len()].copy_from_slice(path.as_bytes());
        self.put32(at + module::BYTES, bytes as u32);
        self.modules_used += bytes;
        self.put64(header::MODULES_USED, self.modules_used as u64);
    }

    pub fn write(&self, path: &Path) {
        std::fs::write(path, &self.bytes).unwrap();
    }
}

/// The stack area's offset, for tests that damage a record.
pub const STACKS_AREA: usize = STACKS_OFF;

/// Header fields the tests change.
pub const LIVE_BYTES: usize = header::LIVE_BYTES;
pub const STATE: usize = header::STATE;
pub const START: usize = header::START_UNIX_NS;
