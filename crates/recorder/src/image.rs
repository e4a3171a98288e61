//! One traced process image: its rings and the merge into seq order, into batches (one per
//! future chunk) that encoder threads turn into chunks.
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
use crate::batch::Batch;

use crate::protocol::{
    OP_RING_OWNER, OP_SHIFT, PAGE_BYTES, PAGE_COUNTER_OFFSET, RECORD_SIZE, RING_HEADER_BYTES,
    RING_HEAD_OFFSET, RING_RECORDS, RING_TAIL_OFFSET, SEQ_MASK,
};
use crate::sys::Mapping;

/// Records the fast path copies at a time: the check that follows the copy reads them while
/// they are still in the L2 cache.
const FAST_BLOCK: usize = 2048;

/// A seq this far ahead of the merge point is corruption, not a slow thread.
const MAX_WINDOW: u64 = 1 << 26;

struct Ring {
    map: Mapping,
    tail: u64,
    /// The producer's head as read at the start of this round's drain.
    head: u64,
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

/// Where sealed batches go and fresh ones come from (recycled by the server).
pub struct Batches<'a> {
    /// Cleared batches to reuse.
    pub spare: &'a mut Vec<Batch>,
    /// Full (or sealed) batches, in order, to hand to the encoders.
    pub out: &'a mut Vec<Batch>,
    pub chunk_records: usize,
}

