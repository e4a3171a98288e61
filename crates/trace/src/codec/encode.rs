//! The encoder: records in seq order into one stream's events chunks.
use std::collections::HashMap;

use super::columns::{put_address, ColumnSink, Columns};
use super::layout::*;
use super::predictor::{size_class, Predictor};
use super::run_columns::RunColumns;
use super::sampled::SampledStackEncoder;
use crate::event::{Event, Marker, Op};
use crate::varint;

/// The table with addresses (`slot_of`): 2^15 `Slot`s of 16 bytes, 512 KiB.
const TABLE_BITS: u32 = 15;
/// The table without addresses (`slot_of_id`): 1 MiB of `IdSlot`s, written in seq order. Measured against
/// 2^15..2^18 slots by re-encoding traces: python3's chunks shrank from 0.125 (2^15) to 0.113
/// B/record at 2^17, no gain beyond; cc1 and alloc-micro stayed within 1 %.
pub(super) const ID_TABLE_BITS: u32 = 17;

/// A producer of the current chunk, found by address. 16 bytes, so the table with addresses
/// (512 KiB) stays in a core's L2 cache: every free looks it up, at an address-hashed (random)
/// slot.
#[derive(Clone, Copy, Default)]
pub(super) struct Slot {
    addr: u64,
    index: u32,
    /// The chunk's generation (upper 24 bits; 0 = empty) and the size class (low 8 bits).
    tag: u32,
}

const GENERATION_LIMIT: u32 = 1 << 24;

/// The producers of a chunk without addresses, each in the slot of its seq (`slot_of_id`): one
/// `u64` each, the producer's index in the low 32 bits under its `id_key` (0: empty). The key
/// tells the seq apart from others of the same slot by its high bits, so 8 bytes do (the
/// table's 1 MiB stays in a core's L2 cache next to the recorder's block-id map, where 16-byte
/// slots took 2 MiB). A fixed size, so that a slot's index needs no bounds check.
type IdTable = Box<[u64; 1 << ID_TABLE_BITS]>;

fn empty_id_table() -> IdTable {
    // Zeroed memory (calloc): untouched pages cost nothing in chunks with addresses.
    let slots = vec![0u64; 1 << ID_TABLE_BITS].into_boxed_slice();
    slots.try_into().expect("the table's size")
}

/// The high 32 bits of an id slot: the chunk's generation (truncated to 16 bits, never 0; the
/// table is cleared when it wraps) and `seq >> ID_TABLE_BITS` (truncated: seqs of one chunk
/// that share a slot differ there).
#[inline(always)]
fn id_key(generation: u32, seq: u64) -> u64 {
    u64::from(generation as u16) << 48 | u64::from((seq >> ID_TABLE_BITS) as u16) << 32
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

/// An event of a run (`ChunkEncoder::push_run`): an `Event` but for its seq and thread, which
/// the run gives (and its time, which comes from the anchors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEvent {
    pub op: Op,
    pub addr: u64,
    pub size: u64,
    pub old_addr: u64,
    pub stack: u32,
}

impl RunEvent {
    #[inline(always)]
    pub fn of(e: &Event) -> RunEvent {
        RunEvent {
            op: e.op,
            addr: e.addr,
            size: e.size,
            old_addr: e.old_addr,
            stack: e.stack,
        }
    }
}

/// Where the events of a run come from (`ChunkEncoder::push_run`). Implementations mark
/// `event` `#[inline(always)]`: it is the body of the run's loop.
pub trait RunEvents {
    /// The event with seq `seq`; asked once for each seq of the run, in order.
    fn event(&mut self, seq: u64) -> RunEvent;
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
    /// Visible to the codec's tests, which check which columns an encoding used.
    pub(super) cols: Columns,
    /// What the events' columns are coded against (producers, predictions, bases).
    coder: EventCoder,
    level: i32,
    /// Created on the first `finish` (callers that compress elsewhere never need one).
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

/// The events' coding state in a chunk: the producers back-references point to, the address
/// predictor and bases, the encoder's options. Apart from the columns it writes to (a
/// `ColumnSink`), so that a run can write into space reserved for it.
struct EventCoder {
    /// Producers by address (chunks with addresses).
    table: Vec<Slot>,
    /// Producers by seq (chunks without addresses).
    ids: IdTable,
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
    /// `FLAG_STACKS` (and `FLAG_FREE_STACKS` or `FLAG_SAMPLED_STACKS`) when events carry stack
    /// ids (`with_stacks`, `with_sampled_stacks`).
    stack_flags: u64,
    /// The stack ids of a chunk with `FLAG_SAMPLED_STACKS`.
    sampled: SampledStackEncoder,
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
            coder: EventCoder {
                table: vec![Slot::default(); 1 << TABLE_BITS],
                ids: empty_id_table(),
                generation: 1,
                produced: 0,
                predictor: Predictor::new(),
                base: 0,
                base_old: 0,
                synthetic: false,
                last_synthetic: 0,
                stack_flags: 0,
                sampled: SampledStackEncoder::default(),
            },
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
        let coder = &mut self.coder;
        coder.synthetic = true;
        coder.table = Vec::new();
        self
    }

