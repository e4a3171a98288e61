//! The columns of an events chunk (docs/trace-format.md, "Events chunks"): how values are laid
//! into them (`Split`, explicit addresses) and read back (`SplitCursor`), their file order and names.
use super::decode::{bad, DecodeError};
use super::layout::FLAG_SAMPLED_STACKS;
use crate::varint::{self, Cursor};

/// An explicit address: its zigzag delta from `base`.
#[inline(always)]
pub(super) fn put_address(col: &mut Vec<u8>, addr: u64, base: u64) {
    varint::put(col, varint::zigzag(addr.wrapping_sub(base) as i64));
}

#[inline(always)]
pub(super) fn read_address(addrs: &mut Cursor<'_>, base: u64) -> Result<u64, DecodeError> {
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
///
/// While the chunk is built, a value's low byte and nibble are kept together (`planes`, one
/// `u16` each: one store per value, no nibble pairing per value); the chunk's seal lays them
/// out as the `lo` and `hi` planes.
#[derive(Default)]
pub(super) struct Split {
    /// Per value: the low byte in bits 0-7, the nibble in bits 8-11.
    pub(super) planes: Vec<u16>,
    pub(super) big: Vec<u8>,
}

/// Values from here on have a rest in `big` (their nibble is 15).
const BIG: u64 = 15 << 8;

/// A value's entry in `Split::planes`: the value itself below `BIG` (its nibble is `v >> 8`).
#[inline(always)]
pub(super) fn split_planes(v: u64) -> u16 {
    (if v < BIG { v } else { BIG | v & 0xff }) as u16
}

impl Split {
    pub(super) fn clear(&mut self) {
        self.planes.clear();
        self.big.clear();
    }

    #[inline(always)]
    pub(super) fn push(&mut self, v: u64) {
        self.planes.push(split_planes(v));
        put_big(&mut self.big, v);
    }

    /// Bytes of the `lo`, `hi` and `big` columns.
    fn lens(&self) -> [usize; 3] {
        [
            self.planes.len(),
            self.planes.len().div_ceil(2),
            self.big.len(),
        ]
    }

    /// The `lo`, `hi` and `big` columns, each after its length.
    fn write_to(&self, raw: &mut Vec<u8>) {
        let [lo, hi, big] = self.lens();
        varint::put(raw, lo as u64);
        raw.extend(self.planes.iter().map(|&w| w as u8));
        varint::put(raw, hi as u64);
        // The first value of a pair in the low nibble; an odd last one alone.
        let pairs = self.planes.chunks_exact(2);
        let odd = pairs.remainder().first().map(|&w| (w >> 8) as u8);
        raw.extend(pairs.map(|p| (p[0] >> 8 | p[1] >> 8 << 4) as u8));
        raw.extend(odd);
        varint::put(raw, big as u64);
        raw.extend_from_slice(&self.big);
    }
}

/// A split value's rest when its high part does not fit below the nibble's 15.
#[inline(always)]
pub(super) fn put_big(big: &mut Vec<u8>, v: u64) {
    if v >= BIG {
        varint::put(big, (v >> 8) - 15);
    }
}

/// The chunk's columns (docs/trace-format.md, "Events chunks").
#[derive(Default)]
pub(super) struct Columns {
    pub(super) ops: Vec<u8>,
    /// (records since the previous gap, gap) pairs: only where a seq is not the previous + 1.
    pub(super) gaps: Vec<u8>,
    /// (thread index, run length) pairs.
    pub(super) tid_runs: Vec<u8>,
    pub(super) sizes: Split,
    pub(super) addrs: Vec<u8>,
    pub(super) refs: Split,
    pub(super) depths: Vec<u8>,
    pub(super) mark_times: Vec<u8>,
    pub(super) labels: Vec<u8>,
    /// Stack ids (chunks with `FLAG_STACKS` only; written after the 13 columns above); with
    /// `FLAG_SAMPLED_STACKS` the `stack_ids` column, after `sample_gaps`.
    pub(super) stacks: Vec<u8>,
    /// With `FLAG_SAMPLED_STACKS`: the unsampled allocations before each sampled one.
    pub(super) sample_gaps: Vec<u8>,
}

impl Columns {
    /// An upper bound of the bytes `write_to` appends (the stack columns aside).
    pub(super) fn len(&self) -> usize {
        let plain = [
            &self.ops,
            &self.gaps,
            &self.tid_runs,
            &self.addrs,
            &self.depths,
            &self.mark_times,
            &self.labels,
        ];
        let split = [self.sizes.lens(), self.refs.lens()];
        plain.iter().map(|c| c.len() + 10).sum::<usize>()
            + split.iter().flatten().map(|len| len + 10).sum::<usize>()
            + self.stacks.len()
            + self.sample_gaps.len()
    }

    /// The 13 columns of `COLUMN_NAMES`, each after its length.
    pub(super) fn write_to(&self, raw: &mut Vec<u8>) {
        let put = |raw: &mut Vec<u8>, col: &[u8]| {
            varint::put(raw, col.len() as u64);
            raw.extend_from_slice(col);
        };
        for col in [&self.ops, &self.gaps, &self.tid_runs] {
            put(raw, col);
        }
        self.sizes.write_to(raw);
        put(raw, &self.addrs);
        self.refs.write_to(raw);
        for col in [&self.depths, &self.mark_times, &self.labels] {
            put(raw, col);
        }
    }

    pub(super) fn clear(&mut self) {
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
            &mut self.stacks,
            &mut self.sample_gaps,
        ] {
            col.clear();
        }
    }
}

