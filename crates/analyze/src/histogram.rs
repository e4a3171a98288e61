//! Counting structures used on the hot path: a log-linear histogram (lifetimes) and exact size counts.
//!
//! Both grow with the number of distinct values seen, never with the number of events.

use crate::hash::FastMap;

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
    /// Branch-free (lifetimes straddle 128 unpredictably): with `shift` the octave above
    /// [128, 256), the bucket is `shift * 128 + (value >> shift)`, which is `value` below 256.
    #[inline(always)]
    pub fn bucket_of(value: u64) -> usize {
        let exp = 63 - (value | LINEAR).leading_zeros(); // >= LINEAR_BITS
        let shift = exp - LINEAR_BITS;
        (u64::from(shift) * LINEAR + (value >> shift)) as usize
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

    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        let b = Self::bucket_of(value);
        match self.counts.get_mut(b) {
            Some(c) => *c += 1,
            None => self.grow(b),
        }
        self.total += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    /// First value in a new highest bucket.
    #[cold]
    fn grow(&mut self, bucket: usize) {
        self.counts.resize(bucket + 1, 0);
        self.counts[bucket] = 1;
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

/// Sizes below this are counted in pages of `PAGE` consecutive sizes (an index, no hashing);
/// above, in a map (rare: a few distinct sizes of a MiB or more).
const PAGED_LIMIT: u64 = 1 << 20;
const PAGE_BITS: u32 = 7;
const PAGE: usize = 1 << PAGE_BITS;

/// Exact count of each requested size.
#[derive(Debug, Clone, Default)]
pub struct SizeCounts {
    /// For each run of `PAGE` sizes below `PAGED_LIMIT`: 1 + its index in `pages`, 0 if none yet.
    /// Grown to what is used: a scope that only sees small sizes stays small.
    directory: Vec<u32>,
    pages: Vec<[u64; PAGE]>,
    sparse: FastMap<u64, u64>,
    total: u64,
}

impl SizeCounts {
    #[inline(always)]
    pub fn record(&mut self, size: u64) {
        self.add(size, 1);
    }

    pub fn merge(&mut self, other: &SizeCounts) {
        for (size, count) in other.iter() {
            self.add(size, count);
        }
    }

    #[inline(always)]
    fn add(&mut self, size: u64, count: u64) {
        self.total += count;
        if size < PAGED_LIMIT {
            let d = (size >> PAGE_BITS) as usize;
            let page = match self.directory.get(d) {
                Some(&p) if p != 0 => p as usize - 1,
                _ => self.new_page(d),
            };
            self.pages[page][size as usize & (PAGE - 1)] += count;
        } else {
            *self.sparse.entry(size).or_insert(0) += count;
        }
    }

    #[cold]
    fn new_page(&mut self, d: usize) -> usize {
        if d >= self.directory.len() {
            self.directory.resize(d + 1, 0);
        }
        self.pages.push([0; PAGE]);
        self.directory[d] = self.pages.len() as u32;
        self.pages.len() - 1
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// (size, count) for every size seen, in increasing size order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut sparse: Vec<(u64, u64)> = self.sparse.iter().map(|(s, c)| (*s, *c)).collect();
        sparse.sort_unstable();
        self.directory
            .iter()
            .enumerate()
            .filter(|(_, p)| **p != 0)
            .flat_map(move |(d, p)| {
                let base = (d as u64) << PAGE_BITS;
                self.pages[*p as usize - 1]
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(move |(i, c)| (base + i as u64, *c))
            })
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
    fn size_counts_iterate_in_order_across_pages_and_sparse() {
        let mut s = SizeCounts::default();
        for v in [
            5000,
            3,
            3,
            1023,
            1024,
            5000,
            1 << 20,
            (1 << 20) - 1,
            127,
            128,
        ] {
            s.record(v);
        }
        let all: Vec<_> = s.iter().collect();
        assert_eq!(
            all,
            vec![
                (3, 2),
                (127, 1),
                (128, 1),
                (1023, 1),
                (1024, 1),
                (5000, 2),
                ((1 << 20) - 1, 1),
                (1 << 20, 1)
            ]
        );
        assert_eq!(s.count_below(1024), 5);
        let mut m = SizeCounts::default();
        m.merge(&s);
        m.merge(&s);
        assert_eq!(m.iter().collect::<Vec<_>>()[0], (3, 4));
        assert_eq!(m.total(), 20);
    }
}
