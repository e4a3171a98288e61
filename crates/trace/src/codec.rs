//! The events chunk codec: columnar, delta-coded records, then zstd.
//!
//! A chunk is decodable on its own: every reference (a free pointing at its allocation, a
//! predicted address) stays inside the chunk, and the chunk carries the time anchors its events
//! interpolate between. Layout and modes are specified in docs/trace-format.md.
use std::collections::HashMap;

use crate::event::{Event, Marker, Op, Record};
use crate::varint::{self, Cursor};

/// Op-byte tag of a marker (event ops use their `Op` tag, 1..=15).
const TAG_MARKER: u8 = 0;
const TAG_MASK: u8 = 0x0f;

// Address modes of a new block (allocations, realloc's result): bits 4-5.
const NEW_EXPLICIT: u8 = 0;
const NEW_NULL: u8 = 1;
const NEW_PREDICTED: u8 = 2;
const NEW_SAME_AS_OLD: u8 = 3;
// Address modes of a released block (frees, realloc's argument): bits 4-5 for frees, 6-7 for realloc.
const OLD_EXPLICIT: u8 = 0;
const OLD_NULL: u8 = 1;
const OLD_BACKREF: u8 = 2;
/// Only in chunks without addresses: a block allocated in an earlier chunk, by the seq of its
/// allocation (a delta from the previous one in the chunk, in the addrs column).
const OLD_SYNTHETIC: u8 = 3;
// Frees: bit 6 set when a size was given (free_sized and the like).
const FREE_HAS_SIZE: u8 = 0x40;
// Allocations (not realloc): bit 6 set when a predicted address is below the top of its class
// stack; its depth is in the depths column.
const ALLOC_DEEPER: u8 = 0x40;

/// Chunk flags (header): the chunk stores no heap addresses (`ChunkEncoder::without_addresses`).
const FLAG_SYNTHETIC: u64 = 1;

/// The top bit of a synthetic address: user-space pointers never have it.
pub const SYNTHETIC_BIT: u64 = 1 << 63;

/// The address a trace without addresses gives the block allocated by the event `seq`: a block
/// id, unique in its process image, that no real pointer can equal.
#[inline]
pub fn synthetic_address(seq: u64) -> u64 {
    SYNTHETIC_BIT | seq
}

const TABLE_BITS: u32 = 15;
/// The table without addresses (`slot_of_id`): 1 MiB of `IdSlot`s, written in seq order. Measured against
/// 2^15..2^18 slots by re-encoding traces: python3's chunks shrank from 0.125 (2^15) to 0.113
/// B/record at 2^17, no gain beyond; cc1 and alloc-micro stayed within 1 %.
const ID_TABLE_BITS: u32 = 17;
const PREDICT_DEPTH: usize = 16;
const CLASSES: usize = 140;

/// What kind of address fields an op has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Alloc,
    Free,
    Realloc,
}

fn shape(op: Op) -> Shape {
    if op.is_free() {
        Shape::Free
    } else if op.is_realloc() {
        Shape::Realloc
    } else {
        Shape::Alloc
    }
}

/// glibc-like size classes: 16-byte steps up to 1 KiB, then powers of two.
#[inline]
fn size_class(size: u64) -> usize {
    if size <= 1032 {
        (size + 8).div_ceil(16) as usize
    } else {
        66 + (64 - size.leading_zeros()) as usize
    }
}

/// Guesses the address of the next allocation of a size class: allocators hand back the most
/// recently freed block of the class first (glibc's tcache, most free lists). Encoder and decoder
/// run the same predictor over the same events, so a hit costs no bytes.
struct Predictor {
    classes: Vec<ClassStack>,
}

/// One class's stack of freed addresses, kept in a ring so that pushing onto a full stack (the
/// oldest drops out) moves nothing.
#[derive(Clone, Copy)]
struct ClassStack {
    slots: [u64; PREDICT_DEPTH],
    /// Slot of the top (valid when `depth > 0`).
    top: u8,
    depth: u8,
}

const _: () = assert!(PREDICT_DEPTH.is_power_of_two() && PREDICT_DEPTH <= 128);

impl ClassStack {
    /// Slot of the entry `k` places below the top.
    #[inline]
    fn slot(&self, k: usize) -> usize {
        (self.top as usize).wrapping_sub(k) & (PREDICT_DEPTH - 1)
    }
}

impl Predictor {
    fn new() -> Self {
        Predictor {
            classes: vec![
                ClassStack {
                    slots: [0; PREDICT_DEPTH],
                    top: 0,
                    depth: 0,
                };
                CLASSES
            ],
        }
    }

    fn reset(&mut self) {
        self.classes.iter_mut().for_each(|c| c.depth = 0);
    }

    #[inline]
    fn freed_in_class(&mut self, addr: u64, c: usize) {
        let s = &mut self.classes[c];
        s.top = ((s.top as usize + 1) & (PREDICT_DEPTH - 1)) as u8;
        s.slots[s.top as usize] = addr;
        s.depth = (s.depth + 1).min(PREDICT_DEPTH as u8);
    }

    /// The address `k` places below the top of class `c`'s stack (0: the top), if any.
    #[inline]
    fn guess(&self, c: usize, k: usize) -> Option<u64> {
        let s = &self.classes[c];
        (k < s.depth as usize).then(|| s.slots[s.slot(k)])
    }

    /// After an allocation of class `c` at `addr`: takes `addr` out of the class's stack and
    /// returns how far below the top it was (0: the top), or `None` when it was not there.
    /// Allocators mostly hand back the top; the rest is often a few places down (glibc's tcache
    /// keeps 7 blocks per size, the rest wait in other lists).
    #[inline]
    fn allocated(&mut self, addr: u64, c: usize) -> Option<usize> {
        let s = &self.classes[c];
        let k = (0..s.depth as usize).find(|&k| s.slots[s.slot(k)] == addr)?;
        self.take(c, k);
        Some(k)
    }

    /// Takes out the entry `k` places below the top of class `c` (which exists): what
    /// `allocated` does once it found the address there. The decoder of a predicted address
    /// knows `k` already and skips the search.
    #[inline]
    fn take(&mut self, c: usize, k: usize) {
        let s = &mut self.classes[c];
        // The entries above it move one place down; the top slot is given up.
        for j in (1..=k).rev() {
            s.slots[s.slot(j)] = s.slots[s.slot(j - 1)];
        }
        s.top = s.slot(1) as u8;
        s.depth -= 1;
    }
}

/// A producer of the current chunk, found by address. 16 bytes, so the table with addresses
/// (512 KiB) stays in a core's L2 cache: every free looks it up, at an address-hashed (random)
/// slot.
#[derive(Clone, Copy, Default)]
struct Slot {
    addr: u64,
    index: u32,
    /// The chunk's generation (upper 24 bits; 0 = empty) and the size class (low 8 bits).
    tag: u32,
}

const GENERATION_LIMIT: u32 = 1 << 24;

/// A producer of the current chunk without addresses, in the slot of its seq (`slot_of_id`): the
/// slot tells the seq apart from others of the same slot by its high bits, so 8 bytes do (the
/// table's 1 MiB stays in a core's L2 cache next to the recorder's block-id map, where 16-byte
/// slots took 2 MiB).
#[derive(Clone, Copy, Default)]
struct IdSlot {
    index: u32,
    /// `seq >> ID_TABLE_BITS`, truncated: seqs of one chunk that share a slot differ there.
    seq_high: u16,
    /// The chunk's generation, truncated (0 = empty; the table is cleared when it wraps).
    generation: u16,
}

/// `IdSlot::index` of a producer already released in this chunk.
const RELEASED: u32 = u32::MAX;

/// An explicit address: its zigzag delta from `base`.
#[inline(always)]
fn put_address(col: &mut Vec<u8>, addr: u64, base: u64) {
    varint::put(col, varint::zigzag(addr.wrapping_sub(base) as i64));
}

#[inline(always)]
fn read_address(addrs: &mut Cursor<'_>, base: u64) -> Result<u64, DecodeError> {
    let z = addrs
        .varint()
        .ok_or_else(|| bad("address column ends early"))?;
    Ok(base.wrapping_add(varint::unzigzag(z) as u64))
}

/// A column of values split into planes: the low byte of each value in `lo`, the rest (`v >> 8`)
/// as a nibble in `hi`, two per byte, with 15 meaning "15 + a varint in `big`". zstd codes bytes
/// with whole-bit Huffman codes and finds spurious matches in low-entropy bytes; a varint mixes
/// a value's low bits with continuation bits. Planes keep each distribution clean, and packing
/// the small high parts in pairs halves the Huffman floor (together about 15 % smaller on
/// sizes and back-references).
#[derive(Default)]
struct Split {
    lo: Vec<u8>,
    hi: Vec<u8>,
    big: Vec<u8>,
    /// The last byte of `hi` has its high nibble free.
    half: bool,
}

impl Split {
    fn clear(&mut self) {
        self.lo.clear();
        self.hi.clear();
        self.big.clear();
        self.half = false;
    }
}

#[inline(always)]
fn put_split(col: &mut Split, v: u64) {
    col.lo.push(v as u8);
    let h = v >> 8;
    let nibble = h.min(15) as u8;
    match (col.half, col.hi.last_mut()) {
        (true, Some(last)) => {
            *last |= nibble << 4;
            col.half = false;
        }
        _ => {
            col.hi.push(nibble);
            col.half = true;
        }
    }
    if h >= 15 {
        varint::put(&mut col.big, h - 15);
    }
}

