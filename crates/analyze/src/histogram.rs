//! Counting structures used on the hot path: a log-linear histogram (lifetimes) and exact size counts.
//!
//! Both grow with the number of distinct values seen, never with the number of events.

use crate::hash::FastMap;

/// Values below this are counted exactly; above, each power-of-two octave is split into
/// `LINEAR` equal sub-buckets, so a bucket's width is at most 1/128 of its lower edge.
const LINEAR_BITS: u32 = 7;
const LINEAR: u64 = 1 << LINEAR_BITS;

/// Values per bucket: a few buckets are kept sorted by bucket (sparse), more as an array indexed
/// by bucket (dense). A call site's histograms are mostly sparse: a lifetime in ns of a second
/// is bucket 3,000 or so, and arrays up to it took 24 KiB per histogram, some 2 GB for the
/// 16,000 sites of a python3 trace recorded with every stack. A histogram that fills its buckets
/// (a scope's, a busy site's) turns dense, whose hot path is one increment as before.
#[derive(Debug, Clone, Default, PartialEq)]
struct Buckets<T> {
    /// Empty while sparse.
    dense: Vec<T>,
    /// (bucket, value) by bucket; empty once dense.
    sparse: Vec<(u32, T)>,
}

/// A sparse histogram turns dense at this many buckets, or before when its array would take
/// no more than twice the sparse pairs' bytes.
const SPARSE_MAX: usize = 256;

impl<T: Copy + Default + std::ops::AddAssign> Buckets<T> {
    #[inline(always)]
    fn add(&mut self, bucket: usize, x: T) {
        match self.dense.get_mut(bucket) {
            Some(v) => *v += x,
            None => self.add_slow(bucket, x),
        }
    }

    #[cold]
    fn add_slow(&mut self, bucket: usize, x: T) {
        if !self.dense.is_empty() {
            self.dense.resize(bucket + 1, T::default());
            self.dense[bucket] += x;
            return;
        }
        let b = bucket as u32;
        match self.sparse.binary_search_by_key(&b, |&(k, _)| k) {
            Ok(i) => self.sparse[i].1 += x,
            Err(i) => {
                self.sparse.insert(i, (b, x));
                let len = self.sparse.len();
                let highest = self.sparse[len - 1].0 as usize;
                if len >= SPARSE_MAX || highest < 4 * len {
                    self.make_dense();
                }
            }
        }
    }

    fn make_dense(&mut self) {
        let highest = self.sparse.last().map_or(0, |&(b, _)| b as usize);
        let mut dense = vec![T::default(); highest + 1];
        for &(b, v) in &self.sparse {
            dense[b as usize] = v;
        }
        self.dense = dense;
        self.sparse = Vec::new();
    }

    /// Adds `other`'s buckets (its empty ones add no sparse entry).
    fn merge(&mut self, other: &Buckets<T>)
    where
        T: PartialEq,
    {
        other.for_each(|b, v| {
            if v != T::default() {
                self.add(b, v);
            }
        });
    }

    /// The values in bucket order.
    fn values(&self) -> impl Iterator<Item = T> + '_ {
        let dense = self.dense.iter().copied();
        dense.chain(self.sparse.iter().map(|&(_, v)| v))
    }

    /// Calls `f(bucket, value)` in bucket order (dense: every bucket up to the highest).
    fn for_each(&self, mut f: impl FnMut(usize, T)) {
        if self.dense.is_empty() {
            self.sparse.iter().for_each(|&(b, v)| f(b as usize, v));
        } else {
            self.dense.iter().enumerate().for_each(|(b, &v)| f(b, v));
        }
    }

    /// The buckets in order, with their values, while `f` returns true; the last one seen.
    fn find(&self, mut f: impl FnMut(T) -> bool) -> Option<usize> {
        if self.dense.is_empty() {
            self.sparse
                .iter()
                .find(|&&(_, v)| f(v))
                .map(|&(b, _)| b as usize)
        } else {
            self.dense.iter().position(|&v| f(v))
        }
    }
}

/// Counts per log-linear bucket (HDR-style, 7 bits of precision; exact below 128). The hot path
/// is one increment: the total is the sum of the counts, computed when asked.
#[derive(Debug, Clone, Default)]
pub struct LogCounts {
    counts: Buckets<u64>,
}

impl LogCounts {
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
        self.counts.add(Self::bucket_of(value), 1);
    }

    pub fn merge(&mut self, other: &LogCounts) {
        self.counts.merge(&other.counts);
    }

    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Number of recorded values strictly below `x`. Exact when `x` is a bucket's lower edge
    /// (every value below 128, and 2^k and 3*2^k for any k).
    pub fn count_below(&self, x: u64) -> u64 {
        let limit = Self::bucket_of(x);
        let mut below = 0;
        self.counts.for_each(|b, c| {
            if b < limit {
                below += c;
            }
        });
        below
    }

    /// Nearest-rank quantile: the smallest recorded bucket such that at least `q` of the values
    /// are in it or below, reported as that bucket's lower edge. None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        // Always found: the counts add up to the total.
        let b = self.counts.find(|c| {
            seen += c;
            seen >= rank
        });
        b.map(Self::bucket_low)
    }
}

