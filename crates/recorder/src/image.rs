//! One traced process image: its rings and the merge into seq order, straight into the image's
//! chunk encoder; sealed chunks (batches) go to the compressor threads.
//!
//! Each thread's ring is in seq order; across threads the records interleave. Seqs are dense per
//! image, so a reorder window indexed by `seq - next_seq` merges them in O(1) per record. A hole
//! (a seq reserved by a thread that has not published it yet) holds the window for a few
//! microseconds; only when the image is gone are holes skipped.
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

use trace::{EndReason, Marker, Op};

use crate::anchors::Anchors;
use crate::batch::{Batch, ChunkBuilder};

use crate::protocol::{
    OP_HAS_STACK, OP_RING_OWNER, OP_SHIFT, PAGE_BYTES, PAGE_COUNTER_OFFSET, RECORD_SIZE,
    RING_HEADER_BYTES, RING_HEAD_OFFSET, RING_RECORDS, RING_TAIL_OFFSET, SEQ_MASK,
};
use crate::sys::Mapping;

/// Records the fast path checks at a time: the encoding that follows the check reads them while
/// they are still in the L1 cache.
const FAST_BLOCK: usize = 512;

/// How many records the merge path takes between two publications of the rings' tails. The
/// fast path publishes after each block. A thread that filled its ring waits for the tail to
/// move: published only at the end of a drain, the thread slept through the whole drain and the
/// recorder then found the ring empty (on 1-thread churn, the two took turns instead of running
/// side by side).
const PUBLISH_EVERY: u64 = 4096;

/// A seq this far ahead of the merge point is corruption, not a slow thread.
const MAX_WINDOW: u64 = 1 << 26;

struct Ring {
    map: Mapping,
    tail: u64,
    /// The producer's head as read at the start of this round's drain.
    head: u64,
    tid: u32,
}

impl Ring {
    /// The published records from the tail on, up to the end of the ring's memory (the next
    /// ones wrap to its start), at most `limit`.
    fn published(&self, limit: usize) -> &[[u64; 4]] {
        let slot = (self.tail as usize) & (RING_RECORDS - 1);
        let n = ((self.head - self.tail) as usize)
            .min(RING_RECORDS - slot)
            .min(limit);
        self.map
            .published_records(RING_HEADER_BYTES + slot * RECORD_SIZE, n)
    }

    /// Gives the slots behind the tail back to the thread (nothing behind it is read again).
    fn publish_tail(&self) {
        self.map
            .atomic_u64(RING_TAIL_OFFSET)
            .store(self.tail, Ordering::Release);
    }
}

/// A record waiting in the window: the ring's 32 bytes (seq and op, addr, size, old address).
/// An empty slot has a zero first word (op tags start at 1).
type Pending = [u64; 4];

const EMPTY: Pending = [0; 4];

/// The reorder window: slot `i` holds seq `next_seq + i`. A power-of-two ring reused across
/// rounds (it grows by doubling only when a slow thread holds it open), so placing a record is
/// one store and taking the front one load; records stay in their raw form until encoded, laid
/// out as in a ring, so that a thread's run at the front is encoded as one (`front_run`).
struct Window {
    slots: Vec<Pending>,
    /// The thread of each slot's record.
    tids: Vec<u32>,
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
            tids: Vec::new(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Places a record of thread `tid` `idx` slots after the front.
    #[inline]
    fn put(&mut self, idx: usize, record: Pending, tid: u32) {
        if idx >= self.slots.len() {
            self.grow(idx + 1);
        }
        let at = (self.head + idx) & self.mask();
        self.slots[at] = record;
        self.tids[at] = tid;
        self.len = self.len.max(idx + 1);
    }

    fn grow(&mut self, need: usize) {
        let cap = need.next_power_of_two().max(Self::INITIAL);
        let mut slots = vec![EMPTY; cap];
        let mut tids = vec![0; cap];
        for i in 0..self.len {
            let from = (self.head + i) & self.mask();
            (slots[i], tids[i]) = (self.slots[from], self.tids[from]);
        }
        (self.slots, self.tids) = (slots, tids);
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
        self.pop_front_run(1);
    }

    /// The front record (present) and those after it of the same thread, at most `limit`
    /// (at least 1), up to the end of the slots' memory: the run `take_front` encodes at once.
    /// It may hold holes; the run's check (`ChunkBuilder::push_run`) stops at the first.
    #[inline]
    fn front_run(&self, limit: usize) -> (&[Pending], u32) {
        let end = self.len.min(limit).min(self.slots.len() - self.head);
        let tid = self.tids[self.head];
        let same = self.tids[self.head + 1..self.head + end.max(1)]
            .iter()
            .take_while(|&&t| t == tid)
            .count();
        (&self.slots[self.head..self.head + 1 + same], tid)
    }

    /// Empties the `n` slots at the front, which do not wrap (`front_run`).
    #[inline]
    fn pop_front_run(&mut self, n: usize) {
        for slot in &mut self.slots[self.head..self.head + n] {
            slot[0] = 0;
        }
        self.head = (self.head + n) & self.mask();
        self.len -= n;
    }
}

/// Counters a round reports to the server.
#[derive(Default, Clone, Copy)]
pub struct Drained {
    pub records: u64,
}

/// Where sealed batches go and the buffers they are sealed into come from (recycled by the
/// server).
pub struct Batches<'a> {
    /// Chunk buffers to reuse.
    pub spare: &'a mut Vec<Vec<u8>>,
    /// Sealed batches, in order, to hand to the compressors.
    pub out: &'a mut Vec<Batch>,
    pub chunk_records: usize,
}

