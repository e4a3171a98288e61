//! A cheap hash for the hot-path maps of the recorder and the analysis, keyed by addresses and
//! sizes (u64) chosen by the traced program, not by an adversary: one widening multiply, folded so
//! that both the low bits (bucket index) and the high bits (the hash table's tag) depend on every
//! input bit.

use std::hash::Hasher;

/// Odd constant with well-spread bits (2^64 / golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// The hash of one u64.
#[inline(always)]
pub fn fold(x: u64) -> u64 {
    let p = u128::from(x) * u128::from(K);
    (p >> 64) as u64 ^ p as u64
}

#[derive(Debug, Clone, Copy, Default)]
pub struct FoldHasher(u64);

impl Hasher for FoldHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = fold(self.0 ^ x);
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn aligned_addresses_spread_over_low_and_high_bits() {
        let b = BuildHasherDefault::<FoldHasher>::default();
        let n = 4096u64;
        let mut low = std::collections::HashSet::new();
        let mut high = std::collections::HashSet::new();
        for i in 0..n {
            let h = b.hash_one(0x7f00_0000_0000u64 + i * 16);
            low.insert(h & 0xFFF);
            high.insert(h >> 57);
        }
        // 4096 consecutive 16-byte-aligned addresses fill most of 4096 buckets and every tag.
        assert!(low.len() > 2000, "{} distinct bucket indices", low.len());
        assert_eq!(high.len(), 128);
    }
}