/// Weights per log-linear bucket (the buckets of `LogCounts`): the distribution of a sampled site,
/// each sampled value counting for the allocations it stands for (1/p, docs/metrics.md, "Sampled
/// stacks"). Only sampled traces use it: with every stack taken, sites keep the exact integer
/// counts of `LogHistogram`, untouched by floating-point sums.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WeightedCounts {
    weights: Buckets<f64>,
}

impl WeightedCounts {
    pub fn add(&mut self, value: u64, weight: f64) {
        self.weights.add(LogCounts::bucket_of(value), weight);
    }

    pub fn merge(&mut self, other: &WeightedCounts) {
        self.weights.merge(&other.weights);
    }

    /// Summed in bucket order (the empty buckets of a dense array add nothing).
    pub fn total(&self) -> f64 {
        self.weights.values().sum()
    }

    /// The weighted nearest-rank quantile: the lower edge of the first bucket at which the weight
    /// of the values in it or below reaches `q` of the total (with weights of 1, what
    /// `LogCounts::quantile` gives). None when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total <= 0.0 {
            return None;
        }
        // A hair below q * total: a cumulative weight meant to equal it exactly (a median that
        // falls on a bucket's end) must not lose it to rounding.
        let rank = q * total * (1.0 - 1e-12);
        let mut seen = 0.0;
        let found = self.weights.find(|w| {
            seen += w;
            seen > 0.0 && seen >= rank
        });
        let mut last = None;
        self.weights.for_each(|b, w| {
            if w > 0.0 {
                last = Some(b);
            }
        });
        found.or(last).map(LogCounts::bucket_low)
    }
}

/// Log-linear histogram with the exact sum and maximum (lifetimes in calls, whose mean and
/// maximum are reported exactly). Lifetimes in ns only need `LogCounts`.
#[derive(Debug, Clone, Default)]
pub struct LogHistogram {
    counts: LogCounts,
    sum: u128,
    max: u64,
}

impl LogHistogram {
    pub fn bucket_of(value: u64) -> usize {
        LogCounts::bucket_of(value)
    }

    pub fn bucket_low(bucket: usize) -> u64 {
        LogCounts::bucket_low(bucket)
    }

    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        self.counts.record(value);
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    pub fn merge(&mut self, other: &LogHistogram) {
        self.counts.merge(&other.counts);
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    pub fn total(&self) -> u64 {
        self.counts.total()
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        let total = self.total();
        if total == 0 {
            0.0
        } else {
            self.sum as f64 / total as f64
        }
    }

    pub fn count_below(&self, x: u64) -> u64 {
        self.counts.count_below(x)
    }

    pub fn quantile(&self, q: f64) -> Option<u64> {
        self.counts.quantile(q)
    }
}

/// Sizes below this are counted in pages of `PAGE` consecutive sizes (an index, no hashing);
/// above, in a map (rare: a few distinct sizes of a MiB or more).
const PAGED_LIMIT: u64 = 1 << 20;
const PAGE_BITS: u32 = 7;
const PAGE: usize = 1 << PAGE_BITS;
/// Sizes from which `SizeCounts::prefetch` does something.
const PREFETCH_FROM: u64 = 1024;

/// Exact count of each requested size.
///
/// Paged counts are u32, which halves the cache footprint of the hot path (a page of 128 sizes
/// is 512 bytes); the multiples of 2^32 a count carries into go to the map, so counts stay exact.
#[derive(Debug, Clone, Default)]
pub struct SizeCounts {
    /// For each run of `PAGE` sizes below `PAGED_LIMIT`: 1 + its page number, 0 if none yet.
    /// Grown to what is used: a scope that only sees small sizes stays small.
    directory: Vec<u32>,
    /// The pages, one after the other (`PAGE` counts each).
    pages: Vec<u32>,
    /// Counts of sizes >= `PAGED_LIMIT`, and the carries (multiples of 2^32) of paged counts.
    sparse: FastMap<u64, u64>,
}

impl SizeCounts {
    #[inline(always)]
    pub fn record(&mut self, size: u64) {
        if size < PAGED_LIMIT {
            let slot = self.slot(size);
            let (count, carry) = self.pages[slot].overflowing_add(1);
            self.pages[slot] = count;
            if carry {
                self.carry(size, 1 << 32);
            }
        } else {
            self.carry(size, 1);
        }
    }

