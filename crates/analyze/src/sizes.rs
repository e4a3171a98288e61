//! Size distributions derived from exact size counts: fixed-width buckets, powers of two, and the
//! over-represented sizes rule.

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use crate::analysis::{Bucket, OverRepresented, SizeReport};
use crate::histogram::SizeCounts;

/// When a 16-byte bucket counts as over-represented (docs/metrics.md, "Over-represented sizes"):
/// `count >= factor * max(1, upper median of the 2*window neighbouring buckets)` (empty neighbours count 0),
/// `count >= min_count` and `count >= min_share * all sizes`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OverRepresentedRule {
    pub window: u64,
    pub factor: f64,
    pub min_count: u64,
    pub min_share: f64,
    /// At most this many are reported (the largest counts).
    pub max_reported: usize,
}

impl Default for OverRepresentedRule {
    fn default() -> Self {
        OverRepresentedRule {
            window: 8,
            factor: 4.0,
            min_count: 10,
            min_share: 0.001,
            max_reported: 50,
        }
    }
}

/// Counts per fixed-width bucket, non-empty buckets only, in increasing order. `sizes` are
/// (size, count) pairs in increasing size order (`SizeCounts::iter`).
pub fn fixed_buckets(sizes: &[(u64, u64)], width: u64) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::new();
    for &(size, count) in sizes {
        let low = size / width * width;
        match out.last_mut() {
            Some(b) if b.low == low => b.count += count,
            _ => out.push(Bucket {
                low,
                high: low.saturating_add(width - 1),
                count,
            }),
        }
    }
    out
}

/// Counts per power-of-two bucket: size 0 alone, then [2^k, 2^(k+1) - 1].
pub fn pow2_buckets(sizes: &[(u64, u64)]) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = Vec::new();
    for &(size, count) in sizes {
        let (low, high) = if size == 0 {
            (0, 0)
        } else {
            let low = 1u64 << (63 - size.leading_zeros());
            (low, low.checked_mul(2).map_or(u64::MAX, |h| h - 1))
        };
        match out.last_mut() {
            Some(b) if b.low == low => b.count += count,
            _ => out.push(Bucket { low, high, count }),
        }
    }
    out
}

/// Over-represented 16-byte buckets of `sizes` ((size, count) in increasing size order).
pub fn over_represented(sizes: &[(u64, u64)], rule: &OverRepresentedRule) -> Vec<OverRepresented> {
    let buckets = fixed_buckets(sizes, 16);
    let by_low: HashMap<u64, u64> = buckets.iter().map(|b| (b.low, b.count)).collect();
    let total: u64 = sizes.iter().map(|(_, c)| c).sum();
    let mut top: HashMap<u64, (u64, u64)> = HashMap::new();
    for &(size, count) in sizes {
        let e = top.entry(size / 16 * 16).or_insert((size, 0));
        if count > e.1 {
            *e = (size, count);
        }
    }
    let mut found = Vec::new();
    let mut neighbours = Vec::with_capacity(2 * rule.window as usize);
    for b in &buckets {
        if b.count < rule.min_count || (b.count as f64) < rule.min_share * total as f64 {
            continue;
        }
        neighbours.clear();
        let idx = b.low / 16;
        for d in 1..=rule.window {
            if let Some(lo) = idx.checked_sub(d) {
                neighbours.push(by_low.get(&(lo * 16)).copied().unwrap_or(0));
            }
            if let Some(hi) = idx.checked_add(d).and_then(|i| i.checked_mul(16)) {
                neighbours.push(by_low.get(&hi).copied().unwrap_or(0));
            }
        }
        let median = median(&mut neighbours);
        if b.count as f64 >= rule.factor * median.max(1) as f64 {
            let (top_size, top_size_count) = top[&b.low];
            found.push(OverRepresented {
                low: b.low,
                count: b.count,
                neighbour_median: median,
                top_size,
                top_size_count,
            });
        }
    }
    found.sort_by(|a, b| b.count.cmp(&a.count).then(a.low.cmp(&b.low)));
    found.truncate(rule.max_reported);
    found
}

/// Upper median (the larger middle value for an even count, so that the edge of a plateau, half
/// empty, is not taken for a spike); 0 when empty.
fn median(values: &mut [u64]) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[values.len() / 2]
}

