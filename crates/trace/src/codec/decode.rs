//! The decoder: an events chunk payload back into records.
use super::addresses::{Bases, EventColumns};
use super::clock::Clock;
use super::columns::SplitCursor;
use super::layout::*;
use super::predictor::{size_class, Predictor};
use super::sampled::{SampledStackCursor, StackPredictor};
use crate::event::{Event, Marker, Op, Record};
use crate::varint::{self, Cursor};

/// Why a chunk could not be decoded (the reader adds file and chunk context).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

pub(super) fn bad(what: &str) -> DecodeError {
    DecodeError(what.to_string())
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
    /// Chunks with sampled stacks: the ids seen so far, which later ones are coded against.
    stack_predictor: StackPredictor,
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
            stack_predictor: StackPredictor::default(),
        }
    }

    /// Decodes one events chunk payload into `out` (cleared first; its capacity is reused).
    /// On error `out` holds the records before the damage.
    pub fn decode(&mut self, payload: &[u8], out: &mut Vec<Record>) -> Result<(), DecodeError> {
        self.decode_in_slices(payload, out, usize::MAX, |_| {})
    }

    /// Decodes one events chunk payload `slice` records at a time: `each` is handed `out` every
    /// time it holds `slice` records, and must leave it empty; the last records of the chunk
    /// (up to `slice`) are left in `out`. A consumer that reads each slice as it comes reads
    /// records still in the caches, where a whole chunk's (28 MiB for 2^19 records) went to
    /// memory and back. On error, the slices before the damage have been handed over and `out`
    /// holds the records after them, up to the damage.
    pub fn decode_in_slices(
        &mut self,
        payload: &[u8],
        out: &mut Vec<Record>,
        slice: usize,
        each: impl FnMut(&mut Vec<Record>),
    ) -> Result<(), DecodeError> {
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
                        self.decode_raw(&raw, out, slice.max(1), each)
                    } else {
                        Err(bad("decompressed size differs from the declared size"))
                    }
                }),
            None => Err(bad("no zstd context")),
        };
        self.raw = raw;
        result
    }

    /// Decodes a decompressed chunk: its header, its columns, then its records.
    fn decode_raw(
        &mut self,
        raw: &[u8],
        out: &mut Vec<Record>,
        slice: usize,
        each: impl FnMut(&mut Vec<Record>),
    ) -> Result<(), DecodeError> {
        let mut c = Cursor::new(raw);
        let header = read_header(&mut c, raw.len(), &mut self.tids, &mut self.anchors)?;
        let columns = ChunkColumns::read(&mut c, &header)?;
        self.decode_records(&header, columns, out, slice, each)
    }

    /// The record loop: each record's op byte, seq and thread, then a marker's time and label,
    /// or an event's size and addresses and its time. `out` goes to `each` whenever it holds
    /// `slice` records (at least 1).
    fn decode_records(
        &mut self,
        header: &ChunkHeader,
        columns: ChunkColumns<'_>,
        out: &mut Vec<Record>,
        slice: usize,
        mut each: impl FnMut(&mut Vec<Record>),
    ) -> Result<(), DecodeError> {
        let ChunkColumns {
            mut ops,
            gaps,
            tid_runs,
            mut markers,
            mut events,
            mut stacks,
        } = columns;
        let &ChunkHeader {
            first_seq,
            synthetic,
            stacks: alloc_stacks,
            free_stacks,
            sampled_stacks: _,
            records: n,
        } = header;
        let stack_predictor = &mut self.stack_predictor;
        stack_predictor.clear();
        // Every record takes at least its op byte: a count beyond that is a lie, not a reason
        // to reserve memory.
        out.reserve((n as usize).min(ops.remaining()).min(slice));
        let predictor = &mut self.predictor;
        predictor.reset();
        let producers = &mut self.producers;
        producers.clear();
        let mut expected = first_seq;
        let mut bases = Bases {
            new: 0,
            old: 0,
            last_synthetic: first_seq,
        };
        let mut clock = Clock::new(&self.anchors);
        let mut gap = GapReader::new(gaps)?;
        let mut threads = ThreadRuns::new(&self.tids, tid_runs);

        for i in 0..n {
            if out.len() >= slice {
                each(out);
                out.clear();
            }
            let byte = ops.byte().ok_or_else(|| ends_early("op"))?;
            let seq = gap.seq(i, expected)?;
            let tid = threads.next()?;
            let tag = byte & TAG_MASK;
            if tag == TAG_MARKER {
                out.push(markers.read(seq, tid)?);
                continue;
            }
            let op =
                Op::from_tag(tag).ok_or_else(|| DecodeError(format!("unknown op tag {tag}")))?;
            expected = seq.checked_add(1).ok_or_else(|| bad("seq overflows"))?;
            let shape = shape(op);
            // Chunks without addresses get their own function: one for both modes, choosing the
            // address decoding per call, ran 8 % more instructions per event (cachegrind,
            // `analyze` of a cc1 trace, either mode).
            let (addr, size, old_addr) = if synthetic {
                events.without_addresses(byte, shape, seq, &mut bases, producers)?
            } else {
                events.with_addresses(byte, shape, &mut bases, producers, predictor)?
            };
            let stack = match &mut stacks {
                StackColumns::None => 0,
                StackColumns::PerCall(ids) => {
                    if (shape != Shape::Free && alloc_stacks)
                        || (shape == Shape::Free && free_stacks)
                    {
                        u32::try_from(ids.varint().ok_or_else(|| ends_early("stack"))?)
                            .map_err(|_| bad("stack id too large"))?
                    } else {
                        0
                    }
                }
                StackColumns::Sampled(sampled) if shape != Shape::Free => {
                    sampled.next(tid, size, stack_predictor)?
                }
                StackColumns::Sampled(_) => 0,
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
                    stack,
                    op,
                    addr,
                    size,
                    old_addr,
                }),
            );
        }
        match &stacks {
            StackColumns::Sampled(sampled) => sampled.finish(),
            _ => Ok(()),
        }
    }
}

