//! The events chunks of one image, built on the drain thread as records are merged, and the
//! sealed chunk (`Batch`) handed to a compressor thread.
//!
//! Records go from the ring straight into the image's `ChunkEncoder` (through its `BlockIds`
//! without addresses): no copy of the 32-byte records, no buffer of them per chunk. The
//! encoder's columns are about 2.5 bytes per event; compression, the part that takes a stronger
//! zstd level when the compressors keep up, runs on the other threads.
use trace::{ChunkEncoder, Marker, Op, UncompressedChunk};

use crate::block_ids::BlockIds;

use crate::anchors::AnchorSink;
use crate::protocol::{OP_HAS_STACK, OP_SHIFT, SEQ_MASK};
use crate::stacks::{Arena, Stacks};
use std::sync::Arc;

/// Bits 0-47 of a realloc's size and old address (the stack offset rides above, see
/// `AL_OP_HAS_STACK`).
const LOW_48: u64 = (1 << 48) - 1;

/// A sealed events chunk of one stream, not compressed yet.
pub struct Batch {
    /// The stream (process image) it belongs to.
    pub stream: u32,
    pub chunk: UncompressedChunk,
    /// Events among the chunk's records (the others are markers).
    pub events: u32,
}

impl Batch {
    /// The chunk's buffer, to fill again (`ChunkBuilder::seal`).
    pub fn into_buffer(self) -> Vec<u8> {
        self.chunk.raw
    }
}

/// How the events chunks of a recording with stacks store the ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackIds {
    /// An id per allocation (and per free with `frees`): `--stacks=all`.
    EveryCall { frees: bool },
    /// Only the sampled allocations' ids (`trace::TraceHeader::sampled_stack_chunks`).
    Sampled,
}

impl StackIds {
    /// As the trace's header says (`None` without stacks).
    pub fn of(header: &trace::TraceHeader) -> Option<StackIds> {
        header.stacks.then_some(if header.sampled_stack_chunks() {
            StackIds::Sampled
        } else {
            StackIds::EveryCall {
                frees: header.free_stacks,
            }
        })
    }
}

/// One image's chunk being built: its encoder, and the live blocks' ids when recording without
/// addresses (kept across chunks, applied in seq order: the reason this runs on the drain thread).
pub struct ChunkBuilder {
    encoder: ChunkEncoder,
    block_ids: Option<BlockIds>,
    /// Records the encoder refused (out of order: a recorder bug), left out of the trace.
    pub refused: u64,
    /// Markers in the chunk being built.
    markers: u32,
    /// `record --stacks`: the recording's stack ids and this image's arena (once the shim sent it).
    stacks: Option<(Stacks, Arc<Arena>)>,
    /// `record --leaks`, in the command's own process: its live blocks by real address.
    exit_blocks: Option<ExitBlocks>,
}

/// What the leak check needs of a live block besides its real address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExitBlock {
    /// Requested bytes.
    pub size: u64,
    /// Its allocation's stack id (0: none).
    pub stack: u32,
}

/// The live blocks of an image by real address (`record --leaks`), kept whatever the trace
/// stores (addresses or ids): the leak check at exit reads their memory.
pub type ExitBlocks = blockmap::LiveTable<ExitBlock>;

/// Once the id map outgrows a core's caches (`BlockIds::worth_prefetching`; python3: 1.8 M
/// blocks), the slot of the record this many places ahead is fetched while the current one is
/// encoded. A small map stays in the caches, where the prefetch only costs (alloc-micro: a
/// tenth of the drain thread).
const PREFETCH_AHEAD: usize = 16;

impl ChunkBuilder {
    /// `encoder` fresh or `reset` (`into_encoder` of a finished image); with `addresses` false
    /// the chunks store block ids instead of addresses.
    #[cfg(test)]
    pub fn new(encoder: ChunkEncoder, addresses: bool) -> ChunkBuilder {
        Self::with_stacks(encoder, addresses, None)
    }

    /// As `new`; with `stacks` the chunks keep stack ids, stored as `stacks` says.
    pub fn with_stacks(
        encoder: ChunkEncoder,
        addresses: bool,
        stacks: Option<StackIds>,
    ) -> ChunkBuilder {
        let encoder = match stacks {
            Some(StackIds::EveryCall { frees }) => encoder.with_stacks(frees),
            Some(StackIds::Sampled) => encoder.with_sampled_stacks(),
            None => encoder,
        };
        let (encoder, block_ids) = if addresses {
            (encoder, None)
        } else {
            (encoder.without_addresses(), Some(BlockIds::new()))
        };
        ChunkBuilder {
            encoder,
            block_ids,
            refused: 0,
            markers: 0,
            stacks: None,
            exit_blocks: None,
        }
    }

