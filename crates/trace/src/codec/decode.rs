//! The decoder: an events chunk payload back into records.
use super::addresses::{decode_new, decode_old, free_size, new_synthetic, NewBlock, OldSynthetic};
use super::clock::Clock;
use super::columns::SplitCursor;
use super::layout::*;
use super::predictor::{size_class, Predictor};
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

    pub(super) fn decode_raw(
        &mut self,
        raw: &[u8],
        out: &mut Vec<Record>,
    ) -> Result<(), DecodeError> {
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
pub(super) fn push_record(out: &mut Vec<Record>, record: Record) {
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

/// Walks the gaps column: `at` is the index of the next record whose seq jumps by `gap`
/// (u64::MAX when there is none).
pub(super) struct GapReader {
    at: u64,
    gap: u64,
}

impl GapReader {
    pub(super) fn new(gaps: &mut Cursor<'_>) -> Result<GapReader, DecodeError> {
        let mut g = GapReader { at: 0, gap: 0 };
        g.read(gaps, 0, 0)?;
        Ok(g)
    }

    /// Past the gap at record `i`: reads the next one (at least one record further).
    #[inline]
    pub(super) fn next(&mut self, gaps: &mut Cursor<'_>, i: u64) -> Result<(), DecodeError> {
        self.read(gaps, i, 1)
    }

    pub(super) fn read(
        &mut self,
        gaps: &mut Cursor<'_>,
        from: u64,
        min: u64,
    ) -> Result<(), DecodeError> {
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