    /// Hint that `size` will be counted soon. With sizes spread over tens of KiB (0.25 MiB of
    /// counts per scope), the counter is often out of the caches; the pass hides that miss as it
    /// does the live-set one. The counters of small sizes (most requests: 4 KiB for all sizes
    /// below `PREFETCH_FROM`) stay in the caches, so they are not worth the lookup.
    #[inline(always)]
    pub fn prefetch(&self, size: u64) {
        if !Self::worth_prefetching(size) {
            return;
        }
        let d = (size >> PAGE_BITS) as usize;
        if let Some(&p) = self.directory.get(d) {
            let slot = (p as usize).wrapping_sub(1) << PAGE_BITS | (size as usize & (PAGE - 1));
            if let Some(c) = self.pages.get(slot) {
                blockmap::live_table::prefetch_ptr(c);
            }
        }
    }

    /// Whether `prefetch(size)` does anything (callers test it before finding the counts).
    #[inline(always)]
    pub fn worth_prefetching(size: u64) -> bool {
        size >= PREFETCH_FROM
    }

    /// Index in `pages` of a size below `PAGED_LIMIT`.
    #[inline(always)]
    fn slot(&mut self, size: u64) -> usize {
        let d = (size >> PAGE_BITS) as usize;
        let page = match self.directory.get(d) {
            Some(&p) if p != 0 => p as usize - 1,
            _ => self.new_page(d),
        };
        (page << PAGE_BITS) | (size as usize & (PAGE - 1))
    }

    #[cold]
    fn carry(&mut self, size: u64, count: u64) {
        *self.sparse.entry(size).or_insert(0) += count;
    }

    /// Add another scope's counts, page by page (a report merges every cell into several
    /// scopes: this is the bulk of building it).
    pub fn merge(&mut self, other: &SizeCounts) {
        for (d, &p) in other.directory.iter().enumerate() {
            if p == 0 {
                continue;
            }
            let from = (p as usize - 1) << PAGE_BITS;
            let to = self.slot((d as u64) << PAGE_BITS);
            let mut carried = false;
            for (a, b) in self.pages[to..to + PAGE]
                .iter_mut()
                .zip(&other.pages[from..from + PAGE])
            {
                let (sum, carry) = a.overflowing_add(*b);
                *a = sum;
                carried |= carry;
            }
            if carried {
                self.carry_page(to, from, other, (d as u64) << PAGE_BITS);
            }
        }
        for (size, count) in &other.sparse {
            self.carry(*size, *count);
        }
    }

    /// After a page merge that wrapped: find the counts that did (the sum is now below the
    /// added count) and move 2^32 each to the map.
    #[cold]
    fn carry_page(&mut self, to: usize, from: usize, other: &SizeCounts, base: u64) {
        for i in 0..PAGE {
            if self.pages[to + i] < other.pages[from + i] {
                self.carry(base + i as u64, 1 << 32);
            }
        }
    }

    #[cfg(test)]
    fn add(&mut self, size: u64, count: u64) {
        if size < PAGED_LIMIT {
            let slot = self.slot(size);
            let (low, carry) = self.pages[slot].overflowing_add(count as u32);
            self.pages[slot] = low;
            let high = (count >> 32) + u64::from(carry);
            if high != 0 {
                self.carry(size, high << 32);
            }
        } else {
            self.carry(size, count);
        }
    }

    #[cold]
    fn new_page(&mut self, d: usize) -> usize {
        if d >= self.directory.len() {
            self.directory.resize(d + 1, 0);
        }
        let page = self.pages.len() / PAGE;
        self.pages.resize(self.pages.len() + PAGE, 0);
        self.directory[d] = page as u32 + 1;
        page
    }

    pub fn total(&self) -> u64 {
        self.pages.iter().map(|c| u64::from(*c)).sum::<u64>() + self.sparse.values().sum::<u64>()
    }

    /// (size, count) for every size seen, in increasing size order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut sparse: Vec<(u64, u64)> = self.sparse.iter().map(|(s, c)| (*s, *c)).collect();
        sparse.sort_unstable();
        let paged = self
            .directory
            .iter()
            .enumerate()
            .filter(|(_, p)| **p != 0)
            .flat_map(move |(d, p)| {
                let base = (d as u64) << PAGE_BITS;
                let start = (*p as usize - 1) << PAGE_BITS;
                self.pages[start..start + PAGE]
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(move |(i, c)| (base + i as u64, u64::from(*c)))
            });
        MergeSorted {
            a: paged.peekable(),
            b: sparse.into_iter().peekable(),
        }
    }

    /// Number of recorded sizes strictly below `limit`.
    pub fn count_below(&self, limit: u64) -> u64 {
        self.iter()
            .take_while(|(s, _)| *s < limit)
            .map(|(_, c)| c)
            .sum()
    }
}