impl Batches<'_> {
    fn fresh(&mut self) -> Batch {
        self.spare.pop().unwrap_or_default()
    }
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
    /// The chunk being filled.
    batch: Batch,
    /// Which round anchors go into the batches.
    anchors: Anchors,
    /// Recording without addresses: the live blocks' ids, applied to the batch's records as they
    /// are merged (in seq order, so across chunks).
    block_ids: Option<trace::BlockIds>,
    /// Records of `batch` that have their block ids.
    ids_given: usize,
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
        mut batch: Batch,
        block_ids: Option<trace::BlockIds>,
    ) -> std::io::Result<Image> {
        let page = Mapping::map(page_fd, PAGE_BYTES)?;
        batch.clear();
        let mut anchors = Anchors::default();
        anchors.offer(0, 0, &mut batch);
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
            batch,
            anchors,
            block_ids,
            ids_given: 0,
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

    pub fn counter_now(&self) -> u64 {
        self.page.as_ref().map_or(self.next_seq, |p| {
            p.atomic_u64(PAGE_COUNTER_OFFSET).load(Ordering::Acquire)
        })
    }

    /// Drops the shared mappings and buffers of a finished image; returns its batch buffers
    /// for reuse.
    pub fn release(&mut self) -> Batch {
        self.page = None;
        self.rings = Vec::new();
        self.window = Window::new();
        self.markers = VecDeque::new();
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        batch
    }

    pub fn add_marker(&mut self, marker: Marker) {
        let at = self
            .markers
            .iter()
            .rposition(|m| m.seq <= marker.seq)
            .map_or(0, |i| i + 1);
        self.markers.insert(at, marker);
    }

    /// Drains the rings and moves every record the anchor covers into batches, in seq order.
    /// With `last`, the image is gone: holes are skipped, everything left is taken and the
    /// batch is sealed. Full batches (and the last one) go to `batches.out`.
    pub fn drain(&mut self, last: bool, batches: &mut Batches) -> Drained {
        let drained = self.drain_rings(last, batches);
        self.give_block_ids();
        drained
    }

    /// Without addresses: the records merged since the last call get their block ids, round by
    /// round (at one go per sealed batch, the drain thread would stop for milliseconds with a
    /// large live set, and a program allocating in a burst would find its ring full).
    fn give_block_ids(&mut self) {
        if let Some(ids) = &mut self.block_ids {
            let records = &mut self.batch.records;
            let from = self.ids_given.min(records.len());
            rewrite_with_block_ids(ids, &mut records[from..]);
            self.ids_given = records.len();
        }
    }

    fn drain_rings(&mut self, last: bool, batches: &mut Batches) -> Drained {
        let (c, t) = self.round;
        let mut drained = Drained::default();
        self.anchors.offer(c, t, &mut self.batch);
        // Records left from earlier rounds precede everything in the rings.
        self.take_front(c, false, batches);
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
                drained.records += self.fast_path(r, c, batches);
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
            drained.records += self.merge_path(c, batches);
            if !last && self.next_seq >= c {
                return drained;
            }
        }
        for r in 0..self.rings.len() {
            drained.records += self.ring_to_window(r);
        }
        // A hole is skipped only when the image is gone and its rings are empty (`last`).
        self.take_front(c, last, batches);
        if last {
            self.flush_markers_before(u64::MAX);
            self.seal(batches);
        }
        drained
    }

    /// The common case of one busy ring and nothing pending: its records are already in seq
    /// order, so they are copied straight into the batch (one copy per run, then a check per
    /// record) without passing through the window. Stops at the first record that needs the
    /// general path: out of order (another thread's record is not visible yet), at or past the
    /// anchor cut, or at a marker's place. Returns the records taken.
    fn fast_path(&mut self, r: usize, c: u64, batches: &mut Batches) -> u64 {
        let mut taken = 0;
        loop {
            let ring = &self.rings[r];
            let stop = self.markers.front().map_or(c, |m| m.seq.min(c));
            if ring.tail >= ring.head || self.next_seq >= stop {
                break;
            }
            if self.batch.len() >= batches.chunk_records {
                self.seal(batches);
                continue;
            }
            let slot = (ring.tail as usize) & (RING_RECORDS - 1);
            let n = ((ring.head - ring.tail) as usize)
                .min(RING_RECORDS - slot)
                .min(batches.chunk_records - self.batch.len())
                .min((stop - self.next_seq).min(FAST_BLOCK as u64) as usize);
            let from = self.batch.records.len();
            ring.map.copy_records(
                RING_HEADER_BYTES + slot * RECORD_SIZE,
                n,
                &mut self.batch.records,
            );
            let k = in_order_prefix(&self.batch.records[from..], self.next_seq);
            let stopped_at = self.batch.records.get(from + k).copied();
            self.batch.records.truncate(from + k);
            self.batch.tids.resize(from + k, ring.tid);
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
        }
        if self.batch.len() >= batches.chunk_records {
            self.seal(batches);
        }
        let ring = &self.rings[r];
        ring.map
            .atomic_u64(RING_TAIL_OFFSET)
            .store(ring.tail, Ordering::Release);
        taken
    }

    /// Several busy rings and nothing pending (threads allocating at the same time): merges
    /// them straight into the batch, taking each next seq from the ring whose oldest record it
    /// is (the ring of the previous record first: threads run in bursts), without the window.
    /// Stops where the general path is needed: no ring holds the next seq at its front (a
    /// thread has not published it yet), an unknown tag, the anchor cut or a marker's place.
    /// Returns the records taken.
    fn merge_path(&mut self, c: u64, batches: &mut Batches) -> u64 {
        let mut taken = 0;
        let mut first = 0;
        'records: loop {
            let stop = self.markers.front().map_or(c, |m| m.seq.min(c));
            if self.next_seq >= stop {
                break;
            }
            if self.batch.len() >= batches.chunk_records {
                self.seal(batches);
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
                    let slot = (ring.tail as usize) & (RING_RECORDS - 1);
                    let n = ((ring.head - ring.tail) as usize)
                        .min(RING_RECORDS - slot)
                        .min(batches.chunk_records - self.batch.len())
                        .min((stop - self.next_seq).min(RING_RECORDS as u64) as usize);
                    let records = ring
                        .map
                        .published_records(RING_HEADER_BYTES + slot * RECORD_SIZE, n);
                    // The thread's run of consecutive seqs (12 events on average with two
                    // threads on alloc-micro), taken at once.
                    let k = in_order_prefix(records, self.next_seq);
                    if k == 0 {
                        let [seq_op, addr, ..] = records[0];
                        if (seq_op >> OP_SHIFT) as u8 == OP_RING_OWNER {
                            ring.tid = addr as u32;
                            ring.tail += 1;
                            continue;
                        }
                        break;
                    }
                    self.batch.records.extend_from_slice(&records[..k]);
                    let tids = self.batch.tids.len() + k;
                    self.batch.tids.resize(tids, ring.tid);
                    let k = k as u64;
                    ring.tail += k;
                    self.next_seq += k;
                    self.records += k;
                    self.events += k;
                    taken += k;
                    first = i;
                    continue 'records;
                }
            }
            break;
        }
        for ring in &self.rings {
            ring.map
                .atomic_u64(RING_TAIL_OFFSET)
                .store(ring.tail, Ordering::Release);
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
        let mut records = 0;
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
            records += 1;
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
        records
    }

    /// Moves the window's front run of records below the anchor `c` into the batch. With
    /// `skip_holes` (the image is gone and its rings are empty) holes are skipped and
    /// everything is taken.
    fn take_front(&mut self, c: u64, skip_holes: bool, batches: &mut Batches) {
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
            if self.markers.front().is_some_and(|m| m.seq <= seq) {
                self.flush_markers_before(seq);
            }
            self.batch.records.push([seq_op, addr, size, old_addr]);
            self.batch.tids.push(tid as u32);
            self.next_seq = seq + 1;
            self.records += 1;
            self.events += 1;
            if self.batch.len() >= batches.chunk_records {
                self.seal(batches);
            }
        }
    }

    fn flush_markers_before(&mut self, seq: u64) {
        while self.markers.front().is_some_and(|m| m.seq <= seq) {
            let Some(mut m) = self.markers.pop_front() else {
                break;
            };
            m.seq = m.seq.max(self.next_seq); // arrived late: placed at the earliest possible point
            self.batch.markers.push((self.batch.records.len(), m));
            self.records += 1;
            self.markers_written += 1;
        }
    }

    /// Seals the current batch (periodic flush or full): hands it off when it holds records,
    /// starting the next one with the anchors it needs.
    pub fn seal(&mut self, batches: &mut Batches) {
        if self.batch.is_empty() {
            return;
        }
        let mut next = batches.fresh();
        next.clear();
        self.anchors.flush(&mut self.batch);
        self.batch.carry_anchors_to(&mut next);
        self.give_block_ids();
        self.ids_given = 0;
        let mut full = std::mem::replace(&mut self.batch, next);
        full.stream = self.stream;
        full.pid = self.pid;
        batches.out.push(full);
    }
}