    /// Keeps the live blocks for the leak check at exit (`record --leaks`).
    pub fn keep_exit_blocks(&mut self) {
        self.exit_blocks = Some(ExitBlocks::with_capacity(1 << 12));
    }

    /// The live blocks kept for the leak check, taken (`keep_exit_blocks`).
    pub fn take_exit_blocks(&mut self) -> Option<ExitBlocks> {
        self.exit_blocks.take()
    }

    /// The live blocks kept for the leak check.
    pub fn exit_blocks(&self) -> Option<&ExitBlocks> {
        self.exit_blocks.as_ref()
    }

    /// The image's stack arena arrived: records name their stacks in it.
    pub fn attach_stacks(&mut self, stacks: Stacks, arena: Arc<Arena>) {
        self.stacks = Some((stacks, arena));
    }

    /// The encoder, reset, for another image.
    pub fn into_encoder(mut self) -> ChunkEncoder {
        self.encoder.reset();
        self.encoder
    }

    /// Records (events and markers) in the chunk being built.
    #[inline]
    pub fn len(&self) -> usize {
        self.encoder.len()
    }

    /// Encodes ring records of thread `tid` one by one, each checked: a record with an unknown
    /// tag or out of seq order is refused (counted in `refused`). The window's path, and the
    /// runs of recordings with stacks or `--leaks`.
    #[inline]
    pub fn push_records(&mut self, records: &[[u64; 4]], tid: u32) {
        match &self.block_ids {
            Some(ids) if ids.worth_prefetching() => {
                for i in 0..records.len() {
                    if let (Some(ids), Some(&[_, addr, _, old_addr])) =
                        (&self.block_ids, records.get(i + PREFETCH_AHEAD))
                    {
                        ids.prefetch(if old_addr != 0 { old_addr } else { addr });
                    }
                    self.push_record(records[i], tid);
                }
            }
            _ => records.iter().for_each(|&r| self.push_record(r, tid)),
        }
    }

    /// Encodes the front of `records` (ring records of thread `tid`) that continues the seq
    /// order from `next_seq`: dense seqs, known tags (`in_order_prefix`). Returns how many were
    /// taken; the record after them (if any) needs the general path. The drain's hot loop: the
    /// checks are one tight pass, then the encoder takes the run as one (`ChunkEncoder::push_run`).
    #[inline]
    pub fn push_run(&mut self, records: &[[u64; 4]], next_seq: u64, tid: u32) -> usize {
        let k = in_order_prefix(records, next_seq);
        let run = &records[..k];
        if self.stacks.is_some() || self.exit_blocks.is_some() {
            // `record --stacks` and `--leaks`: the per-record path does their work.
            self.push_records(run, tid);
            return k;
        }
        let n = k as u32; // at most a chunk's records
        let result = match &mut self.block_ids {
            Some(ids) if ids.worth_prefetching() => self.encoder.push_run(
                next_seq,
                tid,
                n,
                &mut RingRun::<true>::new(run, next_seq, Some(ids)),
            ),
            ids => self.encoder.push_run(
                next_seq,
                tid,
                n,
                &mut RingRun::<false>::new(run, next_seq, ids.as_mut()),
            ),
        };
        if result.is_err() {
            // Behind the chunk's order (a recorder bug): refused before any event was taken,
            // so each record goes through the checked path to be counted.
            self.push_records(run, tid);
        }
        k
    }

    #[inline(always)]
    fn push_record(&mut self, [seq_op, mut addr, mut size, mut old_addr]: [u64; 4], tid: u32) {
        let tag = (seq_op >> OP_SHIFT) as u8;
        let Some(op) = Op::from_tag(tag & !OP_HAS_STACK) else {
            self.refused += 1;
            return;
        };
        let mut stack = 0;
        if tag & OP_HAS_STACK != 0 {
            let offset = take_stack_offset(op, &mut size, &mut old_addr);
            if let Some((stacks, arena)) = &self.stacks {
                stack = stacks.id(arena, offset);
            }
        }
        let seq = seq_op & SEQ_MASK;
        if let Some(live) = &mut self.exit_blocks {
            // A realloc that failed (no new block, a size asked) left the old block live.
            if op.is_free() {
                live.remove(addr);
            } else if op.is_realloc() && (addr != 0 || size == 0) {
                live.remove(old_addr);
            }
            if !op.is_free() && addr != 0 {
                live.insert(addr, ExitBlock { size, stack });
            }
        }
        if let Some(ids) = &mut self.block_ids {
            ids.rewrite(op, seq, &mut addr, &mut old_addr);
        }
        let event = trace::Event {
            seq,
            t_ns: 0,
            tid,
            stack,
            op,
            addr,
            size,
            old_addr,
        };
        if self.encoder.push_event(&event).is_err() {
            self.refused += 1;
        }
    }