pub struct Image {
    pub stream: u32,
    pub pid: u32,
    pub start_ticks: u64,
    pub mono0: u64,
    /// None once the image is finished (mappings released). Shared with the memory sampler,
    /// which reads the counter too.
    page: Option<std::sync::Arc<Mapping>>,
    rings: Vec<Ring>,
    window: Window,
    next_seq: u64,
    /// Sorted by seq.
    markers: VecDeque<Marker>,
    /// The chunk being built; `None` once the image is released.
    chunk: Option<ChunkBuilder>,
    /// Which round anchors go into the chunks.
    anchors: Anchors,
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
    /// The exec this image announced it is about to do (cleared when it failed): its hang-up
    /// while the process lives on is that exec (`crate::untraced`).
    pub exec: Option<crate::untraced::Announced>,
    /// What the recorder made of the program that exec replaced this image with.
    pub exec_verdict: Option<crate::untraced::Verdict>,
}

impl Image {
    pub fn new(
        stream: u32,
        pid: u32,
        start_ticks: u64,
        mono0: u64,
        page_fd: &OwnedFd,
        mut chunk: ChunkBuilder,
    ) -> std::io::Result<Image> {
        let page = Mapping::map(page_fd, PAGE_BYTES)?;
        let mut anchors = Anchors::default();
        anchors.offer(0, 0, &mut chunk);
        Ok(Image {
            stream,
            pid,
            start_ticks,
            mono0,
            page: Some(std::sync::Arc::new(page)),
            rings: Vec::new(),
            window: Window::new(),
            next_seq: 0,
            markers: VecDeque::new(),
            chunk: Some(chunk),
            anchors,
            records: 0,
            events: 0,
            markers_written: 0,
            misplaced: 0,
            holes: 0,
            said_end: None,
            hung_up: false,
            round: (0, 0),
            exec: None,
            exec_verdict: None,
        })
    }

    /// `record --stacks`: the shim handed over the image's stack arena.
    pub fn attach_stacks(
        &mut self,
        stacks: crate::stacks::Stacks,
        arena: std::sync::Arc<crate::stacks::Arena>,
    ) {
        if let Some(chunk) = self.chunk.as_mut() {
            chunk.attach_stacks(stacks, arena);
        }
    }

    pub fn add_ring(&mut self, fd: &OwnedFd) -> std::io::Result<()> {
        let len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        if Mapping::fd_size(fd)? < len as u64 {
            return Err(std::io::Error::other("ring smaller than the protocol size"));
        }
        let map = Mapping::map(fd, len)?;
        let tail = map.atomic_u64(RING_TAIL_OFFSET).load(Ordering::Acquire);
        self.rings.push(Ring {
            map,
            tail,
            head: tail,
            tid: 0,
        });
        Ok(())
    }

    /// Reads the image's counter and the time: the anchor of this round. Done before reading
    /// the socket, so a marker sent after it carries a seq at or above the counter read here.
    pub fn start_round(&mut self, now_mono: u64) {
        let c = self.counter_now();
        self.round = (c, now_mono.saturating_sub(self.mono0));
    }

    /// Calls the shim saw but could not record (a signal handler's, `AL_PAGE_LOST_OFFSET`).
    pub fn unrecorded(&self) -> u64 {
        self.page.as_ref().map_or(0, |p| {
            p.atomic_u64(crate::protocol::PAGE_LOST_OFFSET)
                .load(Ordering::Acquire)
        })
    }

    /// The shared page with the image's counter (for the memory sampler); `None` once released.
    pub fn counter_page(&self) -> Option<std::sync::Arc<Mapping>> {
        self.page.clone()
    }

    pub fn counter_now(&self) -> u64 {
        self.page.as_ref().map_or(self.next_seq, |p| {
            p.atomic_u64(PAGE_COUNTER_OFFSET).load(Ordering::Acquire)
        })
    }

    /// Drops the shared mappings and buffers of a finished image; returns its encoder (reset)
    /// for reuse.
    pub fn release(&mut self) -> Option<trace::ChunkEncoder> {
        self.page = None;
        self.rings = Vec::new();
        self.window = Window::new();
        self.markers = VecDeque::new();
        self.chunk.take().map(ChunkBuilder::into_encoder)
    }

    /// `record --leaks`: keep this image's live blocks (`ChunkBuilder::keep_exit_blocks`).
    pub fn keep_exit_blocks(&mut self) {
        if let Some(c) = self.chunk.as_mut() {
            c.keep_exit_blocks();
        }
    }

    /// The live blocks kept for the leak check, taken (before `release`).
    pub fn take_exit_blocks(&mut self) -> Option<crate::batch::ExitBlocks> {
        self.chunk.as_mut()?.take_exit_blocks()
    }

    /// The live blocks kept for the leak check.
    pub fn exit_blocks(&self) -> Option<&crate::batch::ExitBlocks> {
        self.chunk.as_ref()?.exit_blocks()
    }

    /// Blocks left without an id for want of memory (`ChunkBuilder::ids_lost`).
    pub fn ids_lost(&self) -> u64 {
        self.chunk.as_ref().map_or(0, ChunkBuilder::ids_lost)
    }

    pub fn add_marker(&mut self, marker: Marker) {
        let at = self
            .markers
            .iter()
            .rposition(|m| m.seq <= marker.seq)
            .map_or(0, |i| i + 1);
        self.markers.insert(at, marker);
    }

    /// Drains the rings and encodes every record the anchor covers, in seq order. With
    /// `last`, the image is gone: holes are skipped, everything left is taken and the chunk is
    /// sealed. Full chunks (and the last one) go to `batches.out`.
    pub fn drain(&mut self, last: bool, batches: &mut Batches) -> Drained {
        // Taken out for the round, so the merge can borrow the rings and feed the chunk at once.
        let Some(mut chunk) = self.chunk.take() else {
            return Drained::default();
        };
        let drained = self.drain_rings(last, batches, &mut chunk);
        self.misplaced += std::mem::take(&mut chunk.refused);
        self.chunk = Some(chunk);
        drained
    }

