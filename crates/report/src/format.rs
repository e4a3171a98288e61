//! Human formatting of bytes, durations and rates.
use crate::document::chart::Unit;

/// Bytes with a binary unit: "512 B", "12.3 KiB", "1.50 GiB".
pub fn bytes(value: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = value;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} {}", UNITS[0])
    } else if v.abs() >= 100.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else if v.abs() >= 10.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// Seconds with a unit chosen for readability: "850 ms", "1.234 s", "2 min 3 s".
pub fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 100.0 {
        format!("{s:.3} s")
    } else {
        // Rounded before it is split: 119.7 s is "2 min 0 s", never "1 min 60 s".
        let whole = s.round() as u64;
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

/// A budget or an elapsed time, short: "4.5s", "59s", "2m05s", "1h30m", "7d", "2d03h". Rounded to
/// the last unit shown before it is split, so no field ever reads 60 (or 24 hours).
pub fn duration(s: f64) -> String {
    if s < 10.0 && (s * 10.0).round() < 100.0 {
        return format!("{s:.1}s");
    }
    if s < 60.0 && s.round() < 60.0 {
        return format!("{:.0}s", s);
    }
    let split = |whole: u64, unit: u64, big: &str, small: &str, width: usize| {
        let (a, b) = (whole / unit, whole % unit);
        if b == 0 {
            format!("{a}{big}")
        } else {
            format!("{a}{big}{b:0width$}{small}")
        }
    };
    let secs = s.round() as u64;
    if secs < 3600 {
        return split(secs, 60, "m", "s", 2);
    }
    let minutes = (s / 60.0).round() as u64;
    if minutes < 24 * 60 {
        return split(minutes, 60, "h", "m", 2);
    }
    split((s / 3600.0).round() as u64, 24, "d", "h", 2)
}

/// The unit a table of durations is written in, chosen from its shortest value as hyperfine does:
/// milliseconds with one decimal below a second, else seconds with three.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeScale {
    pub unit: &'static str,
    factor: f64,
    decimals: usize,
}

impl TimeScale {
    pub fn for_shortest(seconds: Option<f64>) -> TimeScale {
        match seconds {
            Some(s) if s < 1.0 => TimeScale {
                unit: "ms",
                factor: 1000.0,
                decimals: 1,
            },
            _ => TimeScale {
                unit: "s",
                factor: 1.0,
                decimals: 3,
            },
        }
    }

    /// The number alone: "54.2". A duration is never below 0: a -0.0 (the mean of a replay
    /// without calls) or a rounding error just below 0 shows as 0.
    pub fn number(&self, seconds: f64) -> String {
        let value = seconds * self.factor;
        format!(
            "{:.*}",
            self.decimals,
            if value > 0.0 { value } else { 0.0 }
        )
    }

    /// With the unit: "54.2 ms".
    pub fn with_unit(&self, seconds: f64) -> String {
        format!("{} {}", self.number(seconds), self.unit)
    }
}

/// A rate with an SI prefix: "950 /s", "12.3 k/s", "4.56 M/s".
pub fn rate(per_s: f64) -> String {
    rate_in(per_s, None)
}

/// A rate with an SI prefix in the user's unit (`--throughput-unit`): "12.345 k ops/s"; without
/// one, "12.345 k/s".
pub fn rate_in(per_s: f64, unit: Option<&str>) -> String {
    let (number, prefix) = si(per_s);
    match unit {
        Some(unit) if prefix.is_empty() => format!("{number} {unit}"),
        Some(unit) => format!("{number} {prefix} {unit}"),
        None => format!("{number} {prefix}/s"),
    }
}

/// A rate's number and SI prefix without the unit, for a range beside a full rate: "5.993 M".
pub fn rate_number(per_s: f64) -> String {
    let (number, prefix) = si(per_s);
    format!("{number} {prefix}").trim_end().to_string()
}

/// The number and SI prefix of a rate: (12.345, "k").
fn si(v: f64) -> (String, &'static str) {
    let (v, prefix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if v >= 100.0 {
        (format!("{v:.0}"), prefix)
    } else {
        (format!("{v:.3}"), prefix)
    }
}

/// A ratio with its standard deviation: "0.73 ± 0.05×"; without one, "0.73×".
pub fn ratio_pm(r: f64, stddev: Option<f64>) -> String {
    match stddev {
        Some(s) => format!("{r:.2} ± {s:.2}×"),
        None => ratio(r),
    }
}

/// A ratio to the baseline: "1.00×", "0.73×".
pub fn ratio(r: f64) -> String {
    format!("{r:.2}×")
}

/// A value in its unit, as the axes, legends and diff tables show it.
pub fn format_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes => bytes(v),
        Unit::Seconds => seconds(v),
        Unit::Rate => rate(v),
        Unit::Count if v.abs() >= 1e6 => format!("{:.2}M", v / 1e6),
        Unit::Count if v.abs() >= 1e4 => format!("{:.1}k", v / 1e3),
        Unit::Count | Unit::Plain => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pick_a_readable_unit() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(64.0 * 1024.0 * 1024.0), "64.0 MiB");
        assert_eq!(bytes(300.0 * 1024.0 * 1024.0 * 1024.0), "300 GiB");
    }

    #[test]
    fn durations_never_read_60_and_use_hours_and_days() {
        assert_eq!(duration(4.54), "4.5s");
        assert_eq!(duration(9.97), "10s");
        assert_eq!(duration(59.7), "1m");
        assert_eq!(duration(179.6), "3m");
        assert_eq!(duration(125.0), "2m05s");
        assert_eq!(duration(3599.7), "1h");
        assert_eq!(duration(5400.0), "1h30m");
        assert_eq!(duration(7.0 * 86_400.0), "7d");
        assert_eq!(duration(2.0 * 86_400.0 + 3.0 * 3600.0), "2d03h");
        assert_eq!(seconds(119.7), "2 min 0 s");
    }

    #[test]
    fn seconds_and_rates() {
        assert_eq!(seconds(0.25), "250 ms");
        assert_eq!(seconds(1.2345), "1.234 s");
        assert_eq!(rate(12_345.0), "12.345 k/s");
        assert_eq!(rate(950.0), "950 /s");
        let ms = TimeScale::for_shortest(Some(0.0542));
        assert_eq!(
            (ms.with_unit(0.0542), ms.number(1.5)),
            ("54.2 ms".into(), "1500.0".into())
        );
        assert_eq!(TimeScale::for_shortest(Some(2.0)).with_unit(2.0), "2.000 s");
        // A trace without calls replays in -0.0 s: no minus sign.
        let ms = TimeScale::for_shortest(Some(-0.0));
        assert_eq!(
            (ms.with_unit(-0.0), ms.number(-1e-12)),
            ("0.0 ms".into(), "0.0".into())
        );
        assert_eq!(rate_in(1_234_567.0, Some("ops/s")), "1.235 M ops/s");
        assert_eq!(rate_in(950.0, Some("ops/s")), "950 ops/s");
        assert_eq!(rate_number(5_993_000.0), "5.993 M");
        assert_eq!(ratio_pm(0.734, Some(0.051)), "0.73 ± 0.05×");
        assert_eq!(ratio_pm(0.734, None), "0.73×");
    }
}