    /// Chunks whose allocations and reallocs carry their `Event::stack` (and frees too when
    /// `frees`). Without it stack ids are not stored (they decode as 0) and the chunk is byte for
    /// byte what it was before stacks existed.
    pub fn with_stacks(mut self, frees: bool) -> Self {
        self.coder.stack_flags = FLAG_STACKS | if frees { FLAG_FREE_STACKS } else { 0 };
        self
    }

    /// Chunks of a trace with sampled stacks (`stack_sample_bytes` > 0 in the header): as
    /// `with_stacks(false)`, but the few allocations that carry a stack are stored as gaps and
    /// predicted ids (`FLAG_SAMPLED_STACKS`) instead of an id per allocation. Decodes to the same
    /// events; smaller when most ids are 0 (larger when none is, hence not for `--stacks=all`).
    pub fn with_sampled_stacks(mut self) -> Self {
        self.coder.stack_flags = FLAG_STACKS | FLAG_SAMPLED_STACKS;
        self
    }

    /// True when events keep their stack ids (`with_stacks`, `with_sampled_stacks`).
    pub fn stores_stacks(&self) -> bool {
        self.coder.stack_flags != 0
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
            self.coder.last_synthetic = seq;
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
        // SAFETY: the Vec-backed columns take any number of op bytes.
        unsafe { cols.op(TAG_MARKER) };
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
        let coder = &mut self.coder;
        let (synthetic, stacks) = (coder.synthetic, coder.stack_flags != 0);
        // SAFETY: one event.
        unsafe {
            coder.encode(
                &mut self.cols,
                e.seq,
                e.tid,
                &RunEvent::of(e),
                synthetic,
                stacks,
            )
        };
        self.end_run(e.seq, 1);
        Ok(())
    }

    /// Pushes the `n` events of thread `tid` with the seqs `first_seq..first_seq + n`, taken from
    /// `events` in turn: the same chunk as `push_event` of each, with the order, gap and
    /// thread-run bookkeeping done once for the run instead of per event, and the chunk's
    /// options (block ids, stacks) decided once. For a drain's run of one thread's records.
    #[inline(always)]
    pub fn push_run(
        &mut self,
        first_seq: u64,
        tid: u32,
        n: u32,
        events: &mut impl RunEvents,
    ) -> Result<(), OrderError> {
        if n == 0 {
            return Ok(());
        }
        self.begin_record(first_seq, tid)?;
        let seqs = first_seq..first_seq + u64::from(n);
        {
            let coder = &mut self.coder;
            let cols = &mut RunColumns::new(&mut self.cols, n as usize);
            // The options as constants in each loop, so that the compiler drops their tests.
            // SAFETY (each `encode`): one event each, `n` in all, what `cols` reserved.
            match (coder.synthetic, coder.stack_flags != 0) {
                (true, false) => {
                    for seq in seqs {
                        unsafe { coder.encode(cols, seq, tid, &events.event(seq), true, false) };
                    }
                }
                (false, false) => {
                    for seq in seqs {
                        unsafe { coder.encode(cols, seq, tid, &events.event(seq), false, false) };
                    }
                }
                (synthetic, true) => {
                    for seq in seqs {
                        unsafe {
                            coder.encode(cols, seq, tid, &events.event(seq), synthetic, true)
                        };
                    }
                }
            }
        } // `cols` sets the columns' lengths.
        self.end_run(first_seq, n);
        Ok(())
    }