/// Two (size, count) streams in increasing size order, merged; equal sizes add up (a paged
/// count and its carry).
struct MergeSorted<A: Iterator<Item = (u64, u64)>, B: Iterator<Item = (u64, u64)>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A, B> Iterator for MergeSorted<A, B>
where
    A: Iterator<Item = (u64, u64)>,
    B: Iterator<Item = (u64, u64)>,
{
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        match (self.a.peek().copied(), self.b.peek().copied()) {
            (Some((sa, ca)), Some((sb, cb))) if sa == sb => {
                self.a.next();
                self.b.next();
                Some((sa, ca + cb))
            }
            (Some((sa, _)), Some((sb, _))) if sb < sa => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Histograms sparse, turning dense, and merged either way answer as a plain array of
    /// counts per bucket does; one with few buckets stays small.
    #[test]
    fn sparse_and_dense_buckets_answer_alike() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for values in [3usize, 40, 300, 5000] {
            let (mut h, mut w, mut reference) = (
                LogCounts::default(),
                WeightedCounts::default(),
                vec![0u64; 8000],
            );
            for _ in 0..values {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Spread over many octaves, as lifetimes in ns are.
                let v = (rng >> 20) >> (rng % 44);
                h.record(v);
                w.add(v, 1.0);
                reference[LogCounts::bucket_of(v)] += 1;
            }
            let mut merged = LogCounts::default();
            merged.merge(&h);
            merged.merge(&h);
            let total: u64 = reference.iter().sum();
            assert_eq!((h.total(), merged.total()), (total, 2 * total));
            assert_eq!(w.total(), total as f64);
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
                let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
                let mut seen = 0;
                let b = reference.iter().position(|c| {
                    seen += c;
                    seen >= rank
                });
                let expected = b.map(LogCounts::bucket_low);
                assert_eq!((h.quantile(q), merged.quantile(q)), (expected, expected));
                assert_eq!(w.quantile(q), expected, "q {q}, {values} values");
            }
            for x in [0, 1, 127, 128, 1 << 20, 3 << 30, u64::MAX] {
                let below: u64 = reference.iter().take(LogCounts::bucket_of(x)).sum();
                assert_eq!(h.count_below(x), below);
            }
            if values == 3 {
                assert!(h.counts.dense.is_empty() && h.counts.sparse.len() <= 3);
            }
        }
    }

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
    fn weighted_quantiles_count_each_value_by_its_weight() {
        let mut h = LogHistogram::default();
        let mut w = WeightedCounts::default();
        for v in 1..=10 {
            h.record(v);
            w.add(v, 1.0);
        }
        for q in [0.0, 0.1, 0.5, 0.55, 0.9, 0.999, 1.0] {
            assert_eq!(w.quantile(q), h.quantile(q), "q = {q}");
        }
        // Three values of 1000 standing for one each and one value 0 standing for 9 allocations:
        // the median is 0, which three unweighted samples of 1000 out of four would miss.
        let mut w = WeightedCounts::default();
        for _ in 0..3 {
            w.add(1000, 1.0);
        }
        w.add(0, 9.0);
        assert_eq!(w.quantile(0.5), Some(0));
        assert_eq!(w.quantile(0.75), Some(0));
        assert_eq!(
            w.quantile(0.8),
            Some(LogCounts::bucket_low(LogCounts::bucket_of(1000)))
        );
        let mut m = WeightedCounts::default();
        m.merge(&w);
        m.merge(&w);
        assert_eq!((m.total(), m.quantile(0.5)), (24.0, Some(0)));
        assert_eq!(WeightedCounts::default().quantile(0.5), None);
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

    #[test]
    fn size_counts_stay_exact_beyond_u32() {
        let mut s = SizeCounts::default();
        s.add(100, (1 << 32) - 1);
        s.record(100); // carries into the map
        s.record(100);
        s.add(7, 5 << 32 | 3);
        s.record(1 << 30);
        let mut m = SizeCounts::default();
        m.merge(&s);
        m.merge(&s);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![(7, 5 << 32 | 3), (100, (1 << 32) + 1), (1 << 30, 1)]
        );
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![(7, 10 << 32 | 6), (100, (1 << 33) + 2), (1 << 30, 2)]
        );
        assert_eq!(s.total(), (5 << 32 | 3) + (1 << 32) + 1 + 1);
        assert_eq!(m.count_below(101), 2 * ((5 << 32 | 3) + (1 << 32) + 1));
        // Page-wise merges that wrap the u32 counters carry too.
        let mut near = SizeCounts::default();
        near.add(9, u64::from(u32::MAX));
        near.record(10);
        let mut sum = SizeCounts::default();
        for _ in 0..3 {
            sum.merge(&near);
        }
        assert_eq!(
            sum.iter().collect::<Vec<_>>(),
            vec![(9, 3 * u64::from(u32::MAX)), (10, 3)]
        );
    }
}