    /// A marker at its place (before the records with a higher seq).
    pub fn push_marker(&mut self, marker: &Marker) {
        match self.encoder.push_marker(marker) {
            Ok(()) => self.markers += 1,
            Err(_) => self.refused += 1,
        }
    }

    /// Markers in the chunk being built; the count starts again (call before `seal`).
    pub fn take_markers(&mut self) -> u32 {
        std::mem::take(&mut self.markers)
    }

    /// Seals the chunk into `buffer` (a buffer to reuse); `None` when it is empty. The encoder
    /// keeps the anchors the next chunk needs.
    pub fn seal(&mut self, buffer: Vec<u8>) -> Option<UncompressedChunk> {
        self.encoder.finish_raw(buffer)
    }

    /// Blocks the id map had no memory for (`BlockIds::lost`); 0 with addresses.
    pub fn ids_lost(&self) -> u64 {
        self.block_ids.as_ref().map_or(0, BlockIds::lost)
    }
}

/// A run's ring records (`push_run`: known tags, seqs from `first`, no stacks kept) as events,
/// their addresses rewritten to block ids when `ids` keeps them. With `PREFETCH` (a map larger
/// than the caches), the id slot of the record `PREFETCH_AHEAD` places on is fetched meanwhile.
struct RingRun<'a, const PREFETCH: bool> {
    records: &'a [[u64; 4]],
    first: u64,
    ids: Option<&'a mut BlockIds>,
}

impl<'a, const PREFETCH: bool> RingRun<'a, PREFETCH> {
    fn new(records: &'a [[u64; 4]], first: u64, ids: Option<&'a mut BlockIds>) -> Self {
        RingRun {
            records,
            first,
            ids,
        }
    }
}

impl<const PREFETCH: bool> trace::RunEvents for RingRun<'_, PREFETCH> {
    #[inline(always)]
    fn event(&mut self, seq: u64) -> trace::RunEvent {
        let i = (seq - self.first) as usize;
        if PREFETCH {
            if let (Some(ids), Some(&[_, addr, _, old_addr])) =
                (&self.ids, self.records.get(i + PREFETCH_AHEAD))
            {
                ids.prefetch(if old_addr != 0 { old_addr } else { addr });
            }
        }
        let [seq_op, mut addr, mut size, mut old_addr] = self.records[i];
        // Known: `in_order_prefix` took only records with a known tag.
        let op = known_op(seq_op).unwrap_or(Op::Malloc);
        if (seq_op >> OP_SHIFT) as u8 & OP_HAS_STACK != 0 {
            // A stack offset rides in the record; this recording keeps no stacks.
            take_stack_offset(op, &mut size, &mut old_addr);
        }
        if let Some(ids) = &mut self.ids {
            ids.rewrite(op, seq, &mut addr, &mut old_addr);
        }
        trace::RunEvent {
            op,
            addr,
            size,
            old_addr,
            stack: 0,
        }
    }
}

/// The stack arena offset a record tagged `OP_HAS_STACK` carries, taken out of its fields so
/// that they are the call's again: a realloc's in the top 16 bits of its old address (high half)
/// and of its size (low half), another call's in the old address (the shim's al_record_stacks).
#[inline(always)]
fn take_stack_offset(op: Op, size: &mut u64, old_addr: &mut u64) -> u64 {
    if op.is_realloc() {
        let offset = (*old_addr >> 48) << 16 | *size >> 48;
        *old_addr &= LOW_48;
        *size &= LOW_48;
        offset
    } else {
        std::mem::take(old_addr)
    }
}

