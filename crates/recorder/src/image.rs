//! One traced process image: its rings, the merge into seq order, and its chunk encoder.
//!
//! Each thread's ring is in seq order; across threads the records interleave. Seqs are dense per
//! image, so a reorder window indexed by `seq - next_seq` merges them in O(1) per record. A hole
//! (a seq reserved by a thread that has not published it yet) holds the window for a few
//! microseconds; only when the image is gone are holes skipped.
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use trace::{ChunkEncoder, EncodedChunk, EndReason, Event, Marker, Op};

use crate::protocol::{
    OP_RING_OWNER, OP_SHIFT, PAGE_BYTES, PAGE_COUNTER_OFFSET, RECORD_SIZE, RING_HEADER_BYTES,
    RING_HEAD_OFFSET, RING_RECORDS, RING_TAIL_OFFSET, SEQ_MASK,
};
use crate::sys::Mapping;

/// A seq this far ahead of the merge point is corruption, not a slow thread.
const MAX_WINDOW: u64 = 1 << 26;

struct Ring {
    map: Mapping,
    tail: u64,
    tid: u32,
}

#[derive(Clone, Copy)]
struct Pending {
    present: bool,
    event: Event,
}

const EMPTY: Pending = Pending {
    present: false,
    event: Event {
        seq: 0,
        t_ns: 0,
        tid: 0,
        op: Op::Malloc,
        addr: 0,
        size: 0,
        old_addr: 0,
    },
};

/// Counters a round reports to the server.
#[derive(Default, Clone, Copy)]
pub struct Drained {
    pub records: u64,
}

pub struct Image {
    pub stream: u32,
    pub pid: u32,
    pub start_ticks: u64,
    pub mono0: u64,
    /// None once the image is finished (mappings released).
    page: Option<Mapping>,
    rings: Vec<Ring>,
    window: VecDeque<Pending>,
    next_seq: u64,
    /// Sorted by seq.
    markers: VecDeque<Marker>,
    pub encoder: ChunkEncoder,
    pub records: u64,
    pub events: u64,
    pub markers_written: u64,
    /// Records that could not be placed (seq behind the window): should stay 0.
    pub misplaced: u64,
    /// Seqs never published (the process died between reserving and writing).
    pub holes: u64,
    pub said_end: Option<EndReason>,
    /// Set once the socket hung up; the image may still run (it closed the descriptor).
    pub hung_up: bool,
    /// Counter value and time read at the start of this round.
    round: (u64, u64),
}

impl Image {
    pub fn new(
        stream: u32,
        pid: u32,
        start_ticks: u64,
        mono0: u64,
        page_fd: &OwnedFd,
        level: i32,
    ) -> std::io::Result<Image> {
        let page = Mapping::map(page_fd, PAGE_BYTES)?;
        let mut encoder = ChunkEncoder::new(level);
        encoder.push_anchor(0, 0);
        Ok(Image {
            stream,
            pid,
            start_ticks,
            mono0,
            page: Some(page),
            rings: Vec::new(),
            window: VecDeque::new(),
            next_seq: 0,
            markers: VecDeque::new(),
            encoder,
            records: 0,
            events: 0,
            markers_written: 0,
            misplaced: 0,
            holes: 0,
            said_end: None,
            hung_up: false,
            round: (0, 0),
        })
    }

    pub fn add_ring(&mut self, fd: &OwnedFd) -> std::io::Result<()> {
        let len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        if Mapping::fd_size(fd)? < len as u64 {
            return Err(std::io::Error::other("ring smaller than the protocol size"));
        }
        let map = Mapping::map(fd, len)?;
        let tail = map.atomic_u64(RING_TAIL_OFFSET).load(Ordering::Acquire);
        self.rings.push(Ring { map, tail, tid: 0 });
        Ok(())
    }

    /// Reads the image's counter and the time: the anchor of this round. Done before reading
    /// the socket, so a marker sent after it carries a seq at or above the counter read here.
    pub fn start_round(&mut self, now_mono: u64) {
        let c = self.counter_now();
        self.round = (c, now_mono.saturating_sub(self.mono0));
    }

    pub fn counter_now(&self) -> u64 {
        self.page.as_ref().map_or(self.next_seq, |p| {
            p.atomic_u64(PAGE_COUNTER_OFFSET).load(Ordering::Acquire)
        })
    }

    /// Drops the shared mappings and buffers of a finished image.
    pub fn release(&mut self) {
        self.page = None;
        self.rings = Vec::new();
        self.window = VecDeque::new();
        self.markers = VecDeque::new();
        self.encoder = ChunkEncoder::new(1);
    }