/// The chunk's columns (docs/trace-format.md, "Events chunks").
#[derive(Default)]
struct Columns {
    ops: Vec<u8>,
    /// (records since the previous gap, gap) pairs: only where a seq is not the previous + 1.
    gaps: Vec<u8>,
    /// (thread index, run length) pairs.
    tid_runs: Vec<u8>,
    sizes: Split,
    addrs: Vec<u8>,
    refs: Split,
    depths: Vec<u8>,
    mark_times: Vec<u8>,
    labels: Vec<u8>,
}

impl Columns {
    fn in_file_order(&self) -> [&[u8]; 13] {
        [
            &self.ops,
            &self.gaps,
            &self.tid_runs,
            &self.sizes.lo,
            &self.sizes.hi,
            &self.sizes.big,
            &self.addrs,
            &self.refs.lo,
            &self.refs.hi,
            &self.refs.big,
            &self.depths,
            &self.mark_times,
            &self.labels,
        ]
    }

    fn len(&self) -> usize {
        self.in_file_order().iter().map(|c| c.len() + 10).sum()
    }

    fn clear(&mut self) {
        self.sizes.clear();
        self.refs.clear();
        for col in [
            &mut self.ops,
            &mut self.gaps,
            &mut self.tid_runs,
            &mut self.addrs,
            &mut self.depths,
            &mut self.mark_times,
            &mut self.labels,
        ] {
            col.clear();
        }
    }
}

/// Appends the anchor `(seq, t_ns)` to a list in seq order: an anchor behind the last one, or a
/// repeat of it, is dropped, and of a run with the same seq only the first and last are kept (so
/// an idle image's list stays short). The encoder's rule, for callers that gather anchors first.
pub fn append_anchor(anchors: &mut Vec<(u64, u64)>, seq: u64, t_ns: u64) {
    if let Some(&(s, t)) = anchors.last() {
        if seq < s || (seq == s && t_ns == t) {
            return;
        }
        let n = anchors.len();
        if seq == s && n >= 2 && anchors[n - 2].0 == seq {
            anchors[n - 1] = (seq, t_ns);
            return;
        }
    }
    anchors.push((seq, t_ns));
}