    /// After the `n` records from `first_seq` (`begin_record` counted the first one's thread).
    #[inline(always)]
    fn end_run(&mut self, first_seq: u64, n: u32) {
        let last = first_seq + u64::from(n) - 1;
        self.run.2 += n - 1;
        self.records += n;
        self.expected = last + 1;
        self.last_seq = self.last_seq.max(last);
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
        let synthetic = if self.coder.synthetic {
            FLAG_SYNTHETIC
        } else {
            0
        };
        let stack_flags = self.coder.stack_flags;
        varint::put(&mut raw, synthetic | stack_flags);
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
        self.cols.write_to(&mut raw);
        if stack_flags & FLAG_SAMPLED_STACKS != 0 {
            varint::put(&mut raw, self.cols.sample_gaps.len() as u64);
            raw.extend_from_slice(&self.cols.sample_gaps);
        }
        if stack_flags != 0 {
            varint::put(&mut raw, self.cols.stacks.len() as u64);
            raw.extend_from_slice(&self.cols.stacks);
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
        self.coder.reset();
    }
}

impl EventCoder {
    /// For the next chunk.
    fn reset(&mut self) {
        self.sampled.clear();
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
            if self.synthetic {
                // (Chunks with addresses never touch it: its pages stay unmapped.)
                self.ids.fill(0);
            }
            self.generation = 1;
        }
        self.produced = 0;
        self.predictor.reset();
        self.base = 0;
        self.base_old = 0;
    }

    /// An event's columns and op byte: everything `push_event` does but the bookkeeping of the
    /// record's place (`begin_record`, `end_run`). `synthetic` and `stacks` are the encoder's
    /// options, passed in so that a run's loop has them as constants.
    ///
    /// # Safety
    /// One event of those `cols` has room for (`ColumnSink`'s contract: this writes at most one
    /// op, size and reference).
    #[inline(always)]
    unsafe fn encode(
        &mut self,
        cols: &mut impl ColumnSink,
        seq: u64,
        tid: u32,
        e: &RunEvent,
        synthetic: bool,
        stacks: bool,
    ) {
        debug_assert_eq!((synthetic, stacks), (self.synthetic, self.stack_flags != 0));
        let tag = e.op as u8;
        // SAFETY (each write to `cols` and `encode_old`, which writes a reference): the
        // caller's promise, and each arm writes at most one op, size and reference.
        let byte = match shape(e.op) {
            Shape::Alloc => {
                if stacks {
                    self.put_stack(cols, tid, e);
                }
                unsafe { cols.size(e.size) };
                tag | self.new_block(cols, seq, e, 0, true, synthetic) << 4
            }
            Shape::Free => {
                if stacks && self.stack_flags & FLAG_FREE_STACKS != 0 {
                    varint::put(cols.stack_columns().1, u64::from(e.stack));
                }
                let mut b = tag | unsafe { self.encode_old(cols, e.addr, synthetic) } << 4;
                if e.size != 0 {
                    b |= FREE_HAS_SIZE;
                    unsafe { cols.size(e.size) };
                }
                b
            }
            Shape::Realloc => {
                if stacks {
                    self.put_stack(cols, tid, e);
                }
                unsafe { cols.size(e.size) };
                let old_mode = unsafe { self.encode_old(cols, e.old_addr, synthetic) };
                let new_mode = self.new_block(cols, seq, e, e.old_addr, false, synthetic);
                tag | new_mode << 4 | old_mode << 6
            }
        };
        unsafe { cols.op(byte) };
    }

    /// The stack id of an allocation or realloc, in chunks with stacks.
    #[inline(always)]
    fn put_stack(&mut self, cols: &mut impl ColumnSink, tid: u32, e: &RunEvent) {
        let (sample_gaps, stacks) = cols.stack_columns();
        if self.stack_flags & FLAG_SAMPLED_STACKS != 0 {
            self.sampled.push(sample_gaps, stacks, tid, e.size, e.stack);
        } else if self.stack_flags != 0 {
            varint::put(stacks, u64::from(e.stack));
        }
    }

    /// A new block (allocation, realloc result) of the event `seq`: its address mode; a
    /// non-null block becomes a producer. Without addresses (`synthetic`) it is known by its
    /// event's seq and costs nothing more.
    #[inline(always)]
    fn new_block(
        &mut self,
        cols: &mut impl ColumnSink,
        seq: u64,
        e: &RunEvent,
        old: u64,
        deeper: bool,
        synthetic: bool,
    ) -> u8 {
        if synthetic {
            if e.addr == 0 {
                return NEW_NULL;
            }
            self.ids[slot_of_id(seq)] = id_key(self.generation, seq) | u64::from(self.produced);
            self.produced += 1;
            return NEW_EXPLICIT;
        }
        let mode = self.encode_new(cols, e.addr, e.size, old, deeper);
        self.produced(e.addr, e.size);
        mode
    }

