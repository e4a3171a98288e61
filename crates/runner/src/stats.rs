//! Small statistics over samples and repeats.
use crate::results::SeriesStats;

/// Peak, time-weighted mean (trapezoids between consecutive samples) and last value of a series of
/// (seconds, bytes). With a single point the mean is that point.
pub fn series_stats(points: &[(f64, u64)]) -> SeriesStats {
    let Some(&(_, last)) = points.last() else {
        return SeriesStats::default();
    };
    let peak = points.iter().map(|p| p.1).max().unwrap_or(0);
    let span = points.last().unwrap().0 - points[0].0;
    let mean = if points.len() < 2 || span <= 0.0 {
        points.iter().map(|p| p.1 as f64).sum::<f64>() / points.len() as f64
    } else {
        let area: f64 = points
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 as f64 + w[1].1 as f64) / 2.0)
            .sum();
        area / span
    };
    SeriesStats { peak, mean, last }
}

/// Median of the values (mean of the two middle ones for an even count); None when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_weighted_mean_uses_trapezoids() {
        // 0..1 s at 100, then ramps to 300 over 1 s: area = 100 + 200 = 300 over 2 s.
        let s = series_stats(&[(0.0, 100), (1.0, 100), (2.0, 300)]);
        assert_eq!(s.peak, 300);
        assert_eq!(s.last, 300);
        assert!((s.mean - 150.0).abs() < 1e-9);
    }

    #[test]
    fn irregular_samples_do_not_bias_the_mean() {
        // Many marker samples crowded in the first 0.1 s must not outweigh the long plateau after.
        let mut pts: Vec<(f64, u64)> = (0..10).map(|i| (i as f64 * 0.01, 1000)).collect();
        pts.push((0.1, 0));
        pts.push((10.0, 0));
        let s = series_stats(&pts);
        assert!(s.mean < 20.0, "{}", s.mean);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