/// How many of `records` continue the seq order from `next_seq` (dense, known op tags): the
/// per-record check of the drain's runs, a tight pass over the ring's memory, four records at a
/// time with one branch for the four.
#[inline]
fn in_order_prefix(records: &[[u64; 4]], next_seq: u64) -> usize {
    let mut taken = 0;
    let mut fours = records.chunks_exact(4);
    for four in &mut fours {
        let want = next_seq + taken as u64;
        let out = out_of_order(&four[0], want)
            | out_of_order(&four[1], want + 1)
            | out_of_order(&four[2], want + 2)
            | out_of_order(&four[3], want + 3);
        if out {
            break;
        }
        taken += 4;
    }
    taken
        + records[taken..]
            .iter()
            .zip(next_seq + taken as u64..)
            .take_while(|&(r, want)| !out_of_order(r, want))
            .count()
}

/// True when a ring record does not continue the run at seq `want`: another seq, or a tag no
/// op has.
#[inline(always)]
fn out_of_order(record: &[u64; 4], want: u64) -> bool {
    (record[0] & SEQ_MASK != want) | known_op(record[0]).is_none()
}

/// The ops by tag byte, stack flag cleared: `None` where no op has the tag (the ring owner's
/// record among them). A table of 256 so that the tag byte indexes it without a bounds check.
const OPS_BY_TAG: [Option<Op>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < Op::ALL.len() {
        t[Op::ALL[i] as usize] = Some(Op::ALL[i]);
        i += 1;
    }
    t
};

/// The op of a ring record's tag (its stack flag aside), `None` for a tag no op has.
#[inline(always)]
fn known_op(seq_op: u64) -> Option<Op> {
    OPS_BY_TAG[usize::from((seq_op >> OP_SHIFT) as u8 & !OP_HAS_STACK)]
}

impl AnchorSink for ChunkBuilder {
    fn push_anchor(&mut self, seq: u64, t_ns: u64) {
        self.encoder.push_anchor(seq, t_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::Record;

    fn decode(chunk: &UncompressedChunk) -> Vec<Record> {
        let mut c = zstd::bulk::Compressor::new(1).unwrap();
        let encoded = chunk.compress(&mut c).unwrap();
        trace::codec::decode_payload(&encoded.payload).unwrap()
    }

    fn malloc(seq: u64, addr: u64) -> [u64; 4] {
        [seq | (Op::Malloc as u64) << OP_SHIFT, addr, 16, 0]
    }

    fn free(seq: u64, addr: u64) -> [u64; 4] {
        [seq | (Op::Free as u64) << OP_SHIFT, addr, 0, 0]
    }

    /// Without addresses a free names its block's allocation, also across chunks; a block
    /// allocated before tracing keeps its address; a bad tag or a seq out of order is refused
    /// and counted, and the chunk goes on.
    #[test]
    fn records_become_events_with_block_ids_across_chunks() {
        let mut b = ChunkBuilder::new(ChunkEncoder::new(1), false);
        b.push_anchor(0, 0);
        b.push_records(&[malloc(0, 0x1000), malloc(1, 0x2000)], 5);
        b.push_anchor(2, 200);
        let first = b.seal(Vec::new()).unwrap();
        assert_eq!(first.records, 2);
        b.push_records(&[free(2, 0x2000), [3 | 0xff << OP_SHIFT, 0, 0, 0]], 6);
        b.push_marker(&Marker {
            seq: 3,
            t_ns: 7,
            tid: 6,
            label: "m".into(),
        });
        b.push_records(&[free(3, 0x9000), malloc(1, 0x3000), free(4, 0x1000)], 6);
        b.push_anchor(5, 500);
        let second = b.seal(Vec::new()).unwrap();
        assert_eq!(b.refused, 2, "the bad tag and seq 1 again");
        let events: Vec<(u64, u32, u64, u64)> = decode(&second)
            .into_iter()
            .map(|r| match r {
                Record::Event(e) => (e.seq, e.tid, e.addr, e.t_ns),
                Record::Marker(m) => (m.seq, 0, 0, m.t_ns),
            })
            .collect();
        let id = trace::codec::synthetic_address;
        assert_eq!(
            events,
            [
                (2, 6, id(1), 200),
                (3, 0, 0, 7),
                (3, 6, 0x9000, 300),
                (4, 6, id(0), 400)
            ]
        );
        let mut reset = b.into_encoder();
        assert!(
            reset.finish_raw(Vec::new()).is_none(),
            "nothing carried over"
        );
    }

    /// The run's check stops at the first record out of seq order or with a tag no op has,
    /// wherever it falls among the four records checked at a time; a tag with the stack flag is
    /// known.
    #[test]
    fn the_prefix_stops_at_the_first_record_out_of_order() {
        let known = |tag: u64| Op::from_tag(tag as u8 & !OP_HAS_STACK).is_some();
        for len in 0..11u64 {
            for bad_at in 0..=len {
                for tag in 0..=255u64 {
                    let mut records: Vec<[u64; 4]> =
                        (0..len).map(|i| malloc(100 + i, 0x1000 + 16 * i)).collect();
                    let want = if bad_at == len {
                        len
                    } else if tag == 0 {
                        // A seq skipped instead of a bad tag.
                        records[bad_at as usize][0] += 1;
                        bad_at
                    } else {
                        records[bad_at as usize][0] = (100 + bad_at) | tag << OP_SHIFT;
                        if known(tag) {
                            len
                        } else {
                            bad_at
                        }
                    };
                    let got = in_order_prefix(&records, 100) as u64;
                    assert_eq!(got, want, "len {len}, bad at {bad_at}, tag {tag:#x}");
                }
            }
        }
    }

    /// Ring records of threads taking turns: mallocs (some of them live for long, so that the
    /// id map outgrows the caches and the prefetching loop runs), frees, reallocs (a stack
    /// offset riding in some), a free of a block never allocated and, after `bad_at`, a record
    /// with an unknown tag.
    fn ring_records(n: u64, bad_at: u64) -> Vec<[u64; 4]> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut live: Vec<u64> = Vec::new();
        let mut next = 0x5500_0000_0000u64;
        (0..n)
            .map(|seq| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let tag = |op: Op| {
                    (op as u64
                        | if x.is_multiple_of(5) {
                            u64::from(OP_HAS_STACK)
                        } else {
                            0
                        })
                        << OP_SHIFT
                };
                if seq == bad_at {
                    return [seq | 0x0f << OP_SHIFT, 0, 0, 0];
                }
                match x % 8 {
                    0..=3 if live.len() < 40_000 || x.is_multiple_of(3) => {
                        next += 16 * (1 + x % 40);
                        live.push(next);
                        [
                            seq | tag(Op::Malloc),
                            next,
                            16 + (x >> 8) % 500,
                            x >> 16 & 0xfff,
                        ]
                    }
                    4 => {
                        next += 16;
                        let old = live.pop().unwrap_or(0x10);
                        live.push(next);
                        [seq | tag(Op::Realloc), next, 1 << 48 | 64, 3 << 48 | old]
                    }
                    5 => [seq | (Op::Free as u64) << OP_SHIFT, 0x30, 0, 0],
                    _ => {
                        let i = (x >> 20) as usize % live.len().max(1);
                        let addr = if live.is_empty() {
                            0
                        } else {
                            live.swap_remove(i)
                        };
                        [seq | tag(Op::Free), addr, 0, 7]
                    }
                }
            })
            .collect()
    }