    /// Encodes a released address; updates the predictor like the decoder will. Without
    /// addresses (`without_addresses`) the predictor is unused, a block of an earlier chunk is a
    /// synthetic reference, and only explicit addresses move their base.
    ///
    /// # Safety
    /// The event's only call that may write a reference to `cols` (`ColumnSink`).
    #[inline(always)]
    unsafe fn encode_old(&mut self, cols: &mut impl ColumnSink, addr: u64, synthetic: bool) -> u8 {
        if addr == 0 {
            return OLD_NULL;
        }
        if synthetic {
            if addr & SYNTHETIC_BIT != 0 {
                // SAFETY: the caller's promise.
                return unsafe { self.encode_old_id(cols, addr & !SYNTHETIC_BIT) };
            }
            // A block allocated before tracing keeps its real address: no producer has it.
            put_address(cols.addrs(), addr, self.base_old);
            self.base_old = addr;
            return OLD_EXPLICIT;
        }
        let slot = &mut self.table[slot_of(addr)];
        if slot.tag >> 8 == self.generation && slot.addr == addr {
            // SAFETY: the caller's promise.
            unsafe { cols.reference(u64::from(self.produced - slot.index)) };
            let class = (slot.tag & 0xff) as usize;
            slot.tag = 0; // released: a second free of it is not a back-reference
            self.predictor.freed_in_class(addr, class);
            self.base_old = addr;
            return OLD_BACKREF;
        }
        put_address(cols.addrs(), addr, self.base_old);
        self.base_old = addr;
        OLD_EXPLICIT
    }

    /// Encodes the release of the block allocated by the event `seq`: a back-reference when it
    /// was produced in this chunk (and not released yet), else its seq.
    ///
    /// # Safety
    /// As `encode_old`.
    #[inline(always)]
    unsafe fn encode_old_id(&mut self, cols: &mut impl ColumnSink, seq: u64) -> u8 {
        let slot = &mut self.ids[slot_of_id(seq)];
        // Equal keys (so the slot is not empty: generations are not 0) leave the index. The
        // index u32::MAX never matches, as when it marked a released producer: same chunks.
        let index = *slot ^ id_key(self.generation, seq);
        if index < u64::from(u32::MAX) {
            // SAFETY: the caller's promise.
            unsafe { cols.reference(u64::from(self.produced) - index) };
            *slot = 0; // released: a second free of it is not a back-reference
            return OLD_BACKREF;
        }
        let delta = seq.wrapping_sub(self.last_synthetic) as i64;
        varint::put(cols.addrs(), varint::zigzag(delta));
        self.last_synthetic = seq;
        OLD_SYNTHETIC
    }

    /// Encodes a new block's address: the mode bits of the op byte (with `ALLOC_DEEPER` when
    /// `deeper` allows it). `old` is realloc's argument (0 otherwise).
    #[inline(always)]
    fn encode_new(
        &mut self,
        cols: &mut impl ColumnSink,
        addr: u64,
        size: u64,
        old: u64,
        deeper: bool,
    ) -> u8 {
        if addr == 0 {
            return NEW_NULL;
        }
        let found = self.predictor.allocated(addr, size_class(size));
        let mode = match found {
            _ if old != 0 && addr == old => NEW_SAME_AS_OLD,
            Some(0) => NEW_PREDICTED,
            Some(k) if deeper => {
                varint::put(cols.depths(), k as u64 - 1);
                NEW_PREDICTED | ALLOC_DEEPER >> 4
            }
            _ => {
                put_address(cols.addrs(), addr, self.base);
                NEW_EXPLICIT
            }
        };
        self.base = addr;
        mode
    }

    /// Every realloc and non-failed allocation is a producer, numbered in order.
    #[inline(always)]
    pub(super) fn produced(&mut self, addr: u64, size: u64) {
        if addr != 0 {
            self.table[slot_of(addr)] = Slot {
                addr,
                index: self.produced,
                tag: self.generation << 8 | size_class(size) as u32,
            };
            self.produced += 1;
        }
    }
}