    pub fn add_marker(&mut self, marker: Marker) {
        let at = self
            .markers
            .iter()
            .rposition(|m| m.seq <= marker.seq)
            .map_or(0, |i| i + 1);
        self.markers.insert(at, marker);
    }

    /// Drains the rings into the window and encodes every event the anchor covers. With
    /// `last`, the image is gone: holes are skipped and everything left is encoded. Returns the
    /// sealed chunks (full ones, or the last one).
    pub fn drain(
        &mut self,
        last: bool,
        chunk_records: usize,
        out: &mut Vec<EncodedChunk>,
    ) -> std::io::Result<Drained> {
        let (c, t) = self.round;
        let mut drained = Drained::default();
        for ring in &mut self.rings {
            let head = ring
                .map
                .atomic_u64(RING_HEAD_OFFSET)
                .load(Ordering::Acquire);
            if head.wrapping_sub(ring.tail) > RING_RECORDS as u64 {
                ring.tail = head; // impossible unless the shim is broken: resynchronise
                continue;
            }
            while ring.tail < head {
                let slot = (ring.tail as usize) & (RING_RECORDS - 1);
                let [seq_op, addr, size, old] =
                    ring.map.read_record(RING_HEADER_BYTES + slot * RECORD_SIZE);
                ring.tail += 1;
                let tag = (seq_op >> OP_SHIFT) as u8;
                if tag == OP_RING_OWNER {
                    ring.tid = addr as u32;
                    continue;
                }
                let Some(op) = Op::from_tag(tag) else {
                    self.misplaced += 1;
                    continue;
                };
                let seq = seq_op & SEQ_MASK;
                drained.records += 1;
                let Some(idx) = seq.checked_sub(self.next_seq) else {
                    self.misplaced += 1;
                    continue;
                };
                if idx > MAX_WINDOW {
                    self.misplaced += 1;
                    continue;
                }
                let idx = idx as usize;
                if idx >= self.window.len() {
                    self.window.resize(idx + 1, EMPTY);
                }
                self.window[idx] = Pending {
                    present: true,
                    event: Event {
                        seq,
                        t_ns: 0,
                        tid: ring.tid,
                        op,
                        addr,
                        size,
                        old_addr: old,
                    },
                };
            }
            ring.map
                .atomic_u64(RING_TAIL_OFFSET)
                .store(ring.tail, Ordering::Release);
        }
        self.encoder.push_anchor(c, t);
        while let Some(front) = self.window.front().copied() {
            if !front.present {
                if !last {
                    break;
                }
                self.window.pop_front();
                self.next_seq += 1;
                self.holes += 1;
                continue;
            }
            if front.event.seq >= c && !last {
                break;
            }
            self.window.pop_front();
            self.flush_markers_before(front.event.seq)?;
            self.encoder
                .push_event(&front.event)
                .map_err(std::io::Error::other)?;
            self.next_seq = front.event.seq + 1;
            self.records += 1;
            self.events += 1;
            if self.encoder.len() >= chunk_records {
                self.seal(out)?;
            }
        }
        if last {
            self.flush_markers_before(u64::MAX)?;
            self.seal(out)?;
        }
        Ok(drained)
    }

    fn flush_markers_before(&mut self, seq: u64) -> std::io::Result<()> {
        while self.markers.front().is_some_and(|m| m.seq <= seq) {
            let Some(mut m) = self.markers.pop_front() else {
                break;
            };
            m.seq = m.seq.max(self.next_seq); // arrived late: placed at the earliest possible point
            self.encoder
                .push_marker(&m)
                .map_err(std::io::Error::other)?;
            self.records += 1;
            self.markers_written += 1;
        }
        Ok(())
    }

    /// Seals the current chunk (periodic flush or full).
    pub fn seal(&mut self, out: &mut Vec<EncodedChunk>) -> std::io::Result<()> {
        if let Some(chunk) = self.encoder.finish()? {
            out.push(chunk);
        }
        Ok(())
    }
}

/// What /proc says about a pid.
#[derive(Debug, PartialEq, Eq)]
pub enum Liveness {
    Running,
    /// Gone, a zombie, or the pid now belongs to another process.
    Gone,
}

/// Whether the process `pid` that started at `start_ticks` (field 22 of /proc/PID/stat) runs.
pub fn liveness(pid: u32, start_ticks: u64) -> Liveness {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Liveness::Gone;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return Liveness::Gone;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); field 22 is fields[19].
    let state = fields.first().copied().unwrap_or("X");
    let ticks: u64 = fields.get(19).and_then(|s| s.parse().ok()).unwrap_or(0);
    if matches!(state, "Z" | "X" | "x") || (start_ticks != 0 && ticks != start_ticks) {
        Liveness::Gone
    } else {
        Liveness::Running
    }
}
