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
#[derive(Default)]
pub(super) struct Split {
    pub(super) lo: Vec<u8>,
    pub(super) hi: Vec<u8>,
    pub(super) big: Vec<u8>,
    /// The last byte of `hi` has its high nibble free.
    pub(super) half: bool,
}

impl Split {
    pub(super) fn clear(&mut self) {
        self.lo.clear();
        self.hi.clear();
        self.big.clear();
        self.half = false;
    }
}

#[inline(always)]
pub(super) fn put_split(col: &mut Split, v: u64) {
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
    pub(super) fn in_file_order(&self) -> [&[u8]; 13] {
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

    pub(super) fn len(&self) -> usize {
        self.in_file_order()
            .iter()
            .map(|c| c.len() + 10)
            .sum::<usize>()
            + self.stacks.len()
            + self.sample_gaps.len()
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
