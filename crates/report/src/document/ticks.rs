//! Round axis ticks, computed once here for every renderer: the HTML page embeds them with the chart
//! data (and `html/page.js` repeats the same rules for a zoomed range), the figures draw them.
//! Bytes step by powers of two (512 KiB, 1 MiB, 2 MiB, ...) so every label is exact in its binary unit
//! ("1.5 MiB", never "4.77 MiB"); time, counts and rates by 1, 2 or 5 × 10^k (and whole minutes and
//! hours past a minute); log axes put a tick on powers of two (bytes) or ten (the rest).
use serde::Serialize;

use crate::document::chart::Unit;

/// About this many intervals between ticks on the value axis and on the x axis.
pub const Y_TICKS: usize = 6;
pub const X_TICKS: usize = 10;

/// The extent of an axis and its ticks with their labels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scale {
    pub min: f64,
    pub max: f64,
    pub ticks: Vec<f64>,
    pub labels: Vec<String>,
}

/// The smallest round step for `unit` leaving at most `target` intervals in `span`.
pub fn step(unit: Unit, span: f64, target: usize, whole: bool) -> f64 {
    let raw = (span / target.max(1) as f64).max(f64::MIN_POSITIVE);
    let mut step = match unit {
        Unit::Bytes => 2f64.powi(raw.log2().ceil() as i32).max(1.0),
        Unit::Seconds if raw > 30.0 => [60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0]
            .into_iter()
            .find(|s| *s >= raw)
            .unwrap_or_else(|| 3600.0 * decimal_step(raw / 3600.0)),
        _ => decimal_step(raw),
    };
    if whole || unit == Unit::Count {
        step = step.max(1.0);
    }
    step
}

/// 1, 2 or 5 × 10^k, the smallest at least `raw`.
fn decimal_step(raw: f64) -> f64 {
    let exp = raw.log10().floor() as i32;
    for m in [1.0, 2.0, 5.0, 10.0] {
        let s = scaled(m, exp);
        if s >= raw * (1.0 - 1e-9) {
            return s;
        }
    }
    scaled(10.0, exp)
}

/// m × 10^exp computed by division for negative exponents, so 0.1 is the nearest double to 0.1.
fn scaled(m: f64, exp: i32) -> f64 {
    if exp >= 0 {
        m * 10f64.powi(exp)
    } else {
        m / 10f64.powi(-exp)
    }
}

/// Multiples of `step` in [lo, hi], each computed as k × step so it stays round.
fn multiples(step: f64, lo: f64, hi: f64) -> Vec<f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last.max(first - 1))
        .map(|k| clean(k as f64 * step))
        .collect()
}

/// Rounds away binary noise (0.30000000000000004 -> 0.3).
fn clean(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let digits = 12 - v.abs().log10().floor() as i32;
    if digits <= 0 {
        return v;
    }
    let f = 10f64.powi(digits.min(300));
    (v * f).round() / f
}

/// A linear axis over the data `[lo, hi]`: with `pad`, widened to the round steps around the data
/// (from 0 when the data is not negative, for values); without, the data's own extent (time).
pub fn linear(unit: Unit, lo: f64, hi: f64, target: usize, whole: bool, pad: bool) -> Scale {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    if pad && lo >= 0.0 {
        lo = 0.0;
    }
    if hi <= lo {
        hi = lo
            + if whole || unit == Unit::Count {
                1.0
            } else {
                lo.abs().max(1.0)
            };
    }
    let s = step(unit, hi - lo, target, whole);
    if pad {
        lo = clean((lo / s).floor() * s);
        hi = clean((hi / s).ceil() * s);
    }
    let ticks = multiples(s, lo, hi);
    Scale {
        labels: ticks.iter().map(|t| label(unit, *t)).collect(),
        min: lo,
        max: hi,
        ticks,
    }
}

/// A log axis over the positive data `[lo, hi]`: from the power below to the power above, ticks on
/// every (or every 2nd, 5th, 10th...) power of two (bytes) or ten.
pub fn log(unit: Unit, lo: f64, hi: f64, target: usize) -> Scale {
    let base: f64 = if unit == Unit::Bytes { 2.0 } else { 10.0 };
    let (lo, hi) = if lo > 0.0 && hi.is_finite() && hi >= lo {
        (lo, hi)
    } else {
        (1.0, base)
    };
    let e0 = (lo.log(base) + 1e-9).floor() as i32;
    let mut e1 = (hi.log(base) - 1e-9).ceil() as i32;
    if e1 <= e0 {
        e1 = e0 + 1;
    }
    let every = [1, 2, 5, 10, 20]
        .into_iter()
        .find(|n| ((e1 - e0) as usize).div_ceil(*n) <= target.max(1))
        .unwrap_or(20);
    let ticks: Vec<f64> = (e0..=e1)
        .filter(|e| e.rem_euclid(every as i32) == 0)
        .map(|e| base.powi(e))
        .collect();
    Scale {
        labels: ticks.iter().map(|t| label(unit, *t)).collect(),
        min: base.powi(e0),
        max: base.powi(e1),
        ticks,
    }
}