/// Where an event's encoding writes its columns: the chunk's columns one value at a time
/// (`Columns`, for single records), or a run's reserved space (`RunColumns`).
///
/// # Safety
/// `op`, `size` and `reference` are called at most once each per event: `RunColumns` reserves
/// one entry per event of its run for each and writes without a capacity check.
pub(super) trait ColumnSink {
    /// The event's op byte.
    ///
    /// # Safety
    /// At most once per event (see the trait).
    unsafe fn op(&mut self, byte: u8);
    /// The event's size.
    ///
    /// # Safety
    /// At most once per event (see the trait).
    unsafe fn size(&mut self, v: u64);
    /// The event's back-reference.
    ///
    /// # Safety
    /// At most once per event (see the trait).
    unsafe fn reference(&mut self, v: u64);
    /// The explicit addresses and synthetic references (varints, any number per event).
    fn addrs(&mut self) -> &mut Vec<u8>;
    fn depths(&mut self) -> &mut Vec<u8>;
    /// `(sample_gaps, stacks)`.
    fn stack_columns(&mut self) -> (&mut Vec<u8>, &mut Vec<u8>);
}

impl ColumnSink for Columns {
    #[inline(always)]
    unsafe fn op(&mut self, byte: u8) {
        self.ops.push(byte);
    }

    #[inline(always)]
    unsafe fn size(&mut self, v: u64) {
        self.sizes.push(v);
    }

    #[inline(always)]
    unsafe fn reference(&mut self, v: u64) {
        self.refs.push(v);
    }

    #[inline(always)]
    fn addrs(&mut self) -> &mut Vec<u8> {
        &mut self.addrs
    }

    #[inline(always)]
    fn depths(&mut self) -> &mut Vec<u8> {
        &mut self.depths
    }

    #[inline(always)]
    fn stack_columns(&mut self) -> (&mut Vec<u8>, &mut Vec<u8>) {
        (&mut self.sample_gaps, &mut self.stacks)
    }
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

/// Name of the column chunks with stacks have after the 13 of `COLUMN_NAMES`.
pub const STACKS_COLUMN: &str = "stacks";

/// Names of the columns chunks with sampled stacks have instead of `STACKS_COLUMN`, in file order.
pub const SAMPLED_STACK_COLUMNS: [&str; 2] = ["sample_gaps", "stack_ids"];

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
    let flags = c.varint().ok_or_else(trunc)?;
    c.varint().ok_or_else(trunc)?; // records
    for _ in 0..c.varint().ok_or_else(trunc)? {
        c.varint().ok_or_else(trunc)?;
    }
    for _ in 0..2 * c.varint().ok_or_else(trunc)? {
        c.varint().ok_or_else(trunc)?;
    }
    let stacks = flags & super::layout::FLAG_STACKS != 0;
    let stack_columns: &[&'static str] = match (stacks, flags & FLAG_SAMPLED_STACKS != 0) {
        (false, _) => &[],
        (true, false) => &[STACKS_COLUMN],
        (true, true) => &SAMPLED_STACK_COLUMNS,
    };
    COLUMN_NAMES
        .iter()
        .chain(stack_columns)
        .map(|&name| {
            let len = c.varint().ok_or_else(trunc)?;
            let bytes = c
                .take(usize::try_from(len).map_err(|_| trunc())?)
                .ok_or_else(trunc)?;
            Ok((name, bytes.to_vec()))
        })
        .collect()
}

/// Reads a `Split` column: the low byte, then the high part's nibble (and its varint rest).
pub(super) struct SplitCursor<'a> {
    pub(super) lo: Cursor<'a>,
    pub(super) hi: Cursor<'a>,
    pub(super) big: Cursor<'a>,
    /// The high nibble of the last `hi` byte, not used yet.
    pub(super) pending: Option<u8>,
}

impl SplitCursor<'_> {
    #[inline(always)]
    pub(super) fn value(&mut self) -> Option<u64> {
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