    fn drain_rings(
        &mut self,
        last: bool,
        batches: &mut Batches,
        chunk: &mut ChunkBuilder,
    ) -> Drained {
        let (c, t) = self.round;
        let mut drained = Drained::default();
        self.anchors.offer(c, t, chunk);
        // Records left from earlier rounds precede everything in the rings.
        self.take_front(c, false, batches, chunk);
        for ring in &mut self.rings {
            ring.head = ring
                .map
                .atomic_u64(RING_HEAD_OFFSET)
                .load(Ordering::Acquire);
        }
        let only_busy = {
            let mut busy =
                (0..self.rings.len()).filter(|&r| self.rings[r].tail != self.rings[r].head);
            match (busy.next(), busy.next()) {
                (Some(r), None) => Some(r),
                _ => None,
            }
        };
        if let Some(r) = only_busy {
            let ring = &self.rings[r];
            let sane = ring.head.wrapping_sub(ring.tail) <= RING_RECORDS as u64;
            if sane && self.window.len == 0 {
                drained.records += self.fast_path(r, c, batches, chunk);
                // What is left is past the anchor cut: it stays in the ring for the next round
                // (where the fast path takes it) instead of passing through the window.
                if !last && self.next_seq >= c {
                    return drained;
                }
            }
        }
        let busy = self.rings.iter().filter(|r| r.tail != r.head).count();
        let sane = self
            .rings
            .iter()
            .all(|r| r.head.wrapping_sub(r.tail) <= RING_RECORDS as u64);
        if busy >= 2 && sane && self.window.len == 0 {
            drained.records += self.merge_path(c, batches, chunk);
            if !last && self.next_seq >= c {
                return drained;
            }
        }
        for r in 0..self.rings.len() {
            drained.records += self.ring_to_window(r);
        }
        // A hole is skipped only when the image is gone and its rings are empty (`last`).
        self.take_front(c, last, batches, chunk);
        if last {
            self.flush_markers_before(u64::MAX, chunk);
            self.seal_chunk(batches, chunk);
        }
        drained
    }

    /// The common case of one busy ring and nothing pending: its records are already in seq
    /// order, so they are encoded straight from the ring (a check per record, then the
    /// encoding) without passing through the window. Stops at the first record that needs the
    /// general path: out of order (another thread's record is not visible yet), at or past the
    /// anchor cut, or at a marker's place. Returns the records taken.
    fn fast_path(
        &mut self,
        r: usize,
        c: u64,
        batches: &mut Batches,
        chunk: &mut ChunkBuilder,
    ) -> u64 {
        let mut taken = 0;
        loop {
            let ring = &self.rings[r];
            let stop = self.markers.front().map_or(c, |m| m.seq.min(c));
            if ring.tail >= ring.head || self.next_seq >= stop {
                break;
            }
            if chunk.len() >= batches.chunk_records {
                self.seal_chunk(batches, chunk);
                continue;
            }
            let records = ring.published(
                (batches.chunk_records - chunk.len())
                    .min((stop - self.next_seq).min(FAST_BLOCK as u64) as usize),
            );
            let k = chunk.push_run(records, self.next_seq, ring.tid);
            let stopped_at = records.get(k).copied();
            let ring = &mut self.rings[r];
            ring.tail += k as u64;
            self.next_seq += k as u64;
            self.records += k as u64;
            self.events += k as u64;
            taken += k as u64;
            if let Some([seq_op, addr, ..]) = stopped_at {
                // A thread announcing itself (the first record of a ring) is handled here;
                // anything else goes to the general path.
                if (seq_op >> OP_SHIFT) as u8 != OP_RING_OWNER {
                    break;
                }
                ring.tid = addr as u32;
                ring.tail += 1;
            }
            ring.publish_tail();
        }
        if chunk.len() >= batches.chunk_records {
            self.seal_chunk(batches, chunk);
        }
        self.rings[r].publish_tail();
        taken
    }

