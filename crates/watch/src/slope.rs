//! Robust trends: the Theil-Sen estimator (the median of the slopes between every pair of points).
//!
//! Why Theil-Sen and not least squares: a watched program's memory moves in steps (a cache fills, a
//! burst comes and goes). The median of pairwise slopes ignores up to 29 % of outlying points, so a
//! start-up fill or a single spike does not pass for a trend, while a steady creep does.

/// At most this many points enter the estimate (pairs grow with its square): longer series are
/// thinned to points evenly spread in time (by index of the time-sorted series).
pub const MAX_POINTS: usize = 400;

/// The Theil-Sen slope of `points` (time in seconds, value) in value per second; None with fewer than
/// two points at distinct times.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<f64> {
    let thinned: Vec<(f64, f64)> = if points.len() > MAX_POINTS {
        let step = (points.len() - 1) as f64 / (MAX_POINTS - 1) as f64;
        (0..MAX_POINTS)
            .map(|i| points[((i as f64 * step).round() as usize).min(points.len() - 1)])
            .collect()
    } else {
        points.to_vec()
    };
    let mut slopes = Vec::with_capacity(thinned.len() * thinned.len() / 2);
    for (i, a) in thinned.iter().enumerate() {
        for b in &thinned[i + 1..] {
            let dt = b.0 - a.0;
            if dt.abs() > 1e-9 {
                slopes.push((b.1 - a.1) / dt);
            }
        }
    }
    median(&mut slopes)
}

/// The median of `values` (mean of the two middle ones for an even count); None when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if !n.is_multiple_of(2) {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straight_line_gives_its_slope() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 + 2.0 * i as f64)).collect();
        assert_eq!(theil_sen(&pts), Some(2.0));
    }

    #[test]
    fn hand_computed_small_series() {
        // pairs: (0,1)->(1,3): 2; (0,1)->(2,2): 0.5; (1,3)->(2,2): -1 => median 0.5
        assert_eq!(theil_sen(&[(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]), Some(0.5));
        // four points: slopes 1, 1, 10, 1, 14.5, 28 => sorted 1 1 1 10 14.5 28 => (1 + 10) / 2
        let pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 30.0)];
        assert_eq!(theil_sen(&pts), Some(5.5));
    }

    #[test]
    fn one_spike_does_not_make_a_trend() {
        // flat at 100 with one spike of 10,000 in the middle: least squares would not be 0.
        let mut pts: Vec<(f64, f64)> = (0..21).map(|i| (i as f64, 100.0)).collect();
        pts[10].1 = 10_000.0;
        assert_eq!(theil_sen(&pts), Some(0.0));
    }

    #[test]
    fn a_fill_at_the_start_then_a_plateau_is_flat() {
        // 0..4 fills 0 -> 400, then 16 points flat at 400: most pairs lie on the plateau.
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|i| (i as f64, (i.min(4) * 100) as f64))
            .collect();
        assert_eq!(theil_sen(&pts), Some(0.0));
    }

    #[test]
    fn too_few_points() {
        assert_eq!(theil_sen(&[]), None);
        assert_eq!(theil_sen(&[(1.0, 5.0)]), None);
        assert_eq!(theil_sen(&[(1.0, 5.0), (1.0, 6.0)]), None);
    }

    #[test]
    fn long_series_are_thinned_but_keep_the_slope() {
        let pts: Vec<(f64, f64)> = (0..5000).map(|i| (i as f64, 7.0 * i as f64)).collect();
        let s = theil_sen(&pts).unwrap();
        assert!((s - 7.0).abs() < 1e-9, "{s}");
    }
}