/// The error of a column that ends before the records it describes.
pub(super) fn ends_early(what: &str) -> DecodeError {
    DecodeError(format!("{what} column ends early"))
}

/// The error of a header, or a column length, cut short.
fn cut_short() -> DecodeError {
    bad("chunk header cut short")
}

/// The header of a decompressed chunk, apart from its thread table and anchors (read into
/// buffers the decoder keeps from chunk to chunk).
struct ChunkHeader {
    first_seq: u64,
    /// The chunk stores no heap addresses (`FLAG_SYNTHETIC`).
    synthetic: bool,
    /// Allocations and reallocs carry a stack id (`FLAG_STACKS`).
    stacks: bool,
    /// Frees carry a stack id (`FLAG_FREE_STACKS`).
    free_stacks: bool,
    /// Allocations' stack ids are stored as samples (`FLAG_SAMPLED_STACKS`).
    sampled_stacks: bool,
    records: u64,
}

/// Reads a chunk's header: first seq, flags, record count, its thread table into `tids` and its
/// time anchors into `anchors`.
fn read_header(
    c: &mut Cursor<'_>,
    raw_len: usize,
    tids: &mut Vec<u32>,
    anchors: &mut Vec<(u64, u64)>,
) -> Result<ChunkHeader, DecodeError> {
    let first_seq = c.varint().ok_or_else(cut_short)?;
    let flags = c.varint().ok_or_else(cut_short)?;
    let known = FLAG_SYNTHETIC | FLAG_STACKS | FLAG_FREE_STACKS | FLAG_SAMPLED_STACKS;
    let needs_stacks = FLAG_FREE_STACKS | FLAG_SAMPLED_STACKS;
    if flags & !known != 0
        || (flags & needs_stacks != 0 && flags & FLAG_STACKS == 0)
        || flags & needs_stacks == needs_stacks
    {
        return Err(DecodeError(format!("unknown chunk flags {flags:#x}")));
    }
    let synthetic = flags & FLAG_SYNTHETIC != 0;
    let n = c.varint().ok_or_else(cut_short)?;
    if n > u64::from(crate::format::MAX_RAW_CHUNK) {
        return Err(bad("implausible record count"));
    }
    let n_tids = c.varint().ok_or_else(cut_short)?;
    if n_tids > n.max(1) {
        return Err(bad("more threads than records"));
    }
    tids.clear();
    for _ in 0..n_tids {
        tids.push(
            u32::try_from(c.varint().ok_or_else(cut_short)?)
                .map_err(|_| bad("thread id too large"))?,
        );
    }
    read_anchors(c, raw_len, first_seq, anchors)?;
    Ok(ChunkHeader {
        first_seq,
        synthetic,
        stacks: flags & FLAG_STACKS != 0,
        free_stacks: flags & FLAG_FREE_STACKS != 0,
        sampled_stacks: flags & FLAG_SAMPLED_STACKS != 0,
        records: n,
    })
}

