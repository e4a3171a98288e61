//! One traced process image: its rings, the merge into seq order, and its chunk encoder.
//!
//! Each thread's ring is in seq order; across threads the records interleave. Seqs are dense per
//! image, so a reorder window indexed by `seq - next_seq` merges them in O(1) per record. A hole
//! (a seq reserved by a thread that has not published it yet) holds the window for a few
//! microseconds; only when the image is gone are holes skipped.
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use trace::{ChunkEncoder, EndReason, Event, Marker, Op, UncompressedChunk};

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

/// A record waiting in the window: the ring's 32 bytes (seq and op, addr, size, old address)
/// and the thread id. An empty slot has a zero first word (op tags start at 1).
type Pending = [u64; 5];

const EMPTY: Pending = [0; 5];

/// The reorder window: slot `i` holds seq `next_seq + i`. A power-of-two ring reused across
/// rounds (it grows by doubling only when a slow thread holds it open), so placing a record is
/// one store and taking the front one load; records stay in their raw form until encoded.
struct Window {
    slots: Vec<Pending>,
    /// Ring index of the front (seq `next_seq`).
    head: usize,
    /// Slots from the front up to and including the furthest record placed.
    len: usize,
}

impl Window {
    const INITIAL: usize = 1 << 12;

    fn new() -> Window {
        Window {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Places a record `idx` slots after the front.
    #[inline]
    fn put(&mut self, idx: usize, record: Pending) {
        if idx >= self.slots.len() {
            self.grow(idx + 1);
        }
        let at = (self.head + idx) & self.mask();
        self.slots[at] = record;
        self.len = self.len.max(idx + 1);
    }

    fn grow(&mut self, need: usize) {
        let cap = need.next_power_of_two().max(Self::INITIAL);
        let mut slots = vec![EMPTY; cap];
        for (i, slot) in slots.iter_mut().enumerate().take(self.len) {
            *slot = self.slots[(self.head + i) & self.mask()];
        }
        self.slots = slots;
        self.head = 0;
    }

    /// `None` when the window is empty; `Some(None)` for a hole at the front.
    #[inline]
    fn front(&self) -> Option<Option<&Pending>> {
        if self.len == 0 {
            return None;
        }
        let p = &self.slots[self.head];
        Some((p[0] != 0).then_some(p))
    }

    #[inline]
    fn pop_front(&mut self) {
        self.slots[self.head][0] = 0;
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
    }
}

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
    window: Window,
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
    ) -> std::io::Result<Image> {
        let page = Mapping::map(page_fd, PAGE_BYTES)?;
        // Compression runs on the writer thread (`pipeline`): the encoder's level is unused.
        let mut encoder = ChunkEncoder::new(1);
        encoder.push_anchor(0, 0);
        Ok(Image {
            stream,
            pid,
            start_ticks,
            mono0,
            page: Some(page),
            rings: Vec::new(),
            window: Window::new(),
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
        self.window = Window::new();
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
        out: &mut Vec<UncompressedChunk>,
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
                if Op::from_tag(tag).is_none() {
                    self.misplaced += 1;
                    continue;
                }
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
                self.window
                    .put(idx as usize, [seq_op, addr, size, old, u64::from(ring.tid)]);
            }
            ring.map
                .atomic_u64(RING_TAIL_OFFSET)
                .store(ring.tail, Ordering::Release);
        }
        self.encoder.push_anchor(c, t);
        // A hole is skipped only when the image is gone and its rings are empty (`last`).
        self.encode_front(c, last, chunk_records, out)?;
        if last {
            self.flush_markers_before(u64::MAX)?;
            self.seal(out)?;
        }
        Ok(drained)
    }

    /// Encodes the window's front run of records below the anchor `c`. With `skip_holes` (the
    /// image is gone and its rings are empty) holes are skipped and everything is encoded.
    fn encode_front(
        &mut self,
        c: u64,
        skip_holes: bool,
        chunk_records: usize,
        out: &mut Vec<UncompressedChunk>,
    ) -> std::io::Result<()> {
        while let Some(front) = self.window.front() {
            let Some(&[seq_op, addr, size, old_addr, tid]) = front else {
                if !skip_holes {
                    break;
                }
                self.window.pop_front();
                self.next_seq += 1;
                self.holes += 1;
                continue;
            };
            let seq = seq_op & SEQ_MASK;
            if seq >= c && !skip_holes {
                break;
            }
            self.window.pop_front();
            // Tags were checked when the record entered the window.
            let Some(op) = Op::from_tag((seq_op >> OP_SHIFT) as u8) else {
                continue;
            };
            if self.markers.front().is_some_and(|m| m.seq <= seq) {
                self.flush_markers_before(seq)?;
            }
            let event = Event {
                seq,
                t_ns: 0,
                tid: tid as u32,
                op,
                addr,
                size,
                old_addr,
            };
            self.encoder
                .push_event(&event)
                .map_err(std::io::Error::other)?;
            self.next_seq = seq + 1;
            self.records += 1;
            self.events += 1;
            if self.encoder.len() >= chunk_records {
                self.seal(out)?;
            }
        }
        Ok(())
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
    pub fn seal(&mut self, out: &mut Vec<UncompressedChunk>) -> std::io::Result<()> {
        if let Some(chunk) = self.encoder.finish_raw(Vec::new()) {
            out.push(chunk);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64) -> Pending {
        [seq | 1 << OP_SHIFT, seq, 0, 0, 0]
    }

    /// Pops the front run of present records, returning their seqs.
    fn take_run(w: &mut Window) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some(Some(p)) = w.front() {
            out.push(p[0] & SEQ_MASK);
            w.pop_front();
        }
        out
    }

    #[test]
    fn window_keeps_seq_order_across_growth_and_wrap() {
        let mut w = Window::new();
        let mut next = 0u64;
        // Rounds that wrap the ring several times, then one far-ahead record forcing growth while
        // records sit at a wrapped head.
        for round in 0..10u64 {
            let n = 3000 + round * 100;
            for i in (0..n).rev() {
                w.put(i as usize, record(next + i));
            }
            let run = take_run(&mut w);
            assert_eq!(run, (next..next + n).collect::<Vec<_>>());
            next += n;
        }
        w.put(1, record(next + 1));
        w.put(
            Window::INITIAL * 3,
            record(next + Window::INITIAL as u64 * 3),
        );
        assert_eq!(
            w.front(),
            Some(None),
            "a hole at the front holds the window"
        );
        w.pop_front(); // the hole skipped
        assert_eq!(take_run(&mut w), vec![next + 1]);
        assert_eq!(w.len, Window::INITIAL * 3 - 1);
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
