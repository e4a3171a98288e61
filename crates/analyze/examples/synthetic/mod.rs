//! The synthetic allocation stream shared by the throughput examples.
use trace::{Event, Marker, Op, Record};

/// A deterministic mix of malloc/calloc/realloc/free over a fixed number of slots, 2 threads, a
/// marker every 10 M events. Sizes are mostly small, as in the field study.
pub struct Synthetic {
    seq: u64,
    end: u64,
    rng: u64,
    slots: Vec<u64>,
    young_threshold: u64,
    next_addr: u64,
    /// Freed addresses, reused last-in first-out as most allocators do.
    free_list: Vec<u64>,
    pending_marker: bool,
}

const YOUNG: usize = 256;

impl Synthetic {
    pub fn new(end: u64, slots: usize, young_share: f64) -> Self {
        Synthetic {
            seq: 0,
            end,
            rng: 0x9E37_79B9_7F4A_7C15,
            slots: vec![0; slots + YOUNG],
            young_threshold: (young_share * 65536.0) as u64,
            next_addr: 0x1000,
            free_list: Vec::new(),
            pending_marker: false,
        }
    }
    fn new_addr(&mut self) -> u64 {
        self.free_list.pop().unwrap_or_else(|| {
            self.next_addr += 64;
            self.next_addr
        })
    }
    fn next_rand(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

impl Iterator for Synthetic {
    type Item = Record;
    fn next(&mut self) -> Option<Record> {
        if self.seq >= self.end {
            return None;
        }
        if self.pending_marker {
            self.pending_marker = false;
            return Some(Record::Marker(Box::new(Marker {
                seq: self.seq,
                t_ns: self.seq * 20,
                tid: 1,
                label: format!("phase {}", self.seq / 10_000_000),
            })));
        }
        let r = self.next_rand();
        let slot = if (r >> 16) & 0xFFFF < self.young_threshold {
            (r as usize >> 32) % YOUNG
        } else {
            YOUNG + (r as usize >> 32) % (self.slots.len() - YOUNG)
        };
        let size = if r & 0xF0 == 0 {
            (r >> 40) & 0xFFFF
        } else {
            (r >> 40) & 0x1FF
        };
        let tid = 1 + (r & 1) as u32;
        let seq = self.seq;
        self.seq += 1;
        if self.seq.is_multiple_of(10_000_000) {
            self.pending_marker = true;
        }
        let cur = self.slots[slot];
        let (op, addr, old_addr) = if cur == 0 {
            let addr = self.new_addr();
            self.slots[slot] = addr;
            (
                if r & 0x700 == 0 {
                    Op::Calloc
                } else {
                    Op::Malloc
                },
                addr,
                0,
            )
        } else if r & 0x3000 == 0 {
            let addr = self.new_addr();
            self.free_list.push(cur);
            self.slots[slot] = addr;
            (Op::Realloc, addr, cur)
        } else {
            self.slots[slot] = 0;
            self.free_list.push(cur);
            (Op::Free, cur, 0)
        };
        let size = if op == Op::Free { 0 } else { size };
        Some(Record::Event(Event {
            seq,
            t_ns: seq * 20,
            tid,
            stack: 0,
            op,
            addr,
            size,
            old_addr,
        }))
    }
}
