//! Small statistics over samples and repeats: time-weighted series, median, mean and standard
//! deviation, hyperfine's outlier rule and its propagation of uncertainty into a ratio.
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

fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|x| x.is_finite()).collect()
}

/// Median of the values (mean of the two middle ones for an even count); None when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = finite(values);
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

/// Arithmetic mean; None when empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    let v = finite(values);
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Sample standard deviation (divisor n − 1, as hyperfine); None for fewer than two values.
pub fn std_dev(values: &[f64]) -> Option<f64> {
    let v = finite(values);
    if v.len() < 2 {
        return None;
    }
    let m = mean(&v)?;
    let squares: f64 = v.iter().map(|x| (x - m).powi(2)).sum();
    Some((squares / (v.len() - 1) as f64).sqrt())
}

/// hyperfine's threshold on [`modified_z_scores`]: 1.4826 turns the MAD into an estimate of the
/// standard deviation, so a value is an outlier when it is about 10 standard deviations away.
pub const OUTLIER_THRESHOLD: f64 = 1.4826 * 10.0;

/// Modified Z-scores, hyperfine's way: (x − median) / MAD, the MAD (median absolute deviation)
/// floored at f64::EPSILON so equal values do not divide by zero.
pub fn modified_z_scores(values: &[f64]) -> Vec<f64> {
    let Some(m) = median(values) else {
        return Vec::new();
    };
    let deviations: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0).max(f64::EPSILON);
    values.iter().map(|x| (x - m) / mad).collect()
}

/// Indices of the values whose modified Z-score exceeds [`OUTLIER_THRESHOLD`] (needs three values:
/// with two, each is as far from the median as the other).
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    modified_z_scores(values)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > OUTLIER_THRESHOLD)
        .map(|(i, _)| i)
        .collect()
}

/// The standard deviation of `ratio` = a / b, from the two samples' means and standard deviations,
/// assuming them independent (first-order propagation of uncertainty, as hyperfine's relative speed):
/// σ = ratio × √((σa/a)² + (σb/b)²). None when either has no standard deviation.
pub fn ratio_std_dev(ratio: f64, a: (f64, Option<f64>), b: (f64, Option<f64>)) -> Option<f64> {
    let (ma, sa) = (a.0, a.1?);
    let (mb, sb) = (b.0, b.1?);
    if ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    Some(ratio.abs() * ((sa / ma).powi(2) + (sb / mb).powi(2)).sqrt())
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

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn mean_and_sample_standard_deviation_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squares 9+1+1+1+0+0+4+16 = 32, 32/7.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), Some(5.0));
        assert!(close(std_dev(&v).unwrap(), (32.0f64 / 7.0).sqrt()));
        // 1.0, 1.2, 1.4: mean 1.2, squares 0.04+0+0.04 over 2 = 0.04, σ = 0.2.
        assert!(close(std_dev(&[1.0, 1.2, 1.4]).unwrap(), 0.2));
        assert_eq!(std_dev(&[3.0]), None);
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn modified_z_scores_and_outliers_by_hand() {
        // median 1.0; deviations 0.02, 0.0, 0.01, 0.01, 1.0 → MAD 0.01.
        let v = [0.98, 1.0, 1.01, 0.99, 2.0];
        let z = modified_z_scores(&v);
        assert!(
            close(z[0], -2.0) && close(z[1], 0.0) && close(z[4], 100.0),
            "{z:?}"
        );
        assert_eq!(outliers(&v), vec![4]);
        // 14.8 MADs away is not an outlier, 14.9 is (threshold 14.826).
        // (median 1.0, MAD 0.01)
        assert!(outliers(&[0.99, 1.0, 1.01, 1.0, 1.148]).is_empty());
        assert_eq!(outliers(&[0.99, 1.0, 1.01, 1.0, 1.149]), vec![4]);
        // Equal values: no division by zero, and no outlier.
        assert!(outliers(&[5.0, 5.0, 5.0]).is_empty());
        assert!(outliers(&[1.0, 9.0]).is_empty());
    }

    #[test]
    fn ratio_uncertainty_is_propagated_like_hyperfine() {
        // a = 2 ± 0.2 (10 %), b = 4 ± 0.3 (7.5 %): ratio 0.5, σ = 0.5 × √(0.01 + 0.005625) = 0.0625.
        let s = ratio_std_dev(0.5, (2.0, Some(0.2)), (4.0, Some(0.3))).unwrap();
        assert!(close(s, 0.0625), "{s}");
        assert_eq!(ratio_std_dev(0.5, (2.0, None), (4.0, Some(0.3))), None);
        assert_eq!(ratio_std_dev(1.0, (0.0, Some(0.1)), (4.0, Some(0.3))), None);
    }
}
