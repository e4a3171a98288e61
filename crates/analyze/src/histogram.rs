//! Counting structures used on the hot path: a log-linear histogram (lifetimes) and exact size counts.
//!
//! Both grow with the number of distinct values seen, never with the number of events.

use hashbrown::HashMap;

/// Values below this are counted exactly; above, each power-of-two octave is split into
/// `LINEAR` equal sub-buckets, so a bucket's width is at most 1/128 of its lower edge.
const LINEAR_BITS: u32 = 7;
const LINEAR: u64 = 1 << LINEAR_BITS;

/// Log-linear histogram of u64 values (HDR-style, 7 bits of precision). Exact below 128.
#[derive(Debug, Clone, Default)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
}

impl LogHistogram {
    pub fn bucket_of(value: u64) -> usize {
        if value < LINEAR {
            value as usize
        } else {
            let exp = 63 - value.leading_zeros(); // >= LINEAR_BITS
            let shift = exp - LINEAR_BITS;
            let mantissa = (value >> shift) - LINEAR; // 0..LINEAR
            (LINEAR + u64::from(shift) * LINEAR + mantissa) as usize
        }
    }

    /// Lowest value that falls in `bucket`.
    pub fn bucket_low(bucket: usize) -> u64 {
        let b = bucket as u64;
        if b < LINEAR {
            b
        } else {
            let shift = (b - LINEAR) / LINEAR;
            let mantissa = (b - LINEAR) % LINEAR;
            (LINEAR + mantissa) << shift
        }
    }

    #[inline]
    pub fn record(&mut self, value: u64) {
        let b = Self::bucket_of(value);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        self.total += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    pub fn merge(&mut self, other: &LogHistogram) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// Number of recorded values strictly below `x`. Exact when `x` is a bucket's lower edge
    /// (every value below 128, and 2^k and 3*2^k for any k).
    pub fn count_below(&self, x: u64) -> u64 {
        let b = Self::bucket_of(x);
        self.counts.iter().take(b).sum()
    }

    /// Nearest-rank quantile: the smallest recorded bucket such that at least `q` of the values
    /// are in it or below, reported as that bucket's lower edge. None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Self::bucket_low(b));
            }
        }
        Some(self.max)
    }
}

/// Sizes below this are counted in a dense array (the common case, and the hot path).
const DENSE_SIZES: usize = 1024;

/// Exact count of each requested size.
#[derive(Debug, Clone, Default)]
pub struct SizeCounts {
    dense: Vec<u64>,
    sparse: HashMap<u64, u64>,
    total: u64,
}

impl SizeCounts {
    #[inline]
    pub fn record(&mut self, size: u64) {
        self.add(size, 1);
    }

    pub fn merge(&mut self, other: &SizeCounts) {
        for (size, count) in other.iter() {
            self.add(size, count);
        }
    }

    #[inline]
    fn add(&mut self, size: u64, count: u64) {
        self.total += count;
        if size < DENSE_SIZES as u64 {
            let i = size as usize;
            if i >= self.dense.len() {
                // Grow to what is used: a scope that only sees small sizes stays small.
                self.dense
                    .resize((i + 1).next_power_of_two().min(DENSE_SIZES), 0);
            }
            self.dense[i] += count;
        } else {
            *self.sparse.entry(size).or_insert(0) += count;
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// (size, count) for every size seen, in increasing size order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut sparse: Vec<(u64, u64)> = self.sparse.iter().map(|(s, c)| (*s, *c)).collect();
        sparse.sort_unstable();
        self.dense
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(s, c)| (s as u64, *c))
            .chain(sparse)
    }

    /// Number of recorded sizes strictly below `limit`.
    pub fn count_below(&self, limit: u64) -> u64 {
        self.iter()
            .take_while(|(s, _)| *s < limit)
            .map(|(_, c)| c)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_128_and_edges_round_trip() {
        for v in 0..300u64 {
            let b = LogHistogram::bucket_of(v);
            assert!(LogHistogram::bucket_low(b) <= v);
            assert!(LogHistogram::bucket_low(b + 1) > v);
            if v < 128 {
                assert_eq!(LogHistogram::bucket_low(b), v);
            }
        }
        for k in 7..62 {
            for v in [1u64 << k, 3u64 << (k - 1)] {
                assert_eq!(LogHistogram::bucket_low(LogHistogram::bucket_of(v)), v);
            }
        }
        let b = LogHistogram::bucket_of(u64::MAX);
        assert_eq!(LogHistogram::bucket_low(b), 0xFF << 56);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut h = LogHistogram::default();
        for v in 1..=10 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), Some(5));
        assert_eq!(h.quantile(0.1), Some(1));
        assert_eq!(h.quantile(0.999), Some(10));
        assert_eq!(h.count_below(4), 3);
        assert_eq!(LogHistogram::default().quantile(0.5), None);
    }

    #[test]
    fn size_counts_iterate_in_order_across_dense_and_sparse() {
        let mut s = SizeCounts::default();
        for v in [5000, 3, 3, 1023, 1024, 5000] {
            s.record(v);
        }
        let all: Vec<_> = s.iter().collect();
        assert_eq!(all, vec![(3, 2), (1023, 1), (1024, 1), (5000, 2)]);
        assert_eq!(s.count_below(1024), 3);
        let mut m = SizeCounts::default();
        m.merge(&s);
        m.merge(&s);
        assert_eq!(m.iter().collect::<Vec<_>>()[0], (3, 4));
        assert_eq!(m.total(), 12);
    }
}