/// An encoded events chunk, ready to be framed by the writer.
#[derive(Debug, Clone)]
pub struct EncodedChunk {
    /// u32 little-endian raw length, then the zstd frame of the raw columns.
    pub payload: Vec<u8>,
    pub records: u32,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// A sealed events chunk before compression: the raw column layout of docs/trace-format.md.
#[derive(Debug, Clone)]
pub struct UncompressedChunk {
    pub raw: Vec<u8>,
    pub records: u32,
    pub first_seq: u64,
    pub last_seq: u64,
}

impl UncompressedChunk {
    /// Compresses into the events payload. Reusing one `Compressor` (one zstd context) across
    /// chunks saves setting up a context per chunk.
    pub fn compress(
        &self,
        compressor: &mut zstd::bulk::Compressor<'_>,
    ) -> std::io::Result<EncodedChunk> {
        let raw_len = u32::try_from(self.raw.len())
            .map_err(|_| std::io::Error::other("events chunk larger than 4 GiB"))?;
        let compressed = compressor.compress(&self.raw)?;
        let mut payload = Vec::with_capacity(4 + compressed.len());
        payload.extend_from_slice(&raw_len.to_le_bytes());
        payload.extend_from_slice(&compressed);
        Ok(EncodedChunk {
            payload,
            records: self.records,
            first_seq: self.first_seq,
            last_seq: self.last_seq,
        })
    }
}

/// Error when records are pushed out of order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record with seq {seq} pushed after seq {expected_at_least} was passed: records must come in seq order")]
pub struct OrderError {
    pub seq: u64,
    pub expected_at_least: u64,
}

/// Builds one stream's events chunks. Feed records in seq order and time anchors (points where the
/// stream's counter was seen at a known time), call `finish` when `len()` is big enough.
pub struct ChunkEncoder {
    first_seq: Option<u64>,
    last_seq: u64,
    expected: u64,
    records: u32,
    anchors: Vec<(u64, u64)>,
    tids: Vec<u32>,
    /// tid -> index in `tids`, used only once the table outgrows a linear scan.
    tid_index: HashMap<u32, u32>,
    /// The current run of records of one thread: (tid, index in `tids`, length).
    run: (u32, u32, u32),
    /// Index of the record that carried the last seq gap.
    last_gap_record: u32,
    cols: Columns,
    /// Producers by address (chunks with addresses).
    table: Vec<Slot>,
    /// Producers by seq (chunks without addresses).
    ids: Vec<IdSlot>,
    generation: u32,
    /// Blocks produced (allocations and realloc results) in this chunk: back-references count
    /// in producers, not records, which keeps them about half as large.
    produced: u32,
    predictor: Predictor,
    /// Last new (allocated) address: explicit new addresses are deltas from it.
    base: u64,
    /// Last released address: explicit released addresses are deltas from it (frees walk their
    /// own part of the heap, allocations theirs).
    base_old: u64,
    /// Store no addresses (`without_addresses`).
    synthetic: bool,
    /// Seq of the last block referred to by `OLD_SYNTHETIC` in this chunk.
    last_synthetic: u64,
    level: i32,
    /// Created on the first `finish` (callers that compress elsewhere never need one).
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

impl Default for ChunkEncoder {
    fn default() -> Self {
        Self::new(3)
    }
}

#[inline]
fn slot_of(addr: u64) -> usize {
    ((addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize
}

/// `slot_of` for synthetic addresses: direct-mapped by seq. Blocks are produced in seq order, so
/// the table is written sequentially (a hashed slot was a cache miss per allocation) and a block
/// keeps its slot until `2^ID_TABLE_BITS` seqs later, the young blocks most frees name.
#[inline]
fn slot_of_id(id: u64) -> usize {
    (id & ((1 << ID_TABLE_BITS) - 1)) as usize
}

impl ChunkEncoder {
    /// `level`: zstd level (1 = fastest; 3 is a good default).
    pub fn new(level: i32) -> Self {
        ChunkEncoder {
            first_seq: None,
            last_seq: 0,
            expected: 0,
            records: 0,
            anchors: Vec::new(),
            tids: Vec::new(),
            tid_index: HashMap::new(),
            run: (0, 0, 0),
            last_gap_record: 0,
            cols: Columns::default(),
            table: vec![Slot::default(); 1 << TABLE_BITS],
            ids: Vec::new(),
            generation: 1,
            produced: 0,
            predictor: Predictor::new(),
            base: 0,
            base_old: 0,
            synthetic: false,
            last_synthetic: 0,
            level,
            compressor: None,
        }
    }

    /// Chunks without heap addresses: an allocation's block is known by the seq of its event
    /// (the decoder gives it `synthetic_address(seq)`), and a free or realloc must name a block
    /// allocated in the trace by that synthetic address (a real address when it is not known:
    /// allocated before tracing began). The caller keeps the map from real addresses across
    /// chunks; the encoder then needs neither predictions nor address deltas, and a free of a
    /// block from an earlier chunk costs about a bit when blocks die in allocation order.
    pub fn without_addresses(mut self) -> Self {
        self.synthetic = true;
        self.table = Vec::new();
        if self.ids.len() != 1 << ID_TABLE_BITS {
            self.ids = vec![IdSlot::default(); 1 << ID_TABLE_BITS];
        }
        self
    }

    /// Forgets everything of the stream it encoded (records not sealed yet, anchors) so it can
    /// encode another stream: cheaper than a new encoder, whose tables take 0.5 to 1 MiB.
    pub fn reset(&mut self) {
        self.anchors.clear();
        self.reset_columns();
    }

    /// Records pushed since the last `finish`.
    pub fn len(&self) -> usize {
        self.records as usize
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The stream's counter was `seq` at `t_ns`: events with a lower seq happened before, events
    /// from `seq` on after. Anchors must come in seq order (equal seqs allowed).
    pub fn push_anchor(&mut self, seq: u64, t_ns: u64) {
        append_anchor(&mut self.anchors, seq, t_ns);
    }

    #[inline(always)]
    fn begin_record(&mut self, seq: u64, tid: u32) -> Result<(), OrderError> {
        if self.first_seq.is_none() {
            self.first_seq = Some(seq);
            self.expected = seq;
            self.last_synthetic = seq;
        }
        if seq < self.expected {
            return Err(OrderError {
                seq,
                expected_at_least: self.expected,
            });
        }
        if seq != self.expected {
            // Seqs are dense within an image: a gap (a hole, a skipped record) is rare.
            varint::put(
                &mut self.cols.gaps,
                u64::from(self.records - self.last_gap_record),
            );
            varint::put(&mut self.cols.gaps, seq - self.expected);
            self.last_gap_record = self.records;
        }
        self.last_seq = self.last_seq.max(seq);
        if self.run.2 > 0 && self.run.0 == tid {
            self.run.2 += 1;
        } else {
            self.end_tid_run();
            let idx = self.tid_slot(tid);
            self.run = (tid, idx, 1);
        }
        Ok(())
    }

    #[cold]
    fn end_tid_run(&mut self) {
        if self.run.2 > 0 {
            varint::put(&mut self.cols.tid_runs, u64::from(self.run.1));
            varint::put(&mut self.cols.tid_runs, u64::from(self.run.2));
        }
    }

    /// Index of `tid` in the chunk's thread table, adding it if new. Called at each change of
    /// thread (often, when threads allocate at the same time): a linear scan while the table is
    /// small (the common case), a map beyond.
    fn tid_slot(&mut self, tid: u32) -> u32 {
        const SCAN: usize = 32;
        let next = self.tids.len() as u32;
        if self.tids.len() <= SCAN {
            if let Some(i) = self.tids.iter().position(|&t| t == tid) {
                return i as u32;
            }
            self.tids.push(tid);
            if self.tids.len() > SCAN {
                self.tid_index = (0u32..).zip(&self.tids).map(|(i, &t)| (t, i)).collect();
            }
            return next;
        }
        let idx = *self.tid_index.entry(tid).or_insert(next);
        if idx == next {
            self.tids.push(tid);
        }
        idx
    }

    pub fn push_marker(&mut self, marker: &Marker) -> Result<(), OrderError> {
        self.begin_record(marker.seq, marker.tid)?;
        let cols = &mut self.cols;
        cols.ops.push(TAG_MARKER);
        varint::put(&mut cols.mark_times, marker.t_ns);
        varint::put(&mut cols.labels, marker.label.len() as u64);
        cols.labels.extend_from_slice(marker.label.as_bytes());
        self.records += 1;
        Ok(())
    }

    /// Pushes an event; its `t_ns` is ignored (times come from the anchors). Always inlined:
    /// callers push events in a loop, where the call's register saves cost a tenth of it.
    #[inline(always)]
    pub fn push_event(&mut self, e: &Event) -> Result<(), OrderError> {
        self.begin_record(e.seq, e.tid)?;
        self.expected = e.seq + 1;
        let tag = e.op as u8;
        let byte = match shape(e.op) {
            Shape::Alloc => {
                put_split(&mut self.cols.sizes, e.size);
                tag | self.new_block(e, 0, true) << 4
            }
            Shape::Free => {
                let mut b = tag | self.encode_old(e.addr) << 4;
                if e.size != 0 {
                    b |= FREE_HAS_SIZE;
                    put_split(&mut self.cols.sizes, e.size);
                }
                b
            }
            Shape::Realloc => {
                put_split(&mut self.cols.sizes, e.size);
                let old_mode = self.encode_old(e.old_addr);
                let new_mode = self.new_block(e, e.old_addr, false);
                tag | new_mode << 4 | old_mode << 6
            }
        };
        self.cols.ops.push(byte);
        self.records += 1;
        Ok(())
    }

    /// A new block (allocation, realloc result): its address mode; a non-null block becomes a
    /// producer. Without addresses it is known by its event's seq and costs nothing more.
    #[inline(always)]
    fn new_block(&mut self, e: &Event, old: u64, deeper: bool) -> u8 {
        if self.synthetic {
            if e.addr == 0 {
                return NEW_NULL;
            }
            self.ids[slot_of_id(e.seq)] = IdSlot {
                index: self.produced,
                seq_high: (e.seq >> ID_TABLE_BITS) as u16,
                generation: self.generation as u16,
            };
            self.produced += 1;
            return NEW_EXPLICIT;
        }
        let mode = self.encode_new(e.addr, e.size, old, deeper);
        self.produced(e.addr, e.size);
        mode
    }

    /// Encodes a released address; updates the predictor like the decoder will. Without
    /// addresses (`without_addresses`) the predictor is unused, a block of an earlier chunk is a
    /// synthetic reference, and only explicit addresses move their base.
    #[inline(always)]
    fn encode_old(&mut self, addr: u64) -> u8 {
        if addr == 0 {
            return OLD_NULL;
        }
        if self.synthetic {
            if addr & SYNTHETIC_BIT != 0 {
                return self.encode_old_id(addr & !SYNTHETIC_BIT);
            }
            // A block allocated before tracing keeps its real address: no producer has it.
            put_address(&mut self.cols.addrs, addr, self.base_old);
            self.base_old = addr;
            return OLD_EXPLICIT;
        }
        let slot = &mut self.table[slot_of(addr)];
        if slot.tag >> 8 == self.generation && slot.addr == addr {
            put_split(&mut self.cols.refs, u64::from(self.produced - slot.index));
            let class = (slot.tag & 0xff) as usize;
            slot.tag = 0; // released: a second free of it is not a back-reference
            self.predictor.freed_in_class(addr, class);
            self.base_old = addr;
            return OLD_BACKREF;
        }
        put_address(&mut self.cols.addrs, addr, self.base_old);
        self.base_old = addr;
        OLD_EXPLICIT
    }

    /// Encodes the release of the block allocated by the event `seq`: a back-reference when it
    /// was produced in this chunk (and not released yet), else its seq.
    #[inline(always)]
    fn encode_old_id(&mut self, seq: u64) -> u8 {
        let slot = &mut self.ids[slot_of_id(seq)];
        if slot.generation == self.generation as u16
            && slot.seq_high == (seq >> ID_TABLE_BITS) as u16
            && slot.index != RELEASED
        {
            put_split(&mut self.cols.refs, u64::from(self.produced - slot.index));
            slot.index = RELEASED; // a second free of it is not a back-reference
            return OLD_BACKREF;
        }
        let delta = seq.wrapping_sub(self.last_synthetic) as i64;
        varint::put(&mut self.cols.addrs, varint::zigzag(delta));
        self.last_synthetic = seq;
        OLD_SYNTHETIC
    }

    /// Encodes a new block's address: the mode bits of the op byte (with `ALLOC_DEEPER` when
    /// `deeper` allows it). `old` is realloc's argument (0 otherwise).
    #[inline(always)]
    fn encode_new(&mut self, addr: u64, size: u64, old: u64, deeper: bool) -> u8 {
        if addr == 0 {
            return NEW_NULL;
        }
        let found = self.predictor.allocated(addr, size_class(size));
        let mode = match found {
            _ if old != 0 && addr == old => NEW_SAME_AS_OLD,
            Some(0) => NEW_PREDICTED,
            Some(k) if deeper => {
                varint::put(&mut self.cols.depths, k as u64 - 1);
                NEW_PREDICTED | ALLOC_DEEPER >> 4
            }
            _ => {
                put_address(&mut self.cols.addrs, addr, self.base);
                NEW_EXPLICIT
            }
        };
        self.base = addr;
        mode
    }

    /// Every realloc and non-failed allocation is a producer, numbered in order.
    #[inline(always)]
    fn produced(&mut self, addr: u64, size: u64) {
        if addr != 0 {
            self.table[slot_of(addr)] = Slot {
                addr,
                index: self.produced,
                tag: self.generation << 8 | size_class(size) as u32,
            };
            self.produced += 1;
        }
    }

    /// Seals the chunk (`None` when empty) and resets for the next one.
    pub fn finish(&mut self) -> std::io::Result<Option<EncodedChunk>> {
        let Some(raw) = self.finish_raw(Vec::new()) else {
            return Ok(None);
        };
        if self.compressor.is_none() {
            self.compressor = Some(zstd::bulk::Compressor::new(self.level)?);
        }
        match self.compressor.as_mut() {
            Some(c) => raw.compress(c).map(Some),
            None => Ok(None),
        }
    }

    /// Seals the chunk without compressing it (`None` when empty), so compression can run
    /// elsewhere (`UncompressedChunk::compress`). `buf` is a buffer to fill (its contents are dropped):
    /// pass back the `raw` of an earlier chunk to avoid a fresh allocation per chunk.
    pub fn finish_raw(&mut self, mut raw: Vec<u8>) -> Option<UncompressedChunk> {
        let first_seq = self.first_seq?;
        let last_seq = self.last_seq;
        self.end_tid_run();
        self.run = (0, 0, 0);
        if self.tids.len() <= 1 {
            self.cols.tid_runs.clear(); // one thread: the thread table says it all
        }
        // Anchors that bracket this chunk: the last at or before first_seq to the first after last_seq.
        let lo = self
            .anchors
            .iter()
            .rposition(|a| a.0 <= first_seq)
            .unwrap_or(0);
        let hi = self
            .anchors
            .iter()
            .position(|a| a.0 > last_seq)
            .map_or(self.anchors.len(), |i| i + 1);
        let anchors = &self.anchors[lo..hi.max(lo)];

        raw.clear();
        raw.reserve(64 + 20 * (self.tids.len() + anchors.len()) + self.cols.len());
        varint::put(&mut raw, first_seq);
        varint::put(&mut raw, if self.synthetic { FLAG_SYNTHETIC } else { 0 });
        varint::put(&mut raw, u64::from(self.records));
        varint::put(&mut raw, self.tids.len() as u64);
        for &t in &self.tids {
            varint::put(&mut raw, u64::from(t));
        }
        varint::put(&mut raw, anchors.len() as u64);
        let mut prev = (first_seq, 0u64);
        for (i, &(s, t)) in anchors.iter().enumerate() {
            if i == 0 {
                varint::put(&mut raw, varint::zigzag(s.wrapping_sub(first_seq) as i64));
                varint::put(&mut raw, t);
            } else {
                varint::put(&mut raw, s - prev.0);
                varint::put(&mut raw, varint::zigzag(t.wrapping_sub(prev.1) as i64));
            }
            prev = (s, t);
        }
        for col in self.cols.in_file_order() {
            varint::put(&mut raw, col.len() as u64);
            raw.extend_from_slice(col);
        }
        let chunk = UncompressedChunk {
            raw,
            records: self.records,
            first_seq,
            last_seq,
        };

        // Keep the anchors the next chunk may need (from the last one at or before last_seq + 1).
        let keep = self
            .anchors
            .iter()
            .rposition(|a| a.0 <= last_seq + 1)
            .unwrap_or(0);
        self.anchors.drain(..keep);
        self.reset_columns();
        Some(chunk)
    }

    fn reset_columns(&mut self) {
        self.first_seq = None;
        self.last_seq = 0;
        self.records = 0;
        self.tids.clear();
        self.tid_index.clear();
        self.run = (0, 0, 0);
        self.last_gap_record = 0;
        self.cols.clear();
        self.generation += 1;
        // The id table keeps 16 bits of the generation.
        let limit = if self.synthetic {
            1 << 16
        } else {
            GENERATION_LIMIT
        };
        if self.generation == limit {
            // Tags cannot tell this generation from an old one: start from empty tables.
            self.table.fill(Slot::default());
            self.ids.fill(IdSlot::default());
            self.generation = 1;
        }
        self.produced = 0;
        self.predictor.reset();
        self.base = 0;
        self.base_old = 0;
    }
}

/// Why a chunk could not be decoded (the reader adds file and chunk context).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

fn bad(what: &str) -> DecodeError {
    DecodeError(what.to_string())
}

/// Names of an events chunk's columns, in file order.
pub const COLUMN_NAMES: [&str; 13] = [
    "ops",
    "gaps",
    "tid_runs",
    "sizes_lo",
    "sizes_hi",
    "sizes_big",
    "addrs",
    "refs_lo",
    "refs_hi",
    "refs_big",
    "depths",
    "mark_times",
    "labels",
];

/// The columns of an events chunk payload, decompressed (a diagnostic: where the bytes go).
pub fn payload_columns(payload: &[u8]) -> Result<Vec<(&'static str, Vec<u8>)>, DecodeError> {
    let body = payload
        .get(4..)
        .ok_or_else(|| bad("events payload too short"))?;
    let raw = zstd::bulk::decompress(body, crate::format::MAX_RAW_CHUNK as usize)
        .map_err(|e| DecodeError(format!("zstd: {e}")))?;
    let mut c = Cursor::new(&raw);
    let trunc = || bad("chunk header cut short");
    c.varint().ok_or_else(trunc)?; // first seq
    c.varint().ok_or_else(trunc)?; // flags
    c.varint().ok_or_else(trunc)?; // records
    for _ in 0..c.varint().ok_or_else(trunc)? {
        c.varint().ok_or_else(trunc)?;
    }
    for _ in 0..2 * c.varint().ok_or_else(trunc)? {
        c.varint().ok_or_else(trunc)?;
    }
    COLUMN_NAMES
        .iter()
        .map(|&name| {
            let len = c.varint().ok_or_else(trunc)?;
            let bytes = c
                .take(usize::try_from(len).map_err(|_| trunc())?)
                .ok_or_else(trunc)?;
            Ok((name, bytes.to_vec()))
        })
        .collect()
}

/// Decompresses and decodes one events chunk payload. For many chunks, a [`ChunkDecoder`]
/// reuses its buffers (and the caller's record buffer) across chunks.
pub fn decode_payload(payload: &[u8]) -> Result<Vec<Record>, DecodeError> {
    let mut out = Vec::new();
    ChunkDecoder::new().decode(payload, &mut out)?;
    Ok(out)
}

/// Decodes events chunks one after another without per-chunk allocation: the zstd context, the
/// decompressed bytes and the decoder's tables are kept from one chunk to the next. One per
/// decoding thread.
pub struct ChunkDecoder {
    /// Created on the first chunk.
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
    raw: Vec<u8>,
    predictor: Predictor,
    /// Address and size class of each producer of the chunk (allocation or realloc with a
    /// non-null result), in order: what a back-reference resolves to.
    producers: Vec<(u64, u32)>,
    tids: Vec<u32>,
    anchors: Vec<(u64, u64)>,
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkDecoder {
    pub fn new() -> Self {
        ChunkDecoder {
            decompressor: None,
            raw: Vec::new(),
            predictor: Predictor::new(),
            producers: Vec::new(),
            tids: Vec::new(),
            anchors: Vec::new(),
        }
    }

    /// Decodes one events chunk payload into `out` (cleared first; its capacity is reused).
    /// On error `out` holds an unspecified prefix of the records.
    pub fn decode(&mut self, payload: &[u8], out: &mut Vec<Record>) -> Result<(), DecodeError> {
        out.clear();
        if payload.len() < 4 {
            return Err(bad("events payload too short"));
        }
        let (len, body) = payload.split_at(4);
        let raw_len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
        if raw_len > crate::format::MAX_RAW_CHUNK {
            return Err(DecodeError(format!(
                "declared raw size {raw_len} is implausible"
            )));
        }
        if self.decompressor.is_none() {
            self.decompressor = Some(
                zstd::bulk::Decompressor::new().map_err(|e| DecodeError(format!("zstd: {e}")))?,
            );
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        raw.reserve(raw_len as usize);
        let result = match self.decompressor.as_mut() {
            Some(d) => d
                .decompress_to_buffer(body, &mut raw)
                .map_err(|e| DecodeError(format!("zstd: {e}")))
                .and_then(|n| {
                    if n == raw_len as usize && raw.len() == n {
                        self.decode_raw(&raw, out)
                    } else {
                        Err(bad("decompressed size differs from the declared size"))
                    }
                }),
            None => Err(bad("no zstd context")),
        };
        self.raw = raw;
        result
    }

    fn decode_raw(&mut self, raw: &[u8], out: &mut Vec<Record>) -> Result<(), DecodeError> {
        let mut c = Cursor::new(raw);
        let trunc = || bad("chunk header cut short");
        let first_seq = c.varint().ok_or_else(trunc)?;
        let flags = c.varint().ok_or_else(trunc)?;
        if flags & !FLAG_SYNTHETIC != 0 {
            return Err(DecodeError(format!("unknown chunk flags {flags:#x}")));
        }
        let synthetic = flags & FLAG_SYNTHETIC != 0;
        let n = c.varint().ok_or_else(trunc)?;
        if n > u64::from(crate::format::MAX_RAW_CHUNK) {
            return Err(bad("implausible record count"));
        }
        let n_tids = c.varint().ok_or_else(trunc)?;
        if n_tids > n.max(1) {
            return Err(bad("more threads than records"));
        }
        let tids = &mut self.tids;
        tids.clear();
        for _ in 0..n_tids {
            tids.push(
                u32::try_from(c.varint().ok_or_else(trunc)?)
                    .map_err(|_| bad("thread id too large"))?,
            );
        }
        let n_anchors = c.varint().ok_or_else(trunc)?;
        if n_anchors > raw.len() as u64 {
            return Err(bad("implausible anchor count"));
        }
        let anchors = &mut self.anchors;
        anchors.clear();
        for i in 0..n_anchors {
            let a = c.varint().ok_or_else(trunc)?;
            let b = c.varint().ok_or_else(trunc)?;
            if i == 0 {
                anchors.push((first_seq.wrapping_add(varint::unzigzag(a) as u64), b));
            } else {
                let (s, t) = anchors[anchors.len() - 1];
                let s2 = s
                    .checked_add(a)
                    .ok_or_else(|| bad("anchor seq overflows"))?;
                anchors.push((s2, t.wrapping_add(varint::unzigzag(b) as u64)));
            }
        }
        let mut column = || -> Result<Cursor<'_>, DecodeError> {
            let len = c.varint().ok_or_else(trunc)?;
            let bytes = c
                .take(usize::try_from(len).map_err(|_| trunc())?)
                .ok_or_else(trunc)?;
            Ok(Cursor::new(bytes))
        };
        let mut ops = column()?;
        let mut gaps = column()?;
        let mut tid_runs = column()?;
        let mut sizes = SplitCursor {
            lo: column()?,
            hi: column()?,
            big: column()?,
            pending: None,
        };
        let mut addrs = column()?;
        let mut refs = SplitCursor {
            lo: column()?,
            hi: column()?,
            big: column()?,
            pending: None,
        };
        let mut depths = column()?;
        let mut mark_times = column()?;
        let mut labels = column()?;
        let tids = &self.tids[..];
        let anchors = &self.anchors[..];
        let single_tid = tids.len() <= 1;

        let short = |what: &str| DecodeError(format!("{what} column ends early"));
        // Every record takes at least its op byte: a count beyond that is a lie, not a reason
        // to reserve memory.
        out.reserve((n as usize).min(ops.remaining()));
        let predictor = &mut self.predictor;
        predictor.reset();
        let producers = &mut self.producers;
        producers.clear();
        let mut expected = first_seq;
        let mut base: u64 = 0;
        let mut base_old: u64 = 0;
        let mut last_synthetic = first_seq;
        let mut clock = Clock::new(anchors);
        let mut gap = GapReader::new(&mut gaps)?;
        let mut tid = tids.first().copied().unwrap_or(0);
        let mut run_left = if single_tid { u64::MAX } else { 0 };

        for i in 0..n {
            let byte = ops.byte().ok_or_else(|| short("op"))?;
            let seq = if i == gap.at {
                let seq = expected
                    .checked_add(gap.gap)
                    .ok_or_else(|| bad("seq overflows"))?;
                gap.next(&mut gaps, i)?;
                seq
            } else {
                expected
            };
            if run_left == 0 {
                let idx = tid_runs.varint().ok_or_else(|| short("thread"))?;
                run_left = tid_runs
                    .varint()
                    .filter(|&l| l > 0)
                    .ok_or_else(|| bad("thread run of length 0"))?;
                tid = *tids
                    .get(idx as usize)
                    .ok_or_else(|| bad("thread index out of range"))?;
            }
            run_left -= 1;
            let tag = byte & TAG_MASK;
            if tag == TAG_MARKER {
                let t_ns = mark_times.varint().ok_or_else(|| short("marker time"))?;
                let len = labels.varint().ok_or_else(|| short("label"))?;
                let bytes = labels
                    .take(usize::try_from(len).map_err(|_| short("label"))?)
                    .ok_or_else(|| short("label"))?;
                let label = String::from_utf8_lossy(bytes).into_owned();
                out.push(Record::Marker(Box::new(Marker {
                    seq,
                    t_ns,
                    tid,
                    label,
                })));
                continue;
            }
            let op =
                Op::from_tag(tag).ok_or_else(|| DecodeError(format!("unknown op tag {tag}")))?;
            expected = seq.checked_add(1).ok_or_else(|| bad("seq overflows"))?;
            let shape = shape(op);
            let (addr, size, old_addr) = match shape {
                // Chunks without addresses get their own arm: one arm for both modes, choosing
                // the address decoding per call, ran 8 % more instructions per event (cachegrind,
                // `analyze` of a cc1 trace, either mode).
                _ if synthetic => {
                    let mut released = OldSynthetic {
                        refs: &mut refs,
                        addrs: &mut addrs,
                        base: &mut base_old,
                        last_synthetic: &mut last_synthetic,
                    };
                    match shape {
                        Shape::Alloc => {
                            let size = sizes.value().ok_or_else(|| short("size"))?;
                            (new_synthetic((byte >> 4) & 3, seq)?, size, 0)
                        }
                        Shape::Free => {
                            let addr = released.decode((byte >> 4) & 3, producers)?;
                            (addr, free_size(byte, &mut sizes)?, 0)
                        }
                        Shape::Realloc => {
                            let size = sizes.value().ok_or_else(|| short("size"))?;
                            let old = released.decode(byte >> 6, producers)?;
                            (new_synthetic((byte >> 4) & 3, seq)?, size, old)
                        }
                    }
                }
                Shape::Alloc => {
                    let size = sizes.value().ok_or_else(|| short("size"))?;
                    let new = NewBlock {
                        mode: (byte >> 4) & 3,
                        deeper: byte & ALLOC_DEEPER != 0,
                        size,
                        old: 0,
                    };
                    let addr = decode_new(new, &mut addrs, &mut depths, &mut base, predictor)?;
                    (addr, size, 0)
                }
                Shape::Free => {
                    let addr = decode_old(
                        (byte >> 4) & 3,
                        producers,
                        &mut refs,
                        &mut addrs,
                        &mut base_old,
                        predictor,
                    )?;
                    (addr, free_size(byte, &mut sizes)?, 0)
                }
                Shape::Realloc => {
                    let size = sizes.value().ok_or_else(|| short("size"))?;
                    let old = decode_old(
                        byte >> 6,
                        producers,
                        &mut refs,
                        &mut addrs,
                        &mut base_old,
                        predictor,
                    )?;
                    let new = NewBlock {
                        mode: (byte >> 4) & 3,
                        deeper: false,
                        size,
                        old,
                    };
                    let addr = decode_new(new, &mut addrs, &mut depths, &mut base, predictor)?;
                    (addr, size, old)
                }
            };
            let t_ns = clock.at(seq);
            if addr != 0 && shape != Shape::Free {
                // The class is for the predictor, which chunks without addresses do not use.
                let class = if synthetic {
                    0
                } else {
                    size_class(size) as u32
                };
                producers.push((addr, class));
            }
            push_record(
                out,
                Record::Event(Event {
                    seq,
                    t_ns,
                    tid,
                    op,
                    addr,
                    size,
                    old_addr,
                }),
            );
        }
        Ok(())
    }
}

/// `out.push(record)`, without the call: the decoder reserves room for every record the chunk's
/// op column can describe, so the capacity check is all that runs (the out-of-line `push` was
/// about 20 instructions per record, a tenth of decoding).
#[inline(always)]
fn push_record(out: &mut Vec<Record>, record: Record) {
    let len = out.len();
    if len < out.capacity() {
        // SAFETY: `len < capacity`, so the slot is inside the allocation; it is written before
        // the length covers it.
        unsafe {
            out.as_mut_ptr().add(len).write(record);
            out.set_len(len + 1);
        }
    } else {
        out.push(record);
    }
}

/// Event times: linear interpolation by seq between the bracketing anchors (see `interpolate`).
/// Seqs only grow within a chunk and most events follow the previous one by 1, so the time of
/// seq + 1 is derived from that of seq by adding the slope's quotient and remainder: no divide
/// per event. A longer step divides once.
struct Clock<'a> {
    anchors: &'a [(u64, u64)],
    i: usize,
    /// The seq at which the clock moves to the next anchor pair.
    next_anchor: u64,
    /// The interpolation state of the anchor pair `i`, `i + 1` when it has a slope.
    line: Option<Line>,
    /// False until `line` is set up for anchor `i`: when every event is an anchor (the
    /// writer's `write_records` makes such chunks), it never needs to be.
    line_ready: bool,
    /// The stepping state of `line`, flattened for `at`'s common case (one event after the
    /// other on a line whose step is known: through `Option`s it ran about 22 instructions per
    /// event). `fast_seq` is the seq it serves next, `u64::MAX` when there is none; while it is
    /// not, `line`'s own `seq`, `q` and `r` are stale and `sync_line` brings them up to date.
    fast_seq: u64,
    fast: FastLine,
}

/// `Line`'s state for stepping: `t = t0 + q`, with `ds - step_r` precomputed.
#[derive(Clone, Copy, Default)]
struct FastLine {
    t0: u64,
    q: u64,
    r: u64,
    step_q: u64,
    step_r: u64,
    ds_minus_step_r: u64,
}

/// `t(seq) = t0 + (dt * (seq - s0)) / ds`, kept as quotient `q` and remainder `r` at `seq`.
#[derive(Clone, Copy)]
struct Line {
    s0: u64,
    t0: u64,
    dt: u64,
    ds: u64,
    /// `dt / ds` and `dt % ds`, the step from one seq to the next; computed on first use
    /// (when every event is an anchor, it never is).
    step: Option<(u64, u64)>,
    seq: u64,
    q: u64,
    r: u64,
}

impl Line {
    /// From `seq` to `seq + 1`: adds the step's quotient and remainder.
    #[inline(always)]
    fn step_one(&mut self, (step_q, step_r): (u64, u64)) {
        // r + step_r >= ds, written so that it cannot overflow.
        if self.r >= self.ds - step_r {
            self.r -= self.ds - step_r;
            self.q += step_q + 1;
        } else {
            self.r += step_r;
            self.q += step_q;
        }
        self.seq += 1;
    }

    #[inline]
    fn at(&mut self, seq: u64) -> u64 {
        if seq == self.seq {
            return self.t0 + self.q;
        }
        if seq == self.seq + 1 {
            let (dt, ds) = (self.dt, self.ds);
            let step = *self.step.get_or_insert_with(|| (dt / ds, dt % ds));
            self.step_one(step);
        } else {
            let n = u128::from(self.dt) * u128::from(seq - self.s0);
            let ds = u128::from(self.ds);
            self.q = (n / ds) as u64;
            self.r = (n % ds) as u64;
        }
        self.seq = seq;
        self.t0 + self.q
    }
}

impl<'a> Clock<'a> {
    fn new(anchors: &'a [(u64, u64)]) -> Self {
        let mut clock = Clock {
            anchors,
            i: 0,
            next_anchor: u64::MAX,
            line: None,
            line_ready: false,
            fast_seq: u64::MAX,
            fast: FastLine::default(),
        };
        clock.next_anchor = anchors.get(1).map_or(u64::MAX, |a| a.0);
        clock
    }

    /// The line between anchors `i` and `i + 1`, when they are in order (else `interpolate`'s
    /// clamping applies), positioned at s0.
    fn set_line(&mut self) {
        let next = self.anchors.get(self.i + 1).copied();
        self.line_ready = true;
        self.line = match (self.anchors.get(self.i), next) {
            (Some(&(s0, t0)), Some((s1, t1))) if s1 > s0 && t1 >= t0 => Some(Line {
                s0,
                t0,
                dt: t1 - t0,
                ds: s1 - s0,
                step: None,
                seq: s0,
                q: 0,
                r: 0,
            }),
            _ => None,
        };
    }

    #[cold]
    fn advance(&mut self, seq: u64) {
        while self.i + 1 < self.anchors.len() && self.anchors[self.i + 1].0 <= seq {
            self.i += 1;
        }
        self.next_anchor = self.anchors.get(self.i + 1).map_or(u64::MAX, |a| a.0);
        self.line_ready = false;
    }

    #[inline(always)]
    fn at(&mut self, seq: u64) -> u64 {
        // The common case: the event after the previous one, between the same two anchors.
        if seq == self.fast_seq && seq < self.next_anchor {
            let f = &mut self.fast;
            // `Line::step_one`, on the flattened state.
            if f.r >= f.ds_minus_step_r {
                f.r -= f.ds_minus_step_r;
                f.q += f.step_q + 1;
            } else {
                f.r += f.step_r;
                f.q += f.step_q;
            }
            self.fast_seq = seq + 1;
            return f.t0 + f.q;
        }
        self.sync_line();
        let t = self.at_general(seq);
        self.start_fast(seq);
        t
    }

    /// Writes the fast path's progress back into `line` and leaves the fast path.
    #[inline(always)]
    fn sync_line(&mut self) {
        if self.fast_seq != u64::MAX {
            if let Some(line) = &mut self.line {
                line.seq = self.fast_seq - 1;
                line.q = self.fast.q;
                line.r = self.fast.r;
            }
            self.fast_seq = u64::MAX;
        }
    }

    /// After `at_general(seq)`: the fast path serves `seq + 1` when the line it used knows its
    /// step and stands at `seq`.
    #[inline(always)]
    fn start_fast(&mut self, seq: u64) {
        if let (true, Some(line)) = (self.line_ready, &self.line) {
            if let (true, Some((step_q, step_r))) = (line.seq == seq, line.step) {
                self.fast = FastLine {
                    t0: line.t0,
                    q: line.q,
                    r: line.r,
                    step_q,
                    step_r,
                    ds_minus_step_r: line.ds - step_r,
                };
                self.fast_seq = seq + 1;
            }
        }
    }

    #[inline(never)]
    fn at_general(&mut self, seq: u64) -> u64 {
        // With no next anchor, next_anchor is u64::MAX: a seq equal to it advances to nothing.
        if seq >= self.next_anchor && self.i + 1 < self.anchors.len() {
            self.advance(seq);
        }
        if !self.line_ready {
            match self.anchors.get(self.i) {
                // At the anchor itself the time is the anchor's (what `interpolate` gives).
                Some(&(s0, t0)) if s0 == seq => return t0,
                _ => self.set_line(),
            }
        }
        match &mut self.line {
            Some(line) if seq >= line.s0 => line.at(seq),
            _ => interpolate(self.anchors, self.i, seq),
        }
    }
}

#[inline(always)]
fn decode_old(
    mode: u8,
    producers: &[(u64, u32)],
    refs: &mut SplitCursor<'_>,
    addrs: &mut Cursor<'_>,
    base: &mut u64,
    predictor: &mut Predictor,
) -> Result<u64, DecodeError> {
    let addr = match mode {
        OLD_NULL => return Ok(0),
        OLD_BACKREF => {
            let d = refs
                .value()
                .ok_or_else(|| bad("reference column ends early"))?;
            let (addr, class) = usize::try_from(d)
                .ok()
                .filter(|&d| d > 0)
                .and_then(|d| producers.len().checked_sub(d))
                .map(|j| producers[j])
                .ok_or_else(|| bad("reference before the chunk"))?;
            predictor.freed_in_class(addr, class as usize);
            addr
        }
        OLD_EXPLICIT => read_address(addrs, *base)?,
        _ => return Err(bad("unknown address mode")),
    };
    *base = addr;
    Ok(addr)
}

/// `decode_old` in a chunk without addresses (`ChunkEncoder::without_addresses`): the columns and
/// bases it reads and moves.
struct OldSynthetic<'a, 'b> {
    refs: &'a mut SplitCursor<'b>,
    addrs: &'a mut Cursor<'b>,
    base: &'a mut u64,
    last_synthetic: &'a mut u64,
}

impl OldSynthetic<'_, '_> {
    #[inline(always)]
    fn decode(&mut self, mode: u8, producers: &[(u64, u32)]) -> Result<u64, DecodeError> {
        match mode {
            OLD_NULL => Ok(0),
            OLD_BACKREF => {
                let d = self
                    .refs
                    .value()
                    .ok_or_else(|| bad("reference column ends early"))?;
                usize::try_from(d)
                    .ok()
                    .filter(|&d| d > 0)
                    .and_then(|d| producers.len().checked_sub(d))
                    .map(|j| producers[j].0)
                    .ok_or_else(|| bad("reference before the chunk"))
            }
            OLD_SYNTHETIC => {
                let z = self
                    .addrs
                    .varint()
                    .ok_or_else(|| bad("address column ends early"))?;
                let seq = self.last_synthetic.wrapping_add(varint::unzigzag(z) as u64);
                if seq & SYNTHETIC_BIT != 0 {
                    return Err(bad("synthetic reference out of range"));
                }
                *self.last_synthetic = seq;
                Ok(synthetic_address(seq))
            }
            _ => {
                let addr = read_address(self.addrs, *self.base)?;
                *self.base = addr;
                Ok(addr)
            }
        }
    }
}

/// The size a free carries (`free_sized`, `free_aligned_sized`), 0 for a plain free.
#[inline(always)]
fn free_size(byte: u8, sizes: &mut SplitCursor<'_>) -> Result<u64, DecodeError> {
    if byte & FREE_HAS_SIZE == 0 {
        return Ok(0);
    }
    sizes.value().ok_or_else(|| bad("size column ends early"))
}

/// A new block's address in a chunk without addresses: the block id of its event.
#[inline(always)]
fn new_synthetic(mode: u8, seq: u64) -> Result<u64, DecodeError> {
    match mode {
        NEW_NULL => Ok(0),
        NEW_EXPLICIT => Ok(synthetic_address(seq)),
        _ => Err(bad("predicted address in a chunk without addresses")),
    }
}

/// What the decoder knows of a new block before its address.
struct NewBlock {
    mode: u8,
    deeper: bool,
    size: u64,
    /// realloc's argument (0 otherwise).
    old: u64,
}

#[inline(always)]
fn decode_new(
    new: NewBlock,
    addrs: &mut Cursor<'_>,
    depths: &mut Cursor<'_>,
    base: &mut u64,
    predictor: &mut Predictor,
) -> Result<u64, DecodeError> {
    let class = size_class(new.size);
    let addr = match new.mode {
        NEW_NULL => return Ok(0),
        NEW_SAME_AS_OLD if new.old != 0 => new.old,
        NEW_PREDICTED => {
            let k = if new.deeper {
                depths
                    .varint()
                    .and_then(|k| usize::try_from(k).ok())
                    .and_then(|k| k.checked_add(1))
                    .ok_or_else(|| bad("depth column ends early"))?
            } else {
                0
            };
            let addr = predictor
                .guess(class, k)
                .ok_or_else(|| bad("predicted address without a prediction"))?;
            // In a valid chunk the entry at `k` is the address's first occurrence from the top,
            // the one the encoder's search found: take it without searching.
            predictor.take(class, k);
            *base = addr;
            return Ok(addr);
        }
        NEW_EXPLICIT => read_address(addrs, *base)?,
        _ => return Err(bad("invalid address mode")),
    };
    predictor.allocated(addr, class);
    *base = addr;
    Ok(addr)
}

/// Reads a `Split` column: the low byte, then the high part's nibble (and its varint rest).
struct SplitCursor<'a> {
    lo: Cursor<'a>,
    hi: Cursor<'a>,
    big: Cursor<'a>,
    /// The high nibble of the last `hi` byte, not used yet.
    pending: Option<u8>,
}

impl SplitCursor<'_> {
    #[inline(always)]
    fn value(&mut self) -> Option<u64> {
        let lo = self.lo.byte()?;
        let nibble = match self.pending.take() {
            Some(n) => n,
            None => {
                let b = self.hi.byte()?;
                self.pending = Some(b >> 4);
                b & 15
            }
        };
        let hi = match nibble {
            15 => self.big.varint()?.checked_add(15)?,
            n => u64::from(n),
        };
        (hi >> 56 == 0).then_some(hi << 8 | u64::from(lo))
    }
}

/// Walks the gaps column: `at` is the index of the next record whose seq jumps by `gap`
/// (u64::MAX when there is none).
struct GapReader {
    at: u64,
    gap: u64,
}

impl GapReader {
    fn new(gaps: &mut Cursor<'_>) -> Result<GapReader, DecodeError> {
        let mut g = GapReader { at: 0, gap: 0 };
        g.read(gaps, 0, 0)?;
        Ok(g)
    }

    /// Past the gap at record `i`: reads the next one (at least one record further).
    #[inline]
    fn next(&mut self, gaps: &mut Cursor<'_>, i: u64) -> Result<(), DecodeError> {
        self.read(gaps, i, 1)
    }

    fn read(&mut self, gaps: &mut Cursor<'_>, from: u64, min: u64) -> Result<(), DecodeError> {
        if gaps.remaining() == 0 {
            self.at = u64::MAX;
            return Ok(());
        }
        let short = || bad("seq gap column ends early");
        let after = gaps.varint().ok_or_else(short)?;
        self.gap = gaps.varint().ok_or_else(short)?;
        self.at = from
            .checked_add(after)
            .filter(|_| after >= min)
            .ok_or_else(|| bad("seq gaps out of order"))?;
        Ok(())
    }
}

/// Time of `seq` given `anchors[i]`, the last anchor at or before it (clamped at both ends).
fn interpolate(anchors: &[(u64, u64)], i: usize, seq: u64) -> u64 {
    let Some(&(s0, t0)) = anchors.get(i) else {
        return 0;
    };
    if seq < s0 {
        return t0;
    }
    match anchors.get(i + 1) {
        Some(&(s1, t1)) if s1 > s0 && t1 >= t0 => {
            // Same quotient as in 128 bits; the 128-bit divide is a library call.
            let span = match (t1 - t0).checked_mul(seq - s0) {
                Some(p) => p / (s1 - s0),
                None => (u128::from(t1 - t0) * u128::from(seq - s0) / u128::from(s1 - s0)) as u64,
            };
            t0 + span
        }
        _ => t0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(n: u64, threads: u32) -> Vec<Event> {
        (0..n)
            .map(|i| {
                let block = 0x10_0000 + 64 * (i / 2 % 50);
                let (op, size) = if i % 2 == 0 {
                    (Op::Malloc, 24 + i % 7)
                } else {
                    (Op::Free, 0)
                };
                Event {
                    seq: i,
                    t_ns: 0,
                    tid: 1000 + (i as u32 * 7) % threads,
                    op,
                    addr: block,
                    size,
                    old_addr: 0,
                }
            })
            .collect()
    }

    fn decoded_events(payload: &[u8]) -> Vec<Event> {
        decode_payload(payload)
            .unwrap()
            .into_iter()
            .map(|r| match r {
                Record::Event(e) => Event { t_ns: 0, ..e },
                Record::Marker(m) => panic!("unexpected marker {m:?}"),
            })
            .collect()
    }

    /// The reference: `interpolate` with the anchor found by a scan.
    fn time_by_scan(anchors: &[(u64, u64)], seq: u64) -> u64 {
        let i = anchors.iter().rposition(|a| a.0 <= seq).unwrap_or(0);
        interpolate(anchors, i, seq)
    }

    #[test]
    fn stepped_clock_matches_interpolation() {
        let cases: Vec<Vec<(u64, u64)>> = vec![
            vec![],
            vec![(5, 1000)],
            vec![(0, 0), (7, 1000)],
            vec![(3, 10), (3, 20), (10, 15), (17, 1_000_003), (40, 2_000_000)],
            vec![(0, 5), (1 << 40, u64::MAX - 7)],
            vec![(2, u64::MAX / 3), (9, u64::MAX / 3 + 1), (100, u64::MAX)],
        ];
        for anchors in &cases {
            let mut clock = Clock::new(anchors);
            // Steps of 1 mostly, some jumps, starting before the first anchor.
            let mut seq = 0u64;
            for k in 0..200u64 {
                assert_eq!(
                    clock.at(seq),
                    time_by_scan(anchors, seq),
                    "anchors {anchors:?}, seq {seq}"
                );
                seq += if k % 17 == 0 { 5 } else { 1 };
            }
            let far = (1u64 << 40) - 3;
            assert_eq!(clock.at(far), time_by_scan(anchors, far));
            assert_eq!(clock.at(far + 1), time_by_scan(anchors, far + 1));
        }
    }

    #[test]
    fn a_reused_decoder_gives_what_a_fresh_one_gives() {
        // Chunks of different shapes (threads, reallocs, a marker) through one decoder and one
        // record buffer, with a corrupt payload in between: no state leaks from chunk to chunk.
        let mut enc = ChunkEncoder::new(1);
        let mut payloads = Vec::new();
        for (k, threads) in [(0u64, 1u32), (1, 3), (2, 40)] {
            let n = 2000 + 500 * k;
            enc.push_anchor(k * 10_000, k * 1_000_000);
            for (i, e) in events(n, threads).iter().enumerate() {
                let mut e = Event {
                    seq: k * 10_000 + i as u64,
                    ..*e
                };
                if i % 9 == 4 && e.op == Op::Malloc {
                    e.op = Op::Realloc;
                    e.old_addr = e.addr;
                    e.addr += 16 * k;
                }
                if i == 7 {
                    enc.push_marker(&Marker {
                        seq: e.seq,
                        t_ns: 5,
                        tid: e.tid,
                        label: format!("phase {k}"),
                    })
                    .unwrap();
                }
                enc.push_event(&e).unwrap();
            }
            enc.push_anchor(k * 10_000 + n, k * 1_000_000 + 777 * n);
            payloads.push(enc.finish().unwrap().unwrap().payload);
        }
        let mut corrupt = payloads[1].clone();
        corrupt.truncate(corrupt.len() / 2);
        let mut decoder = ChunkDecoder::new();
        let mut out = Vec::new();
        for p in [
            &payloads[0],
            &corrupt,
            &payloads[1],
            &payloads[2],
            &payloads[0],
        ] {
            let fresh = decode_payload(p);
            let reused = decoder.decode(p, &mut out).map(|()| out.clone());
            assert_eq!(reused, fresh);
        }
        assert!(decoder.decode(&corrupt, &mut out).is_err());
        assert_eq!(out.len(), 0, "a payload cut short fails before any record");
    }

    /// A varied stream: seq gaps, thread runs of all lengths, sizes and back-references past
    /// every split boundary, reallocs of each address mode, sized and double frees, and blocks
    /// reused out of LIFO order (deeper predictions).
    fn varied_events(n: usize, seed: u64) -> Vec<Event> {
        let mut x = seed | 1;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut freed: Vec<u64> = Vec::new();
        let mut next_addr = 0x7f00_0000_0000u64;
        let mut seq = 100u64;
        let mut tid = 1u32;
        let mut out = Vec::new();
        while out.len() < n {
            let r = rand();
            seq += if r % 97 == 0 { 1 + r % 5000 } else { 1 };
            if r % 7 == 0 {
                tid = 1 + (r >> 20) as u32 % 40;
            }
            let size = match (r >> 8) % 10 {
                0 => 0,
                1 => 3840 + (r >> 16) % 100,
                2 => 1 << (20 + (r >> 16) % 40),
                3 => u64::MAX - (r >> 16) % 3,
                _ => 1 + (r >> 16) % 600,
            };
            let pick = |r: u64, len: usize| (r >> 32) as usize % len.max(1);
            let e = |op, addr, size, old_addr| Event {
                seq,
                t_ns: 0,
                tid,
                op,
                addr,
                size,
                old_addr,
            };
            let new_addr = |r: u64, freed: &mut Vec<u64>, next: &mut u64| {
                if !freed.is_empty() && !r.is_multiple_of(3) {
                    // Mostly the last freed, sometimes a few down.
                    let k = (freed.len() - 1)
                        .saturating_sub(((r >> 40) % 4) as usize * (r % 2) as usize);
                    freed.remove(k)
                } else {
                    *next += 16 * (1 + (r >> 44) % 64);
                    *next
                }
            };
            match r % 13 {
                0..=4 => {
                    let a = if size > 1 << 40 {
                        0
                    } else {
                        new_addr(r, &mut freed, &mut next_addr)
                    };
                    out.push(e(Op::Malloc, a, size, 0));
                    if a != 0 {
                        live.push((a, size));
                    }
                }
                5..=8 if !live.is_empty() => {
                    let (a, s) = live.swap_remove(pick(r, live.len()));
                    let op = if r % 11 == 0 { Op::FreeSized } else { Op::Free };
                    out.push(e(op, a, if op == Op::FreeSized { s } else { 0 }, 0));
                    freed.push(a);
                }
                9 => out.push(e(Op::Free, 0, 0, 0)),
                10 if !freed.is_empty() => {
                    // A double free: an explicit address, not a back-reference.
                    out.push(e(Op::Free, freed[pick(r, freed.len())], 0, 0));
                }
                11 if !live.is_empty() => {
                    let i = pick(r, live.len());
                    let (old, _) = live[i];
                    let a = match (r >> 20) % 3 {
                        0 => old,
                        1 => new_addr(r, &mut freed, &mut next_addr),
                        _ => 0,
                    };
                    out.push(e(Op::Realloc, a, size, old));
                    if a != 0 {
                        live[i] = (a, size);
                    }
                }
                _ => {
                    let a = new_addr(r, &mut freed, &mut next_addr);
                    out.push(e(Op::Calloc, a, size % 4096, 0));
                    live.push((a, size % 4096));
                }
            }
            if freed.len() > 64 {
                freed.remove(0);
            }
        }
        out
    }

    #[test]
    fn varied_streams_round_trip_exactly() {
        for seed in [1u64, 2, 3, 0xdead_beef] {
            let input = varied_events(20_000, seed);
            let mut enc = ChunkEncoder::new(1);
            let mut decoded = Vec::new();
            for (i, part) in input.chunks(7_000).enumerate() {
                for (j, e) in part.iter().enumerate() {
                    if j == 11 {
                        enc.push_marker(&Marker {
                            seq: e.seq,
                            t_ns: 42,
                            tid: e.tid,
                            label: format!("part {i}"),
                        })
                        .unwrap();
                    }
                    enc.push_event(e).unwrap();
                }
                let payload = enc.finish().unwrap().unwrap().payload;
                let records = decode_payload(&payload).unwrap();
                let markers = records
                    .iter()
                    .filter(|r| matches!(r, Record::Marker(_)))
                    .count();
                assert_eq!(markers, 1);
                decoded.extend(records.into_iter().filter_map(|r| match r {
                    Record::Event(e) => Some(Event { t_ns: 0, ..e }),
                    Record::Marker(_) => None,
                }));
            }
            assert_eq!(decoded.len(), input.len());
            for (d, i) in decoded.iter().zip(&input) {
                assert_eq!(d, i, "seed {seed}");
            }
        }
    }

    /// `events` with the addresses a recorder without addresses writes (`BlockIds`).
    fn with_block_ids(events: &[Event]) -> Vec<Event> {
        let mut ids = crate::BlockIds::new();
        events
            .iter()
            .map(|e| {
                let mut e = *e;
                ids.rewrite(e.op, e.seq, &mut e.addr, &mut e.old_addr);
                e
            })
            .collect()
    }

    /// Encodes `events` in chunks of `per_chunk` (with or without addresses) and decodes them.
    fn through_chunks(events: &[Event], per_chunk: usize, synthetic: bool) -> (Vec<Event>, usize) {
        let mut enc = ChunkEncoder::new(1);
        if synthetic {
            enc = enc.without_addresses();
        }
        let (mut decoded, mut bytes) = (Vec::new(), 0);
        for part in events.chunks(per_chunk) {
            for e in part {
                enc.push_event(e).unwrap();
            }
            let payload = enc.finish().unwrap().unwrap().payload;
            bytes += payload.len();
            decoded.extend(decoded_events(&payload));
        }
        (decoded, bytes)
    }

    #[test]
    fn streams_without_addresses_decode_to_block_ids() {
        for seed in [1u64, 5, 0xfeed] {
            let input = varied_events(20_000, seed);
            let expected = with_block_ids(&input);
            let (decoded, _) = through_chunks(&expected, 7_000, true);
            assert_eq!(decoded, expected, "seed {seed}");
            // Every free of a block allocated in the stream names the seq of its allocation,
            // across chunk boundaries too (a model of the pairing, by real address).
            let mut born = HashMap::new();
            let mut checked = 0;
            for (d, e) in decoded.iter().zip(&input) {
                let released = if e.op.is_free() {
                    Some((e.addr, d.addr))
                } else if e.op.is_realloc() {
                    Some((e.old_addr, d.old_addr))
                } else {
                    None
                };
                if let Some((real, id)) = released.filter(|r| r.0 != 0) {
                    match born.remove(&real) {
                        Some(seq) => {
                            assert_eq!(id, synthetic_address(seq));
                            checked += 1;
                        }
                        None => assert_eq!(id, real, "an unknown block keeps its address"),
                    }
                }
                if e.addr != 0 && !e.op.is_free() {
                    born.insert(e.addr, e.seq);
                    assert_eq!(d.addr, synthetic_address(e.seq));
                }
            }
            assert!(checked > 5_000, "{checked} releases checked");
        }
    }

    #[test]
    fn blocks_freed_in_allocation_order_cost_about_a_bit_across_chunks() {
        // 20,000 blocks allocated, then freed oldest first: every free is in a later chunk than
        // its allocation. With addresses each costs an address delta; without, a seq delta of
        // nearly constant value.
        let mut events = Vec::new();
        for i in 0..20_000u64 {
            let addr = 0x5500_0000_0000 + (i * 7919 % 20_000) * 48;
            events.push(Event {
                seq: i,
                t_ns: 0,
                tid: 1,
                op: Op::Malloc,
                addr,
                size: 40,
                old_addr: 0,
            });
        }
        for i in 0..20_000u64 {
            let a = events[i as usize].addr;
            events.push(Event {
                seq: 20_000 + i,
                op: Op::Free,
                addr: a,
                size: 0,
                ..events[0]
            });
        }
        let (plain, with_addresses) = through_chunks(&events, 4_000, false);
        assert_eq!(plain, events);
        let ids = with_block_ids(&events);
        let (decoded, without) = through_chunks(&ids, 4_000, true);
        assert_eq!(decoded, ids);
        let per_free = without as f64 / 20_000.0;
        assert!(
            per_free < 0.3 && without * 4 < with_addresses,
            "{without} bytes without addresses, {with_addresses} with"
        );
    }

    /// Without addresses the producer table is direct-mapped by seq: a free of any block
    /// produced less than `2^ID_TABLE_BITS` seqs earlier in the chunk is a back-reference (a
    /// hashed table lost a share of them to collisions), so the address column stays empty.
    #[test]
    fn frees_within_the_id_window_are_back_references() {
        let window = 1u64 << ID_TABLE_BITS;
        // Each block is freed `live` allocations (and as many frees) later: under `window` seqs.
        let live = window / 2 - 64;
        let mut events = Vec::new();
        let mut seq = 0;
        let mut born = std::collections::VecDeque::new();
        // As the recorder hands them to the encoder: blocks named by their ids.
        for _ in 0..3 * live {
            events.push(Event {
                seq,
                t_ns: 0,
                tid: 1,
                op: Op::Malloc,
                addr: synthetic_address(seq),
                size: 24,
                old_addr: 0,
            });
            born.push_back(seq);
            seq += 1;
            if born.len() as u64 > live {
                let b = born.pop_front().unwrap();
                events.push(Event {
                    seq,
                    op: Op::Free,
                    addr: synthetic_address(b),
                    size: 0,
                    ..events[0]
                });
                seq += 1;
            }
        }
        let mut enc = ChunkEncoder::new(1).without_addresses();
        for e in &events {
            enc.push_event(e).unwrap();
        }
        let payload = enc.finish().unwrap().unwrap().payload;
        let columns = payload_columns(&payload).unwrap();
        let addrs = &columns.iter().find(|(n, _)| *n == "addrs").unwrap().1;
        assert!(addrs.is_empty(), "{} address bytes", addrs.len());
        assert_eq!(decoded_events(&payload), events);
    }

    #[test]
    fn damaged_columns_give_errors_not_panics() {
        for synthetic in [false, true] {
            damaged_columns_give_errors(synthetic);
        }
    }

    fn damaged_columns_give_errors(synthetic: bool) {
        // The decoder meets hostile bytes after zstd too (a frame that decompresses fine): flip
        // bytes of a real chunk's raw columns, recompress, decode. Any result but a panic.
        let mut enc = ChunkEncoder::new(1);
        let mut events = varied_events(3000, 7);
        if synthetic {
            enc = enc.without_addresses();
            // Blocks from before the chunk: synthetic references.
            events = with_block_ids(&events)[1000..].to_vec();
        }
        for e in events {
            enc.push_event(&e).unwrap();
        }
        let raw = enc.finish_raw(Vec::new()).unwrap();
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut decoder = ChunkDecoder::new();
        let mut out = Vec::new();
        let mut failures = 0;
        for round in 0..400 {
            let mut bytes = raw.raw.clone();
            for _ in 0..1 + round % 4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x >> 16) as usize % bytes.len();
                bytes[i] ^= (x as u8) | 1;
            }
            let damaged = UncompressedChunk {
                raw: bytes,
                ..raw.clone()
            };
            let payload = damaged
                .compress(&mut zstd::bulk::Compressor::new(1).unwrap())
                .unwrap()
                .payload;
            failures += usize::from(decoder.decode(&payload, &mut out).is_err());
        }
        assert!(
            failures > 100,
            "only {failures} of 400 damaged chunks were refused"
        );
    }

    #[test]
    fn deeper_predictions_are_used_and_decoded() {
        // Blocks come back three at a time in the order they were freed (FIFO, not LIFO): the
        // top guess misses, the deeper one hits.
        let mut input = Vec::new();
        let mut seq = 0;
        let mut push = |op, addr, size| {
            input.push(Event {
                seq,
                t_ns: 0,
                tid: 1,
                op,
                addr,
                size,
                old_addr: 0,
            });
            seq += 1;
        };
        for round in 0..100u64 {
            let blocks: Vec<u64> = (0..3).map(|k| 0x1000 + 0x100 * k).collect();
            if round == 0 {
                blocks.iter().for_each(|&a| push(Op::Malloc, a, 40));
            }
            blocks.iter().for_each(|&a| push(Op::Free, a, 0));
            blocks.iter().for_each(|&a| push(Op::Malloc, a, 40));
        }
        let mut enc = ChunkEncoder::new(1);
        for e in &input {
            enc.push_event(e).unwrap();
        }
        assert!(!enc.cols.depths.is_empty(), "no deeper prediction was used");
        assert!(
            enc.cols.addrs.len() <= 3 * 2,
            "addresses spelled out after the first round"
        );
        let chunk = enc.finish().unwrap().unwrap();
        assert_eq!(decoded_events(&chunk.payload), input);
    }

    #[test]
    fn many_threads_outgrow_the_scanned_thread_table() {
        // 40 threads: past the linear scan, the map takes over; indices must stay consistent.
        let input = events(4000, 40);
        let mut enc = ChunkEncoder::new(1);
        for e in &input {
            enc.push_event(e).unwrap();
        }
        let chunk = enc.finish().unwrap().unwrap();
        assert_eq!(decoded_events(&chunk.payload), input);
    }

    #[test]
    fn compressing_elsewhere_gives_the_same_records_and_reuses_the_buffer() {
        let input = events(3000, 3);
        let mut enc = ChunkEncoder::new(3);
        let mut compressor = zstd::bulk::Compressor::new(3).unwrap();
        let mut buf = Vec::new();
        let mut decoded = Vec::new();
        for part in input.chunks(1000) {
            for e in part {
                enc.push_event(e).unwrap();
            }
            let raw = enc.finish_raw(buf).unwrap();
            assert_eq!(raw.records, 1000);
            assert_eq!((raw.first_seq, raw.last_seq), (part[0].seq, part[999].seq));
            decoded.extend(decoded_events(
                &raw.compress(&mut compressor).unwrap().payload,
            ));
            buf = raw.raw;
        }
        assert!(enc.finish_raw(Vec::new()).is_none());
        assert_eq!(decoded, input);
    }
}
