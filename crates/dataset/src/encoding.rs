//! Parquet's value encodings, written straight from slices for the calls table: DELTA_BINARY_PACKED
//! of INT64, the RLE / bit-packed hybrid (dictionary indices, definition levels) and PLAIN byte
//! arrays. The parquet crate's encoders take a value at a time through generic buffers (under
//! `perf` on a 20 M-call merge: 19 % of the CPU time in its delta bit-packing, 8 % in its RLE),
//! where these run over whole blocks. The bytes follow the format as the parquet crate writes it
//! (blocks of 256 values in 4 miniblocks, zero padding), so every reader of its files reads these.

/// Values per DELTA_BINARY_PACKED block and per miniblock: the parquet crate's sizes for INT64.
const DELTA_BLOCK: usize = 256;
const DELTA_MINIBLOCK: usize = 64;
const DELTA_MINIBLOCKS: usize = DELTA_BLOCK / DELTA_MINIBLOCK;

/// Most groups of 8 values in one bit-packed run: its header then fits in one byte.
const MAX_BIT_PACKED_GROUPS: usize = 63;

/// ULEB128.
#[inline]
pub fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bits needed for values up to `max` (0 for 0).
#[inline]
pub fn bit_width(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// Appends values of `width` bits, least significant bit first, as Parquet packs them.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    bits: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter {
            out,
            acc: 0,
            bits: 0,
        }
    }

    /// `v` must fit in `width` bits (1..=64).
    #[inline(always)]
    fn put(&mut self, v: u64, width: u32) {
        self.acc |= v << self.bits;
        let total = self.bits + width;
        if total >= 64 {
            self.out.extend_from_slice(&self.acc.to_le_bytes());
            self.bits = total - 64;
            // The bits of `v` the shift above pushed out (none when it ended on the word).
            self.acc = if self.bits == 0 {
                0
            } else {
                v >> (width - self.bits)
            };
        } else {
            self.bits = total;
        }
    }

    /// Writes the bytes still held (callers end on a byte boundary: 8 values of any width).
    fn finish(self) {
        let bytes = self.bits.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
    }
}

/// `values` as DELTA_BINARY_PACKED: the header (block size, miniblocks per block, count, first
/// value), then per block of 256 deltas its smallest delta, the 4 miniblocks' bit widths and the
/// miniblocks, each 64 deltas less the smallest, bit-packed (the last one padded with zeros).
/// Deltas wrap (an address column jumps from 0 to 2^63 and back).
pub fn delta_binary_packed(values: &[i64], out: &mut Vec<u8>) {
    put_uleb(out, DELTA_BLOCK as u64);
    put_uleb(out, DELTA_MINIBLOCKS as u64);
    put_uleb(out, values.len() as u64);
    put_uleb(out, zigzag(values.first().copied().unwrap_or(0)));
    if values.len() < 2 {
        return;
    }
    let mut deltas = [0i64; DELTA_BLOCK];
    // Each block: the deltas of values[start..end] from the value before each.
    let mut start = 1;
    while start < values.len() {
        let end = (start + DELTA_BLOCK).min(values.len());
        let n = end - start;
        let mut min = i64::MAX;
        for (d, pair) in deltas.iter_mut().zip(values[start - 1..end].windows(2)) {
            *d = pair[1].wrapping_sub(pair[0]);
            min = min.min(*d);
        }
        put_uleb(out, zigzag(min));
        let widths_at = out.len();
        out.extend_from_slice(&[0u8; DELTA_MINIBLOCKS]);
        for m in 0..DELTA_MINIBLOCKS {
            let from = m * DELTA_MINIBLOCK;
            if from >= n {
                // Unused miniblocks: width 0, no bytes.
                break;
            }
            let to = (from + DELTA_MINIBLOCK).min(n);
            let mini = &mut deltas[from..from + DELTA_MINIBLOCK];
            // Relative to the smallest delta: non-negative, as u64. The padding is 0.
            let mut any = 0u64;
            for (i, d) in mini.iter_mut().enumerate() {
                let rel = if from + i < to {
                    d.wrapping_sub(min) as u64
                } else {
                    0
                };
                *d = rel as i64;
                any |= rel;
            }
            let width = bit_width(any);
            out[widths_at + m] = width as u8;
            pack(mini.iter().map(|&d| d as u64), width, out);
        }
        start = end;
    }
}

/// Packs `values` (a multiple of 8 of them) at `width` bits each.
#[inline]
fn pack(values: impl Iterator<Item = u64>, width: u32, out: &mut Vec<u8>) {
    if width == 0 {
        return;
    }
    let mut w = BitWriter::new(out);
    for v in values {
        w.put(v, width);
    }
    w.finish();
}

/// `values` (each below 2^`width`) in the RLE / bit-packed hybrid: a run of 8 or more equal values
/// as one RLE run, the rest in bit-packed runs of groups of 8 (the last group padded with zeros;
/// readers know the count from the page).
pub fn rle_hybrid(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let value_bytes = width.div_ceil(8) as usize;
    let n = values.len();
    let mut i = 0;
    while i < n {
        let run = run_length(values, i);
        if run >= 8 {
            put_uleb(out, (run as u64) << 1);
            out.extend_from_slice(&values[i].to_le_bytes()[..value_bytes]);
            i += run;
            continue;
        }
        // Bit-packed groups until a run of 8 starts (after a whole group) or the values end.
        let header_at = out.len();
        out.push(0);
        let mut groups = 0;
        let mut w = BitWriter::new(out);
        while i < n && groups < MAX_BIT_PACKED_GROUPS {
            // Width 0 (a dictionary of one value) packs no bits: only the header says the count.
            if width > 0 {
                for k in i..i + 8 {
                    w.put(u64::from(values.get(k).copied().unwrap_or(0)), width);
                }
            }
            i += 8;
            groups += 1;
            if i < n && run_length(values, i) >= 8 {
                break;
            }
        }
        w.finish();
        out[header_at] = ((groups << 1) | 1) as u8;
    }
}

/// How many values from `at` equal `values[at]`, counted up to 8 only when shorter (the caller
/// needs the whole length of a long run, and only "below 8" of a short one).
#[inline]
fn run_length(values: &[u32], at: usize) -> usize {
    let v = values[at];
    let rest = &values[at..];
    let short = rest.len().min(8);
    if rest[..short].iter().any(|&x| x != v) {
        return rest[..short].iter().take_while(|&&x| x == v).count();
    }
    short + rest[short..].iter().take_while(|&&x| x == v).count()
}

/// Definition levels of a nullable column in a v1 data page: the hybrid at width 1 behind its
/// length (4 bytes, little-endian).
pub fn def_levels_v1(present: &[u32], out: &mut Vec<u8>) {
    let len_at = out.len();
    out.extend_from_slice(&[0u8; 4]);
    rle_hybrid(present, 1, out);
    let len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Dictionary indices in an RLE_DICTIONARY data page: the width in one byte, then the hybrid.
pub fn dictionary_indices(indices: &[u32], entries: usize, out: &mut Vec<u8>) {
    let width = bit_width(entries.saturating_sub(1) as u64);
    out.push(width as u8);
    rle_hybrid(indices, width, out);
}

/// INT64 values in PLAIN: 8 bytes each, little-endian.
pub fn plain_i64(values: &[i64], out: &mut Vec<u8>) {
    out.reserve(values.len() * 8);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// BYTE_ARRAY values in PLAIN: each its length (4 bytes, little-endian) and its bytes.
pub fn plain_bytes<'a>(values: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}