/// The anchors: the first's seq as a zigzag delta from `first_seq` and its time, each next one
/// as deltas from the previous (seq: forward; time: zigzag).
fn read_anchors(
    c: &mut Cursor<'_>,
    raw_len: usize,
    first_seq: u64,
    anchors: &mut Vec<(u64, u64)>,
) -> Result<(), DecodeError> {
    let n_anchors = c.varint().ok_or_else(cut_short)?;
    if n_anchors > raw_len as u64 {
        return Err(bad("implausible anchor count"));
    }
    anchors.clear();
    for i in 0..n_anchors {
        let a = c.varint().ok_or_else(cut_short)?;
        let b = c.varint().ok_or_else(cut_short)?;
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
    Ok(())
}

/// The chunk's columns (in `COLUMN_NAMES` order), grouped by who reads them.
struct ChunkColumns<'a> {
    stacks: StackColumns<'a>,
    ops: Cursor<'a>,
    gaps: Cursor<'a>,
    tid_runs: Cursor<'a>,
    markers: MarkerColumns<'a>,
    events: EventColumns<'a>,
}

impl<'a> ChunkColumns<'a> {
    /// Reads the columns after the header, in file order.
    fn read(c: &mut Cursor<'a>, header: &ChunkHeader) -> Result<Self, DecodeError> {
        let ops = column(c)?;
        let gaps = column(c)?;
        let tid_runs = column(c)?;
        let sizes = split_column(c)?;
        let addrs = column(c)?;
        let refs = split_column(c)?;
        let depths = column(c)?;
        let times = column(c)?;
        let labels = column(c)?;
        let stacks = match (header.stacks, header.sampled_stacks) {
            (false, _) => StackColumns::None,
            (true, false) => StackColumns::PerCall(column(c)?),
            (true, true) => {
                let gaps = column(c)?;
                StackColumns::Sampled(SampledStackCursor::new(gaps, column(c)?))
            }
        };
        Ok(ChunkColumns {
            stacks,
            ops,
            gaps,
            tid_runs,
            markers: MarkerColumns { times, labels },
            events: EventColumns {
                sizes,
                addrs,
                refs,
                depths,
            },
        })
    }
}

/// Where a chunk's stack ids are.
enum StackColumns<'a> {
    /// A chunk without stacks.
    None,
    /// `stacks`: an id per allocation and realloc (and per free with `FLAG_FREE_STACKS`).
    PerCall(Cursor<'a>),
    /// `sample_gaps` and `stack_ids` (`FLAG_SAMPLED_STACKS`).
    Sampled(SampledStackCursor<'a>),
}

/// A column: its length, then its bytes.
fn column<'a>(c: &mut Cursor<'a>) -> Result<Cursor<'a>, DecodeError> {
    let len = c.varint().ok_or_else(cut_short)?;
    let bytes = c
        .take(usize::try_from(len).map_err(|_| cut_short())?)
        .ok_or_else(cut_short)?;
    Ok(Cursor::new(bytes))
}