    /// Several busy rings and nothing pending (threads allocating at the same time): merges
    /// them straight into the chunk, taking each next seq from the ring whose oldest record it
    /// is (the ring of the previous record first: threads run in bursts), without the window.
    /// Stops where the general path is needed: no ring holds the next seq at its front (a
    /// thread has not published it yet), an unknown tag, the anchor cut or a marker's place.
    /// Returns the records taken.
    fn merge_path(&mut self, c: u64, batches: &mut Batches, chunk: &mut ChunkBuilder) -> u64 {
        let (mut taken, mut published) = (0, 0);
        let mut first = 0;
        'records: loop {
            let stop = self.markers.front().map_or(c, |m| m.seq.min(c));
            if self.next_seq >= stop {
                break;
            }
            if chunk.len() >= batches.chunk_records {
                self.seal_chunk(batches, chunk);
                continue;
            }
            let n = self.rings.len();
            for k in 0..n {
                let i = if first + k >= n {
                    first + k - n
                } else {
                    first + k
                };
                let ring = &mut self.rings[i];
                while ring.tail < ring.head {
                    let records = ring.published(
                        (batches.chunk_records - chunk.len())
                            .min((stop - self.next_seq).min(RING_RECORDS as u64) as usize),
                    );
                    // The thread's run of consecutive seqs (12 events on average with two
                    // threads on alloc-micro), taken at once.
                    let k = chunk.push_run(records, self.next_seq, ring.tid);
                    if k == 0 {
                        let [seq_op, addr, ..] = records[0];
                        if (seq_op >> OP_SHIFT) as u8 == OP_RING_OWNER {
                            ring.tid = addr as u32;
                            ring.tail += 1;
                            continue;
                        }
                        break;
                    }
                    let k = k as u64;
                    ring.tail += k;
                    self.next_seq += k;
                    self.records += k;
                    self.events += k;
                    taken += k;
                    first = i;
                    if taken - published >= PUBLISH_EVERY {
                        published = taken;
                        for ring in &self.rings {
                            ring.publish_tail();
                        }
                    }
                    continue 'records;
                }
            }
            break;
        }
        for ring in &self.rings {
            ring.publish_tail();
        }
        taken
    }

    /// Moves ring `r`'s published records (up to the head read this round) into the window.
    fn ring_to_window(&mut self, r: usize) -> u64 {
        let ring = &mut self.rings[r];
        let head = ring.head;
        if head.wrapping_sub(ring.tail) > RING_RECORDS as u64 {
            ring.tail = head; // impossible unless the shim is broken: resynchronise
            return 0;
        }
        let (mut records, mut tid) = (0, ring.tid);
        while ring.tail < head {
            // The records up to the head or the end of the ring's memory, read in place.
            let published = ring.published(RING_RECORDS);
            for &[seq_op, addr, size, old] in published {
                let tag = (seq_op >> OP_SHIFT) as u8;
                if tag == OP_RING_OWNER {
                    tid = addr as u32;
                    continue;
                }
                if Op::from_tag(tag & !OP_HAS_STACK).is_none() {
                    self.misplaced += 1;
                    continue;
                }
                records += 1;
                // A seq behind the window wraps to a huge index.
                let idx = (seq_op & SEQ_MASK).wrapping_sub(self.next_seq);
                if idx > MAX_WINDOW {
                    self.misplaced += 1;
                    continue;
                }
                self.window
                    .put(idx as usize, [seq_op, addr, size, old], tid);
            }
            ring.tail += published.len() as u64;
        }
        ring.tid = tid;
        ring.publish_tail();
        records
    }

    /// Encodes the window's front run of records below the anchor `c`, each thread's run of
    /// consecutive seqs as one (`ChunkBuilder::push_run`, as the direct paths). With
    /// `skip_holes` (the image is gone and its rings are empty) holes are skipped and
    /// everything is taken.
    fn take_front(
        &mut self,
        c: u64,
        skip_holes: bool,
        batches: &mut Batches,
        chunk: &mut ChunkBuilder,
    ) {
        while let Some(front) = self.window.front() {
            let Some(&[seq_op, ..]) = front else {
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
            if self.markers.front().is_some_and(|m| m.seq <= seq) {
                self.flush_markers_before(seq, chunk);
            }
            // The run stops before the cut, the next marker's place and a full chunk.
            let cut = if skip_holes { u64::MAX } else { c };
            let stop = self.markers.front().map_or(cut, |m| m.seq.min(cut));
            let room = batches.chunk_records.saturating_sub(chunk.len()).max(1);
            let limit = (stop - seq).min(room as u64) as usize;
            let (run, tid) = self.window.front_run(limit);
            let k = match chunk.push_run(run, seq, tid) {
                // Not possible (the front is `next_seq`, its tag checked by `ring_to_window`):
                // the checked path counts it.
                0 => {
                    chunk.push_records(&run[..1], tid);
                    1
                }
                k => k,
            };
            self.window.pop_front_run(k);
            self.next_seq = seq + k as u64;
            self.records += k as u64;
            self.events += k as u64;
            if chunk.len() >= batches.chunk_records {
                self.seal_chunk(batches, chunk);
            }
        }
    }

    fn flush_markers_before(&mut self, seq: u64, chunk: &mut ChunkBuilder) {
        while self.markers.front().is_some_and(|m| m.seq <= seq) {
            let Some(mut m) = self.markers.pop_front() else {
                break;
            };
            m.seq = m.seq.max(self.next_seq); // arrived late: placed at the earliest possible point
            chunk.push_marker(&m);
            self.records += 1;
            self.markers_written += 1;
        }
    }

    /// Seals the current chunk (periodic flush) and hands it off when it holds records.
    pub fn seal(&mut self, batches: &mut Batches) {
        if let Some(mut chunk) = self.chunk.take() {
            self.seal_chunk(batches, &mut chunk);
            self.chunk = Some(chunk);
        }
    }

    /// Seals `chunk` (periodic flush or full): hands it off when it holds records, with the
    /// anchor after its last event.
    fn seal_chunk(&mut self, batches: &mut Batches, chunk: &mut ChunkBuilder) {
        if chunk.len() == 0 {
            return;
        }
        self.anchors.flush(chunk);
        let buffer = batches.spare.pop().unwrap_or_default();
        let markers = chunk.take_markers();
        if let Some(sealed) = chunk.seal(buffer) {
            batches.out.push(Batch {
                stream: self.stream,
                events: sealed.records.saturating_sub(markers),
                chunk: sealed,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::Record;

    fn record(seq: u64) -> Pending {
        [seq | 1 << OP_SHIFT, seq, 0, 0]
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

    /// The producer side of a ring: writes records and publishes them like the shim.
    pub(super) struct Producer {
        pub(super) map: Mapping,
        pub(super) head: u64,
    }

    impl Producer {
        /// One ring record (seq and op, address, size, old address), published.
        pub(super) fn push_record(&mut self, rec: [u64; 4]) {
            self.write_record(rec);
            self.publish();
        }

        /// One ring record written but not published yet (a thread between its write and
        /// its head's store: `publish`).
        pub(super) fn write_record(&mut self, rec: [u64; 4]) {
            let at = RING_HEADER_BYTES + (self.head as usize & (RING_RECORDS - 1)) * RECORD_SIZE;
            for (i, word) in rec.into_iter().enumerate() {
                self.map
                    .atomic_u64(at + 8 * i)
                    .store(word, Ordering::Relaxed);
            }
            self.head += 1;
        }

        /// Publishes the records written so far.
        pub(super) fn publish(&mut self) {
            self.map
                .atomic_u64(RING_HEAD_OFFSET)
                .store(self.head, Ordering::Release);
        }

        fn push(&mut self, seq_op: u64, addr: u64) {
            self.push_record([seq_op, addr, 16, 0]);
        }

        fn event(&mut self, seq: u64) {
            self.push(seq | u64::from(Op::Malloc as u8) << OP_SHIFT, 0x1000 + seq);
        }
    }

    fn image_with_ring() -> (Image, Mapping, Producer) {
        let page_fd = crate::sys::memfd(PAGE_BYTES);
        let page = Mapping::map(&page_fd, PAGE_BYTES).unwrap();
        let chunk = ChunkBuilder::new(trace::ChunkEncoder::new(1), true);
        let mut img = Image::new(3, 42, 0, 0, &page_fd, chunk).unwrap();
        let ring_len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        let ring_fd = crate::sys::memfd(ring_len);
        img.add_ring(&ring_fd).unwrap();
        let map = Mapping::map(&ring_fd, ring_len).unwrap();
        let mut producer = Producer { map, head: 0 };
        producer.push(u64::from(OP_RING_OWNER) << OP_SHIFT, 77); // the thread announces itself
        (img, page, producer)
    }

    /// An image with the ring of thread 77 and a second one, of thread 88.
    fn image_with_two_rings() -> (Image, Mapping, Producer, Producer) {
        let (mut img, page, a) = image_with_ring();
        let ring_len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        let ring_fd = crate::sys::memfd(ring_len);
        img.add_ring(&ring_fd).unwrap();
        let mut b = Producer {
            map: Mapping::map(&ring_fd, ring_len).unwrap(),
            head: 0,
        };
        b.push(u64::from(OP_RING_OWNER) << OP_SHIFT, 88);
        (img, page, a, b)
    }

    fn round(img: &mut Image, page: &Mapping, counter: u64, last: bool, out: &mut Vec<Batch>) {
        page.atomic_u64(PAGE_COUNTER_OFFSET)
            .store(counter, Ordering::Release);
        img.start_round(counter * 10);
        let mut spare = Vec::new();
        img.drain(
            last,
            &mut Batches {
                spare: &mut spare,
                out,
                chunk_records: 4,
            },
        );
    }

    /// The records of a batch's chunk, as a reader sees them.
    fn decoded(batch: &Batch) -> Vec<Record> {
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        let encoded = batch.chunk.compress(&mut c).unwrap();
        trace::codec::decode_payload(&encoded.payload).unwrap()
    }

    /// (seq, tid) of every record of the batches in order (tid 0 for a marker).
    fn seqs_and_tids(batches: &[Batch]) -> Vec<(u64, u32)> {
        let to_pair = |r: Record| match r {
            Record::Event(e) => (e.seq, e.tid),
            Record::Marker(m) => (m.seq, 0),
        };
        batches.iter().flat_map(decoded).map(to_pair).collect()
    }

    /// (seq, is marker) of every record of the batches, in order.
    fn flatten(batches: &[Batch]) -> Vec<(u64, bool)> {
        let all = seqs_and_tids(batches);
        assert!(
            all.iter().all(|&(_, t)| t == 77 || t == 0),
            "the ring owner's tid"
        );
        all.into_iter().map(|(s, t)| (s, t == 0)).collect()
    }

    /// Every event of `batch` has the time the anchors of `round` give it (10 ns per seq).
    fn timed_by_the_round_anchors(batch: &Batch) -> bool {
        decoded(batch).iter().all(|r| match r {
            Record::Event(e) => e.t_ns == 10 * e.seq,
            Record::Marker(_) => true,
        })
    }

    #[test]
    fn drain_respects_the_anchor_cut_markers_and_holes() {
        let (mut img, page, mut producer) = image_with_ring();
        let mut out = Vec::new();
        for seq in 0..10 {
            producer.event(seq);
        }
        img.add_marker(Marker {
            seq: 3,
            t_ns: 5,
            tid: 77,
            label: "m".into(),
        });
        // The counter was read at 8: records 8 and 9 were published after, they wait.
        round(&mut img, &page, 8, false, &mut out);
        let ev = |s: u64| (s, false);
        // A chunk is sealed once it reaches chunk_records after an event (a marker may make
        // it one longer).
        assert_eq!(
            flatten(&out),
            [
                ev(0),
                ev(1),
                ev(2),
                (3, true),
                ev(3),
                ev(4),
                ev(5),
                ev(6),
                ev(7)
            ]
        );
        assert_eq!(
            out.iter().map(|b| b.chunk.records).collect::<Vec<_>>(),
            [5, 4]
        );
        assert_eq!((img.events, img.markers_written), (8, 1));
        assert!(out.iter().all(|b| b.stream == 3));
        // Each chunk carries the anchors that bracket it: from (0, 0) to the cut's (8, 80).
        assert!(out.iter().all(timed_by_the_round_anchors));

        // Seq 10 is reserved but never published (the thread died): a hole holds the merge.
        out.clear();
        producer.event(11);
        producer.event(12);
        round(&mut img, &page, 13, false, &mut out);
        assert!(out.is_empty(), "8 and 9 wait in the open chunk");
        assert_eq!((img.events, img.holes), (10, 0));
        // The image is gone: the hole is skipped and the last batch sealed.
        round(&mut img, &page, 13, true, &mut out);
        assert_eq!(flatten(&out), [ev(8), ev(9), ev(11), ev(12)]);
        assert_eq!((img.events, img.holes, img.misplaced), (12, 1, 0));
        // From the carried anchor (8, 80) to the last round's (13, 130).
        assert!(timed_by_the_round_anchors(&out[0]));
    }

    #[test]
    fn busy_rings_merge_in_seq_order_with_their_threads() {
        let (mut img, page, mut a, mut b) = image_with_two_rings();
        // Thread 77 takes 0-2, 5, 6 and 9; thread 88 takes 3, 4, 7 and reserves 8 without
        // publishing it (yet): the merge stops there.
        for seq in [0, 1, 2, 5, 6, 9] {
            a.event(seq);
        }
        for seq in [3, 4, 7] {
            b.event(seq);
        }
        let mut out = Vec::new();
        round(&mut img, &page, 10, false, &mut out);
        b.event(8);
        round(&mut img, &page, 10, true, &mut out);
        let merged = seqs_and_tids(&out);
        let tid = |s: u64| if [3, 4, 7, 8].contains(&s) { 88 } else { 77 };
        assert_eq!(merged, (0..10).map(|s| (s, tid(s))).collect::<Vec<_>>());
        assert_eq!((img.events, img.holes, img.misplaced), (10, 0, 0));
        for (producer, head) in [(&a, 7), (&b, 5)] {
            let tail = producer
                .map
                .atomic_u64(RING_TAIL_OFFSET)
                .load(Ordering::Acquire);
            assert_eq!(tail, head, "every published record consumed");
        }
    }

    /// Runs of consecutive seqs are taken from a ring at once: a run stops at a marker's place,
    /// at the anchor cut and at a full batch, and the merge resumes there in seq order.
    #[test]
    fn busy_rings_merge_runs_up_to_markers_cuts_and_full_batches() {
        let (mut img, page, mut a, mut b) = image_with_two_rings();
        for seq in (0..5).chain(9..15) {
            a.event(seq);
        }
        for seq in (5..9).chain(15..20) {
            b.event(seq);
        }
        img.add_marker(Marker {
            seq: 11,
            t_ns: 5,
            tid: 77,
            label: "m".into(),
        });
        let mut out = Vec::new();
        // The counter was read at 13: 13 and later wait for the next round.
        round(&mut img, &page, 13, false, &mut out);
        assert_eq!(img.events, 13);
        round(&mut img, &page, 20, true, &mut out);
        for batch in &out {
            let events = decoded(batch)
                .iter()
                .filter(|r| matches!(r, Record::Event(_)))
                .count();
            assert!(events <= 4, "a chunk holds at most chunk_records events");
        }
        // (seq, tid) of events, (seq, 0) of markers, in chunk order.
        let merged = seqs_and_tids(&out);
        let tid = |s: u64| {
            if (5..9).contains(&s) || s >= 15 {
                88
            } else {
                77
            }
        };
        let mut want: Vec<(u64, u32)> = (0..20).map(|s| (s, tid(s))).collect();
        want.insert(11, (11, 0));
        assert_eq!(merged, want);
        assert_eq!((img.events, img.holes, img.misplaced), (20, 0, 0));
        let tail = |p: &Producer| p.map.atomic_u64(RING_TAIL_OFFSET).load(Ordering::Acquire);
        assert_eq!((tail(&a), tail(&b)), (a.head, b.head));
    }

    /// A thread that holds its records back (seq 2 reserved, written later) sends the others'
    /// to the window; its front is encoded a thread's run at a time, each run stopping at a
    /// change of thread, a marker's place, the anchor cut and a full chunk.
    #[test]
    fn window_runs_keep_threads_markers_cuts_and_chunk_bounds() {
        let (mut img, page, mut a) = image_with_ring();
        let ring_len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        let ring_fd = crate::sys::memfd(ring_len);
        img.add_ring(&ring_fd).unwrap();
        let mut b = Producer {
            map: Mapping::map(&ring_fd, ring_len).unwrap(),
            head: 0,
        };
        let a_seqs = [0, 1, 3, 4, 5, 9, 10, 11, 12, 13];
        for seq in a_seqs {
            a.event(seq);
        }
        // Thread 88 announces itself with its held records: the window's path reads it.
        b.write_record([u64::from(OP_RING_OWNER) << OP_SHIFT, 88, 0, 0]);
        for seq in [2, 6, 7, 8] {
            b.write_record([
                seq | u64::from(Op::Malloc as u8) << OP_SHIFT,
                0x1000 + seq,
                16,
                0,
            ]);
        }
        img.add_marker(Marker {
            seq: 5,
            t_ns: 5,
            tid: 77,
            label: "m".into(),
        });
        let mut out = Vec::new();
        round(&mut img, &page, 20, false, &mut out);
        assert_eq!(img.events, 2, "seq 2 not published: the window waits");
        b.publish();
        // The counter was read at 12: 12 and 13 (in the middle of thread 77's run) wait.
        round(&mut img, &page, 12, false, &mut out);
        assert_eq!((img.events, img.markers_written), (12, 1));
        // Taken by the one busy ring's path, with the thread the window's path read.
        for seq in 14..20 {
            b.event(seq);
        }
        round(&mut img, &page, 20, true, &mut out);
        for batch in &out {
            let events = decoded(batch)
                .iter()
                .filter(|r| matches!(r, Record::Event(_)))
                .count();
            assert!(events <= 4, "a chunk holds at most chunk_records events");
        }
        let tid = |s: u64| if a_seqs.contains(&s) { 77 } else { 88 };
        let mut want: Vec<(u64, u32)> = (0..20).map(|s| (s, tid(s))).collect();
        want.insert(5, (5, 0));
        assert_eq!(seqs_and_tids(&out), want);
        let addrs: Vec<u64> = out
            .iter()
            .flat_map(decoded)
            .filter_map(|r| match r {
                Record::Event(e) => Some(e.addr),
                Record::Marker(_) => None,
            })
            .collect();
        assert_eq!(addrs, (0..20).map(|s| 0x1000 + s).collect::<Vec<_>>());
        assert_eq!((img.events, img.holes, img.misplaced), (20, 0, 0));
    }

    #[test]
    fn one_busy_ring_leaves_records_past_the_cut_in_the_ring() {
        let (mut img, page, mut producer) = image_with_ring();
        let mut out = Vec::new();
        for seq in 0..10 {
            producer.event(seq);
        }
        round(&mut img, &page, 6, false, &mut out);
        let tail = producer
            .map
            .atomic_u64(RING_TAIL_OFFSET)
            .load(Ordering::Acquire);
        assert_eq!(
            tail, 7,
            "the owner record and seqs 0..6 consumed, 6..10 left"
        );
        assert_eq!(img.events, 6);
        round(&mut img, &page, 10, false, &mut out);
        round(&mut img, &page, 10, true, &mut out);
        let ev = |s: u64| (s, false);
        assert_eq!(flatten(&out), (0..10).map(ev).collect::<Vec<_>>());
        assert_eq!(
            out.iter().map(|b| b.chunk.records).collect::<Vec<_>>(),
            [4, 4, 2]
        );
        assert_eq!((img.events, img.holes, img.misplaced), (10, 0, 0));
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
                w.put(i as usize, record(next + i), 7);
            }
            let run = take_run(&mut w);
            assert_eq!(run, (next..next + n).collect::<Vec<_>>());
            next += n;
        }
        w.put(1, record(next + 1), 7);
        w.put(
            Window::INITIAL * 3,
            record(next + Window::INITIAL as u64 * 3),
            7,
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

    /// A front run is one thread's, at most the limit, and ends where the slots' memory does
    /// (the rest follows from the start); a hole in it is left to the run's check.
    #[test]
    fn front_runs_stop_at_a_thread_change_the_limit_and_the_wrap() {
        let mut w = Window::new();
        let near_end = Window::INITIAL as u64 - 3;
        for i in 0..near_end {
            w.put(i as usize, record(i), 1);
        }
        assert_eq!(w.front_run(usize::MAX).0.len(), near_end as usize);
        w.pop_front_run(near_end as usize);
        // Seqs near_end.. of threads 5, 5, 5 | 5, 6, and a hole after them.
        for (i, tid) in [5, 5, 5, 5, 6].into_iter().enumerate() {
            w.put(i, record(near_end + i as u64), tid);
        }
        w.put(6, record(near_end + 6), 6);
        let seqs = |run: &[Pending]| run.iter().map(|r| r[0] & SEQ_MASK).collect::<Vec<_>>();
        let (run, tid) = w.front_run(2);
        assert_eq!((seqs(run), tid), (vec![near_end, near_end + 1], 5));
        let (run, tid) = w.front_run(usize::MAX);
        assert_eq!(run.len(), 3, "up to the end of the slots");
        assert_eq!(tid, 5);
        w.pop_front_run(3);
        let (run, tid) = w.front_run(usize::MAX);
        assert_eq!((seqs(run), tid), (vec![near_end + 3], 5));
        w.pop_front_run(1);
        let (run, tid) = w.front_run(usize::MAX);
        assert_eq!((seqs(run)[0], tid), (near_end + 4, 6));
        assert!(run.len() <= 3, "a hole's slot ends the run or is in it");
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
    match procmem::read_stat(pid) {
        Ok(stat) if stat.is_alive() && (start_ticks == 0 || stat.starttime == start_ticks) => {
            Liveness::Running
        }
        _ => Liveness::Gone,
    }
}

/// Field 22 of /proc/PID/stat (start time in clock ticks): tells the process from a later one
/// that reuses its pid.
pub fn start_ticks(pid: u32) -> Option<u64> {
    procmem::read_stat(pid).ok().map(|stat| stat.starttime)
}

/// The drain's instructions per event, a figure the machine's load does not change (this VM has
/// no hardware counters): not a test, a harness for bench/HISTORY.md. `THREADS=2
/// EVENTS=1000000 valgrind --tool=callgrind --toggle-collect='*Image::drain*' RECORDER_TESTS
/// --ignored --exact image::drain_cost::drain_cost --nocapture`, RECORDER_TESTS being the
/// binary of `cargo test --release -p recorder --lib --no-run`; the figure is callgrind's total
/// over the events printed. `PATTERN=realloc` for bench/programs/thread-churn.c's realloc mode
/// instead of its churn; `HOLD=1` for a thread that holds its records back (written, not
/// published) from the middle of each round to the next, which sends the rest of that round and
/// all of the next through the window. With `ZSTD_LEVEL=L` each chunk is also compressed at
/// level L (as the recorder's compressor threads do;
/// `--toggle-collect='*UncompressedChunk::compress*'` counts that) and the bytes per event
/// printed; `CHUNK_RECORDS` sets the chunk size (2^16).
#[cfg(test)]
mod drain_cost {
    use super::tests::Producer;
    use super::*;

    /// The calls of one thread, on addresses an allocator model hands out: a free list per
    /// size class of 128 bytes, last in first out as glibc's tcache, and fresh blocks when one
    /// is empty (churn's 64 slots never empty theirs).
    struct Calls {
        producer: Producer,
        slots: Vec<u64>,
        free_lists: Vec<Vec<u64>>,
        fresh: u64,
        /// The thread's records are written but not published (`HOLD`).
        held: bool,
    }

    impl Calls {
        fn allocate(&mut self, size: u64) -> u64 {
            let class = (size / 128) as usize;
            self.free_lists[class].pop().unwrap_or_else(|| {
                self.fresh += 16 * (1 + size / 16);
                self.fresh
            })
        }

        fn release(&mut self, addr: u64, size: u64) {
            self.free_lists[(size / 128) as usize].push(addr);
        }

        fn push(&mut self, seq: &mut u64, op: Op, addr: u64, size: u64, old: u64) {
            self.producer
                .write_record([*seq | (op as u64) << OP_SHIFT, addr, size, old]);
            if !self.held {
                self.producer.publish();
            }
            *seq += 1;
        }

        /// thread-churn's churn: a free and a malloc in one of 64 slots (one size class).
        fn churn(&mut self, seq: &mut u64, r: u64) {
            let k = (r & 63) as usize;
            let old = self.slots[k];
            if old != 0 {
                self.push(seq, Op::Free, old, 0, 0);
                self.release(old, 0);
            }
            let addr = self.allocate(0);
            self.slots[k] = addr;
            self.push(seq, Op::Malloc, addr, 16 + (r >> 8) % 497, 0);
        }

        /// thread-churn's realloc: one of 256 slots replaced, resized (in place or moved) or
        /// freed. The slot keeps the block's size in its low bits' stead: `sizes`.
        fn realloc(&mut self, seq: &mut u64, sizes: &mut [u64], r: u64) {
            let k = (r & 255) as usize;
            let n = 16 + (r >> 8) % 2033;
            let (old, old_size) = (self.slots[k], sizes[k]);
            match (r >> 20) & 3 {
                0 => {
                    if old != 0 {
                        self.push(seq, Op::Free, old, 0, 0);
                        self.release(old, old_size);
                    }
                    let addr = self.allocate(n);
                    self.push(seq, Op::Malloc, addr, n, 0);
                    (self.slots[k], sizes[k]) = (addr, n);
                }
                1 | 2 => {
                    let addr = if old != 0 && n / 128 == old_size / 128 {
                        old
                    } else {
                        if old != 0 {
                            self.release(old, old_size);
                        }
                        self.allocate(n)
                    };
                    self.push(seq, Op::Realloc, addr, n, old);
                    (self.slots[k], sizes[k]) = (addr, n);
                }
                _ => {
                    if old != 0 {
                        self.push(seq, Op::Free, old, 0, 0);
                        self.release(old, old_size);
                    }
                    self.slots[k] = 0;
                }
            }
        }
    }

    /// THREADS threads churning (a free and a malloc in one of 64 slots each) or, with
    /// `PATTERN=realloc`, resizing blocks in 256 slots, in turns of 1 to 24 calls, EVENTS events
    /// drained in rounds of 2^15, everything published (the merge's direct path; `HOLD=1`: the
    /// window's), without addresses.
    #[test]
    #[ignore]
    fn drain_cost() {
        let env = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let threads = env("THREADS", 2) as usize;
        let events = env("EVENTS", 2_000_000);
        let realloc = std::env::var("PATTERN").is_ok_and(|p| p == "realloc");
        let hold = env("HOLD", 0) != 0;
        let page_fd = crate::sys::memfd(PAGE_BYTES);
        let page = Mapping::map(&page_fd, PAGE_BYTES).unwrap();
        let chunk = ChunkBuilder::new(trace::ChunkEncoder::new(1), false);
        let mut img = Image::new(3, 42, 0, 0, &page_fd, chunk).unwrap();
        let ring_len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        let mut calls = Vec::new();
        for t in 0..threads {
            let ring_fd = crate::sys::memfd(ring_len);
            img.add_ring(&ring_fd).unwrap();
            let mut producer = Producer {
                map: Mapping::map(&ring_fd, ring_len).unwrap(),
                head: 0,
            };
            producer.push_record([u64::from(OP_RING_OWNER) << OP_SHIFT, 100 + t as u64, 0, 0]);
            let base = 0x5500_0000_0000 + (t as u64) * 0x100_0000;
            let mut free_lists = vec![Vec::new(); 17];
            // Churn's blocks: 128 of 528 bytes (its sizes are at most 512), in one class.
            free_lists[0] = (0..128u64).map(|i| base + i * 528).collect();
            calls.push(Calls {
                producer,
                slots: vec![0; 256],
                free_lists,
                fresh: base + 0x10_0000,
                held: false,
            });
        }
        let mut sizes = vec![vec![0u64; 256]; threads];
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<i64>().ok());
        let mut compressor =
            env("ZSTD_LEVEL").map(|l| zstd::bulk::Compressor::new(l as i32).unwrap());
        let chunk_records = env("CHUNK_RECORDS").map_or(1 << 16, |n| n as usize);
        let (mut raw_bytes, mut compressed_bytes) = (0, 0);
        let mut seq = 0u64;
        let mut out = Vec::new();
        let mut spare = Vec::new();
        let mut t = 0;
        while seq < events {
            let round_end = (seq + (1 << 15)).min(events);
            let hold_from = seq + (1 << 14);
            while seq < round_end {
                t = (t + 1 + next() as usize % threads.max(2)) % threads;
                if hold && seq >= hold_from && calls.iter().all(|c| !c.held) {
                    // Preempted between reserving a seq and publishing it: the others go on.
                    calls[t].held = true;
                }
                for _ in 0..1 + next() % 24 {
                    if realloc {
                        calls[t].realloc(&mut seq, &mut sizes[t], next());
                    } else {
                        calls[t].churn(&mut seq, next());
                    }
                }
            }
            page.atomic_u64(PAGE_COUNTER_OFFSET)
                .store(seq, Ordering::Release);
            img.start_round(seq * 10);
            img.drain(
                false,
                &mut Batches {
                    spare: &mut spare,
                    out: &mut out,
                    chunk_records,
                },
            );
            for b in out.drain(..) {
                if let Some(c) = &mut compressor {
                    raw_bytes += b.chunk.raw.len();
                    compressed_bytes += b.chunk.compress(c).unwrap().payload.len();
                }
                spare.push(b.into_buffer());
            }
            for c in calls.iter_mut().filter(|c| c.held) {
                c.held = false;
                c.producer.publish();
            }
        }
        // What the last round held back.
        img.start_round(seq * 10);
        img.drain(
            true,
            &mut Batches {
                spare: &mut spare,
                out: &mut out,
                chunk_records,
            },
        );
        assert_eq!((img.events, img.holes), (seq, 0));
        eprintln!("drain_cost: {} events", seq);
        if compressor.is_some() {
            // Chunks still in the encoder are not counted.
            eprintln!("drain_cost: {raw_bytes} raw bytes, {compressed_bytes} compressed");
        }
    }
}