/// Gives the blocks of `records` (in seq order) their ids. With a large live set (python3:
/// 1.8 M blocks) every lookup would wait for memory: the map slot of the record
/// `PREFETCH_AHEAD` later is fetched meanwhile. A small one stays in the caches, where the
/// prefetch only costs (alloc-micro: a tenth of the drain thread).
fn rewrite_with_block_ids(ids: &mut trace::BlockIds, records: &mut [[u64; 4]]) {
    const PREFETCH_AHEAD: usize = 16;
    let rewrite = |ids: &mut trace::BlockIds, [seq_op, addr, _, old_addr]: &mut [u64; 4]| {
        if let Some(op) = Op::from_tag((*seq_op >> OP_SHIFT) as u8) {
            ids.rewrite(op, *seq_op & SEQ_MASK, addr, old_addr);
        }
    };
    if !ids.worth_prefetching() {
        records.iter_mut().for_each(|r| rewrite(ids, r));
        return;
    }
    for i in 0..records.len() {
        if let Some(&[_, addr, _, old_addr]) = records.get(i + PREFETCH_AHEAD) {
            ids.prefetch(if old_addr != 0 { old_addr } else { addr });
        }
        rewrite(ids, &mut records[i]);
    }
}

/// How many of `records` continue the seq order from `next_seq` (dense, valid op tags): the
/// per-record check of the fast path, a tight loop over memory just copied.
#[inline]
fn in_order_prefix(records: &[[u64; 4]], next_seq: u64) -> usize {
    records
        .iter()
        .zip(next_seq..)
        .take_while(|(r, want)| {
            let tag = (r[0] >> OP_SHIFT) as u8;
            r[0] & SEQ_MASK == *want && Op::from_tag(tag).is_some()
        })
        .count()
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

    /// A shared file of `len` bytes standing in for one the shim hands over.
    fn memfd(len: usize) -> OwnedFd {
        use std::os::fd::FromRawFd;
        // SAFETY: plain system calls; the descriptor is checked and then owned.
        unsafe {
            let fd = libc::memfd_create(c"alloclens-test".as_ptr(), 0);
            assert!(fd >= 0, "memfd_create failed");
            assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
            OwnedFd::from_raw_fd(fd)
        }
    }

    /// The producer side of a ring: writes records and publishes them like the shim.
    struct Producer {
        map: Mapping,
        head: u64,
    }

    impl Producer {
        fn push(&mut self, seq_op: u64, addr: u64) {
            let at = RING_HEADER_BYTES + (self.head as usize & (RING_RECORDS - 1)) * RECORD_SIZE;
            for (i, word) in [seq_op, addr, 16, 0].into_iter().enumerate() {
                self.map
                    .atomic_u64(at + 8 * i)
                    .store(word, Ordering::Relaxed);
            }
            self.head += 1;
            self.map
                .atomic_u64(RING_HEAD_OFFSET)
                .store(self.head, Ordering::Release);
        }

        fn event(&mut self, seq: u64) {
            self.push(seq | u64::from(Op::Malloc as u8) << OP_SHIFT, 0x1000 + seq);
        }
    }

    fn image_with_ring() -> (Image, Mapping, Producer) {
        let page_fd = memfd(PAGE_BYTES);
        let page = Mapping::map(&page_fd, PAGE_BYTES).unwrap();
        let mut img = Image::new(3, 42, 0, 0, &page_fd, Batch::default(), None).unwrap();
        let ring_len = RING_HEADER_BYTES + RING_RECORDS * RECORD_SIZE;
        let ring_fd = memfd(ring_len);
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
        let ring_fd = memfd(ring_len);
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

    /// (seq, is marker) of every record of the batches, in order.
    fn flatten(batches: &[Batch]) -> Vec<(u64, bool)> {
        let mut all = Vec::new();
        for b in batches {
            assert_eq!(b.records.len(), b.tids.len());
            assert!(b.tids.iter().all(|&t| t == 77), "the ring owner's tid");
            let mut markers = b.markers.iter().peekable();
            for (i, r) in b.records.iter().enumerate() {
                while let Some((_, m)) = markers.next_if(|(at, _)| *at <= i) {
                    all.push((m.seq, true));
                }
                all.push((r[0] & SEQ_MASK, false));
            }
            all.extend(markers.map(|(_, m)| (m.seq, true)));
        }
        all
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
        // A batch is sealed once it reaches chunk_records after an event (a marker may make
        // it one longer), as the encoder did.
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
        assert_eq!(out.iter().map(Batch::len).collect::<Vec<_>>(), [5, 4]);
        assert_eq!((img.events, img.markers_written), (8, 1));
        assert!(out.iter().all(|b| (b.stream, b.pid) == (3, 42)));
        // Each batch carries the anchors that bracket it: from (0, 0) to the cut's (8, 80).
        assert_eq!(out[1].anchors, [(0, 0), (8, 80)]);

        // Seq 10 is reserved but never published (the thread died): a hole holds the merge.
        out.clear();
        producer.event(11);
        producer.event(12);
        round(&mut img, &page, 13, false, &mut out);
        assert!(out.is_empty(), "8 and 9 wait in the open batch");
        assert_eq!((img.events, img.holes), (10, 0));
        // The image is gone: the hole is skipped and the last batch sealed.
        round(&mut img, &page, 13, true, &mut out);
        assert_eq!(flatten(&out), [ev(8), ev(9), ev(11), ev(12)]);
        assert_eq!((img.events, img.holes, img.misplaced), (12, 1, 0));
        assert_eq!(out[0].anchors, [(8, 80), (13, 130)]);
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
        let merged: Vec<(u64, u32)> = out
            .iter()
            .flat_map(|batch| {
                batch
                    .records
                    .iter()
                    .zip(&batch.tids)
                    .map(|(r, &t)| (r[0] & SEQ_MASK, t))
            })
            .collect();
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
        // (seq, tid) of events, (seq, 0) of markers, in batch order.
        let mut merged = Vec::new();
        for batch in &out {
            assert!(
                batch.records.len() <= 4,
                "a batch holds at most chunk_records events"
            );
            let mut markers = batch.markers.iter().peekable();
            for (i, (r, &t)) in batch.records.iter().zip(&batch.tids).enumerate() {
                while let Some((_, m)) = markers.next_if(|(at, _)| *at <= i) {
                    merged.push((m.seq, 0));
                }
                merged.push((r[0] & SEQ_MASK, t));
            }
            merged.extend(markers.map(|(_, m)| (m.seq, 0)));
        }
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
        assert_eq!(out.iter().map(Batch::len).collect::<Vec<_>>(), [4, 4, 2]);
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
