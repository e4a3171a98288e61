//! The statistics of the search: estimates from repeated runs, ratios with their spread, and the
//! racing test that says a candidate is clearly worse than another.

pub use runner::tune_record::{Estimate, Ratio, DEFAULT_REL_SD, INTERVAL_Z, MIN_REL_SD};

/// The relative noise of single runs, pooled over every estimate with repeats (weighted by their
/// degrees of freedom); `DEFAULT_REL_SD` when nothing was repeated yet.
pub fn pooled_rel_sd(estimates: &[Estimate]) -> f64 {
    let (mut sum, mut dof) = (0.0, 0.0);
    for e in estimates {
        if let (Some(sd), true) = (e.sd, e.mean > 0.0) {
            sum += (e.n - 1) as f64 * (sd / e.mean).powi(2);
            dof += (e.n - 1) as f64;
        }
    }
    if dof == 0.0 {
        DEFAULT_REL_SD
    } else {
        (sum / dof).sqrt().max(MIN_REL_SD)
    }
}

/// `a / b` with its spread; `pooled` stands in for the noise of a side with one run.
pub fn ratio(a: &Estimate, b: &Estimate, pooled: f64) -> Ratio {
    let value = a.mean / b.mean;
    let sd = value * (a.rel_sd(pooled).powi(2) + b.rel_sd(pooled).powi(2)).sqrt();
    Ratio {
        value,
        sd,
        low: (value - INTERVAL_Z * sd).max(0.0),
        high: value + INTERVAL_Z * sd,
        runs: [a.n, b.n],
        pooled_noise: a.sd.is_none() || b.sd.is_none(),
    }
}

/// How much better `a` is than `b`, in standard errors of the difference of their log means
/// (positive: `a` better). The racing test and "beyond the noise" both read it.
pub fn advantage(a: &Estimate, b: &Estimate, lower_is_better: bool, pooled: f64) -> f64 {
    let d = (b.mean / a.mean).ln();
    let d = if lower_is_better { d } else { -d };
    let se = (a.rel_se(pooled).powi(2) + b.rel_se(pooled).powi(2)).sqrt();
    d / se
}

/// Whether `fresh` beats `base` beyond the noise: Welch's t on the log ratio, each side with its own
/// spread (at least `MIN_REL_SD`), against Student's t for Welch's degrees of freedom at the
/// one-sided level of z = 2 (2.9 for three runs against three, 2.0 for many). False with fewer than
/// two runs on a side: one run has no spread of its own, and the pooled noise of others is not its.
pub fn beats_beyond_noise(fresh: &Estimate, base: &Estimate, lower_is_better: bool) -> bool {
    if fresh.n < 2 || base.n < 2 {
        return false;
    }
    let d = (base.mean / fresh.mean).ln();
    let d = if lower_is_better { d } else { -d };
    let part = |e: &Estimate| e.rel_sd(MIN_REL_SD).powi(2) / e.n as f64;
    let (a, b) = (part(fresh), part(base));
    let dof =
        (a + b).powi(2) / (a.powi(2) / (fresh.n - 1) as f64 + b.powi(2) / (base.n - 1) as f64);
    d / (a + b).sqrt() > student_t(dof)
}

/// Student's t at the one-sided level of z = 2 (97.7 %) for `dof` degrees of freedom (the table's
/// next lower row: conservative between rows).
fn student_t(dof: f64) -> f64 {
    const TABLE: [(f64, f64); 14] = [
        (1.0, 13.97),
        (2.0, 4.53),
        (3.0, 3.31),
        (4.0, 2.87),
        (5.0, 2.65),
        (6.0, 2.52),
        (7.0, 2.43),
        (8.0, 2.37),
        (10.0, 2.28),
        (12.0, 2.23),
        (15.0, 2.18),
        (20.0, 2.13),
        (30.0, 2.09),
        (60.0, 2.04),
    ];
    TABLE
        .iter()
        .rev()
        .find(|row| row.0 <= dof)
        .map_or(TABLE[0].1, |row| row.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_and_ratios() {
        let a = Estimate::of(&[9.0, 11.0]).unwrap();
        assert_eq!(a.mean, 10.0);
        assert!((a.sd.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        let b = Estimate::of(&[20.0, 20.0, 20.0]).unwrap();
        let r = ratio(&a, &b, 0.05);
        assert!((r.value - 0.5).abs() < 1e-12);
        // b's measured spread is 0: the floor stands in.
        let expected = 0.5 * ((2f64.sqrt() / 10.0).powi(2) + MIN_REL_SD.powi(2)).sqrt();
        assert!((r.sd - expected).abs() < 1e-12);
        assert!(r.low < 0.5 && r.high > 0.5);
        assert_eq!(r.runs, [2, 3]);
    }

    #[test]
    fn a_single_run_takes_the_pooled_noise() {
        let one = Estimate::of(&[100.0]).unwrap();
        assert_eq!(one.rel_sd(0.03), 0.03);
        let repeated = [
            Estimate::of(&[100.0, 110.0]).unwrap(),
            Estimate::of(&[50.0, 50.0, 50.0]).unwrap(),
        ];
        let pooled = pooled_rel_sd(&repeated);
        assert!(pooled > MIN_REL_SD && pooled < 0.07, "{pooled}");
        assert_eq!(pooled_rel_sd(&[one]), DEFAULT_REL_SD);
    }

    #[test]
    fn beyond_the_noise_needs_two_runs_a_side_and_a_gap_beyond_students_t() {
        let base = Estimate::of(&[100.0, 101.0, 99.0]).unwrap();
        // One run, however good, is never beyond the noise.
        assert!(!beats_beyond_noise(
            &Estimate::of(&[60.0]).unwrap(),
            &base,
            true
        ));
        assert!(beats_beyond_noise(
            &Estimate::of(&[75.0, 76.0, 74.0]).unwrap(),
            &base,
            true
        ));
        // 3 % better with 1 % noise: z = 3.7 with 4 degrees of freedom (t 2.87), beyond.
        assert!(beats_beyond_noise(
            &Estimate::of(&[97.0, 98.0, 96.0]).unwrap(),
            &base,
            true
        ));
        // 2 % better: z = 2.4, beyond z = 2 but not Student's 2.87.
        assert!(!beats_beyond_noise(
            &Estimate::of(&[98.0, 99.0, 97.0]).unwrap(),
            &base,
            true
        ));
        // Higher is better: the same runs read the other way.
        assert!(!beats_beyond_noise(
            &Estimate::of(&[75.0, 76.0, 74.0]).unwrap(),
            &base,
            false
        ));
        assert_eq!(student_t(4.3), 2.87);
        assert_eq!(student_t(1000.0), 2.04);
    }

    #[test]
    fn advantage_is_signed_by_direction() {
        let small = Estimate::of(&[50.0, 51.0, 49.0]).unwrap();
        let large = Estimate::of(&[100.0, 101.0, 99.0]).unwrap();
        assert!(advantage(&small, &large, true, 0.05) > 10.0);
        assert!(advantage(&small, &large, false, 0.05) < -10.0);
    }
}