    /// `push_run` takes the records up to the first one out of order or unknown, and encodes
    /// them as `push_records` does one by one, with and without addresses; the id map of the
    /// records taken is the same (the frees after it name the same blocks).
    #[test]
    fn runs_encode_as_the_records_one_by_one() {
        let records = ring_records(200_000, 150_000);
        for addresses in [false, true] {
            let mut by_run = ChunkBuilder::new(ChunkEncoder::new(1), addresses);
            let mut single = ChunkBuilder::new(ChunkEncoder::new(1), addresses);
            let mut next_seq = 0;
            for (turn, part) in records.chunks(777).enumerate() {
                let tid = 10 + turn as u32 % 3;
                let k = by_run.push_run(part, next_seq, tid);
                single.push_records(&part[..k], tid);
                next_seq += k as u64;
                if k < part.len() {
                    assert_eq!(next_seq, 150_000, "stops at the unknown tag only");
                    break;
                }
            }
            assert_eq!(next_seq, 150_000);
            assert!(by_run
                .block_ids
                .as_ref()
                .is_none_or(BlockIds::worth_prefetching));
            assert_eq!((by_run.refused, single.refused), (0, 0));
            let a = by_run.seal(Vec::new()).unwrap();
            let b = single.seal(Vec::new()).unwrap();
            assert_eq!(a.raw, b.raw, "addresses {addresses}");
            assert_eq!(a.records, 150_000);
            // Behind the chunk's order: refused and counted, as one by one.
            by_run.push_run(&records[..10], 0, 1);
            by_run.push_run(&records[10..], 10, 1);
            assert_eq!(by_run.push_run(&records[5..6], 5, 1), 1);
            assert_eq!(by_run.refused, 1);
        }
    }
}