pub fn size_report(counts: &SizeCounts, rule: &OverRepresentedRule) -> SizeReport {
    // Walked once: the buckets and the rule below all read this list.
    let sizes: Vec<(u64, u64)> = counts.iter().collect();
    let sizes = sizes.as_slice();
    let count: u64 = sizes.iter().map(|(_, c)| c).sum();
    let below: u64 = sizes
        .iter()
        .take_while(|(s, _)| *s < 512)
        .map(|(_, c)| c)
        .sum();
    SizeReport {
        count,
        share_below_512: if count == 0 {
            0.0
        } else {
            below as f64 / count as f64
        },
        buckets_16: fixed_buckets(sizes, 16),
        buckets_32k: fixed_buckets(sizes, 32 * 1024),
        buckets_pow2: pow2_buckets(sizes),
        over_represented: over_represented(sizes, rule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(sizes: &[(u64, u64)]) -> SizeCounts {
        let mut s = SizeCounts::default();
        for (size, n) in sizes {
            for _ in 0..*n {
                s.record(*size);
            }
        }
        s
    }

    fn entries(sizes: &SizeCounts) -> Vec<(u64, u64)> {
        sizes.iter().collect()
    }

    #[test]
    fn bucket_edges() {
        let s = counts(&[
            (0, 1),
            (15, 1),
            (16, 1),
            (511, 1),
            (512, 1),
            (32767, 1),
            (32768, 1),
        ]);
        let b16 = fixed_buckets(&entries(&s), 16);
        let lows: Vec<(u64, u64, u64)> = b16.iter().map(|b| (b.low, b.high, b.count)).collect();
        assert_eq!(
            lows,
            vec![
                (0, 15, 2),
                (16, 31, 1),
                (496, 511, 1),
                (512, 527, 1),
                (32752, 32767, 1),
                (32768, 32783, 1)
            ]
        );
        let b32 = fixed_buckets(&entries(&s), 32768);
        let lows: Vec<(u64, u64, u64)> = b32.iter().map(|b| (b.low, b.high, b.count)).collect();
        assert_eq!(lows, vec![(0, 32767, 6), (32768, 65535, 1)]);
        let p2 = pow2_buckets(&entries(&s));
        let lows: Vec<(u64, u64, u64)> = p2.iter().map(|b| (b.low, b.high, b.count)).collect();
        assert_eq!(
            lows,
            vec![
                (0, 0, 1),
                (8, 15, 1),
                (16, 31, 1),
                (256, 511, 1),
                (512, 1023, 1),
                (16384, 32767, 1),
                (32768, 65535, 1)
            ]
        );
        let r = size_report(&s, &OverRepresentedRule::default());
        // 0, 15, 16, 511 are below 512; 512, 32767, 32768 are not.
        assert!((r.share_below_512 - 4.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn pow2_top_bucket_does_not_overflow() {
        let s = counts(&[(u64::MAX, 1), (1 << 63, 1)]);
        let p2 = pow2_buckets(&entries(&s));
        assert_eq!(
            p2,
            vec![Bucket {
                low: 1 << 63,
                high: u64::MAX,
                count: 2
            }]
        );
    }

    #[test]
    fn a_spike_among_flat_neighbours_is_over_represented() {
        // Flat background of 10 per 16-byte bucket from 512 to 2048, a spike at size 768.
        let mut pairs: Vec<(u64, u64)> = (32..128).map(|i| (i * 16 + 8, 10)).collect();
        pairs.push((768, 200));
        let s = counts(&pairs);
        let found = over_represented(&entries(&s), &OverRepresentedRule::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].low, 768);
        assert_eq!(found[0].count, 210);
        assert_eq!(found[0].neighbour_median, 10);
        assert_eq!(found[0].top_size, 768);
        assert_eq!(found[0].top_size_count, 200);
        // Just below the factor: 39 < 4 * 10 is not flagged.
        let mut pairs: Vec<(u64, u64)> = (32..128).map(|i| (i * 16 + 8, 10)).collect();
        pairs.push((768, 29));
        assert!(
            over_represented(&entries(&counts(&pairs)), &OverRepresentedRule::default()).is_empty()
        );
    }
}