/// The three columns of a `Split` column, in file order.
fn split_column<'a>(c: &mut Cursor<'a>) -> Result<SplitCursor<'a>, DecodeError> {
    Ok(SplitCursor {
        lo: column(c)?,
        hi: column(c)?,
        big: column(c)?,
        pending: None,
    })
}

/// Walks the gaps column: `at` is the index of the next record whose seq jumps by `gap`
/// (u64::MAX when there is none).
struct GapReader<'a> {
    gaps: Cursor<'a>,
    at: u64,
    gap: u64,
}

impl<'a> GapReader<'a> {
    fn new(gaps: Cursor<'a>) -> Result<Self, DecodeError> {
        let mut g = GapReader {
            gaps,
            at: 0,
            gap: 0,
        };
        g.read(0, 0)?;
        Ok(g)
    }

    /// The seq of record `i`: `expected` (the previous event's + 1), unless a gap is at `i`.
    #[inline(always)]
    fn seq(&mut self, i: u64, expected: u64) -> Result<u64, DecodeError> {
        if i != self.at {
            return Ok(expected);
        }
        let seq = expected
            .checked_add(self.gap)
            .ok_or_else(|| bad("seq overflows"))?;
        self.next(i)?;
        Ok(seq)
    }

    /// Past the gap at record `i`: reads the next one (at least one record further).
    #[inline]
    fn next(&mut self, i: u64) -> Result<(), DecodeError> {
        self.read(i, 1)
    }

    fn read(&mut self, from: u64, min: u64) -> Result<(), DecodeError> {
        if self.gaps.remaining() == 0 {
            self.at = u64::MAX;
            return Ok(());
        }
        let short = || bad("seq gap column ends early");
        let after = self.gaps.varint().ok_or_else(short)?;
        self.gap = self.gaps.varint().ok_or_else(short)?;
        self.at = from
            .checked_add(after)
            .filter(|_| after >= min)
            .ok_or_else(|| bad("seq gaps out of order"))?;
        Ok(())
    }
}

/// Walks the tid_runs column: the thread of each record.
struct ThreadRuns<'a, 't> {
    runs: Cursor<'a>,
    tids: &'t [u32],
    tid: u32,
    /// Records left in the current run; with one thread the chunk has no runs, and never runs out.
    left: u64,
}

impl<'a, 't> ThreadRuns<'a, 't> {
    fn new(tids: &'t [u32], runs: Cursor<'a>) -> Self {
        ThreadRuns {
            runs,
            tids,
            tid: tids.first().copied().unwrap_or(0),
            left: if tids.len() <= 1 { u64::MAX } else { 0 },
        }
    }

    /// The thread of the next record.
    #[inline(always)]
    fn next(&mut self) -> Result<u32, DecodeError> {
        if self.left == 0 {
            let idx = self.runs.varint().ok_or_else(|| ends_early("thread"))?;
            self.left = self
                .runs
                .varint()
                .filter(|&l| l > 0)
                .ok_or_else(|| bad("thread run of length 0"))?;
            self.tid = *self
                .tids
                .get(idx as usize)
                .ok_or_else(|| bad("thread index out of range"))?;
        }
        self.left -= 1;
        Ok(self.tid)
    }
}

/// The columns of markers: their times and labels.
struct MarkerColumns<'a> {
    times: Cursor<'a>,
    labels: Cursor<'a>,
}

impl MarkerColumns<'_> {
    #[inline(always)]
    fn read(&mut self, seq: u64, tid: u32) -> Result<Record, DecodeError> {
        let t_ns = self
            .times
            .varint()
            .ok_or_else(|| ends_early("marker time"))?;
        let len = self.labels.varint().ok_or_else(|| ends_early("label"))?;
        let bytes = self
            .labels
            .take(usize::try_from(len).map_err(|_| ends_early("label"))?)
            .ok_or_else(|| ends_early("label"))?;
        let label = String::from_utf8_lossy(bytes).into_owned();
        Ok(Record::Marker(Box::new(Marker {
            seq,
            t_ns,
            tid,
            label,
        })))
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