/// Category axis: a tick on each of 0..n with its name.
pub fn categories(names: &[String]) -> Scale {
    Scale {
        min: -0.5,
        max: names.len() as f64 - 0.5,
        ticks: (0..names.len()).map(|i| i as f64).collect(),
        labels: names.to_vec(),
    }
}

/// A tick's label: the value in its unit with no trailing zeros ("1.5 MiB", "250 ms", "2 min").
pub fn label(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes => {
            const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
            let mut x = v;
            let mut i = 0;
            while x.abs() >= 1024.0 && i < UNITS.len() - 1 {
                x /= 1024.0;
                i += 1;
            }
            format!("{} {}", trim(x, 3), UNITS[i])
        }
        Unit::Seconds => {
            if v == 0.0 {
                "0 s".into()
            } else if v.abs() < 1.0 {
                format!("{} ms", trim(v * 1000.0, 3))
            } else if v.abs() >= 60.0 && (v % 60.0).abs() < 1e-9 {
                if v.abs() >= 3600.0 && (v % 3600.0).abs() < 1e-9 {
                    format!("{} h", trim(v / 3600.0, 2))
                } else {
                    format!("{} min", trim(v / 60.0, 2))
                }
            } else {
                format!("{} s", trim(v, 3))
            }
        }
        Unit::Rate if v == 0.0 => "0/s".into(),
        Unit::Rate => {
            let (x, p) = si(v);
            format!("{x} {p}/s")
        }
        Unit::Count => {
            let (x, p) = si(v);
            format!("{x}{p}")
        }
        Unit::Plain => trim(v, 6),
    }
}

/// k, M, G prefixes for counts and rates: the number and the prefix.
fn si(v: f64) -> (String, &'static str) {
    let a = v.abs();
    let (d, p) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    (trim(v / d, 3), p)
}

/// `v` with at most `digits` decimals, trailing zeros removed.
fn trim(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ticks_are_powers_of_two_with_exact_labels() {
        // 0..14.3 MiB once gave 4.77, 9.54, 14.3 MiB.
        let s = linear(Unit::Bytes, 0.0, 15_000_000.0, Y_TICKS, false, true);
        assert_eq!(s.labels, ["0 B", "4 MiB", "8 MiB", "12 MiB", "16 MiB"]);
        let s = linear(Unit::Bytes, 0.0, 1_000_000.0, Y_TICKS, false, true);
        assert_eq!(
            s.labels,
            ["0 B", "256 KiB", "512 KiB", "768 KiB", "1 MiB"],
            "488, 977 KiB before"
        );
        let s = linear(Unit::Bytes, 0.0, 2_500_000.0, Y_TICKS, false, true);
        assert_eq!(s.labels[..4], ["0 B", "512 KiB", "1 MiB", "1.5 MiB"]);
    }

    #[test]
    fn time_and_count_ticks_step_by_1_2_5() {
        let s = linear(Unit::Seconds, 0.0, 1.37, X_TICKS, false, false);
        assert_eq!(s.ticks, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2]);
        assert_eq!(s.labels[1], "200 ms");
        let s = linear(Unit::Seconds, 0.0, 500.0, X_TICKS, false, false);
        assert_eq!(s.labels[..3], ["0 s", "1 min", "2 min"]);
        let s = linear(Unit::Count, 0.0, 3.0, X_TICKS, false, false);
        assert_eq!(s.ticks, [0.0, 1.0, 2.0, 3.0], "no half calls");
        let s = linear(Unit::Plain, 0.0, 1.0, Y_TICKS, false, true);
        assert_eq!(s.labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        let s = linear(Unit::Rate, 0.0, 6.1e6, Y_TICKS, false, true);
        assert_eq!(s.labels[..3], ["0/s", "2 M/s", "4 M/s"]);
    }

    #[test]
    fn log_ticks_sit_on_powers() {
        let s = log(Unit::Bytes, 8.0, 300_000.0, X_TICKS);
        assert_eq!(s.min, 8.0);
        assert_eq!(s.max, 524_288.0);
        assert!(s.ticks.iter().all(|t| t.log2().fract() == 0.0));
        assert!(s.labels.contains(&"1 KiB".to_string()));
        let s = log(Unit::Count, 1.0, 123_456.0, Y_TICKS);
        assert_eq!(s.labels, ["1", "10", "100", "1k", "10k", "100k", "1M"]);
    }
}
