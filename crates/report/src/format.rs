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
        format!("{} min {:.0} s", (s / 60.0).floor(), s % 60.0)
    }
}

/// A rate with an SI prefix: "950 /s", "12.3 k/s", "4.56 M/s".
pub fn rate(per_s: f64) -> String {
    let (v, prefix) = if per_s >= 1e9 {
        (per_s / 1e9, "G")
    } else if per_s >= 1e6 {
        (per_s / 1e6, "M")
    } else if per_s >= 1e3 {
        (per_s / 1e3, "k")
    } else {
        (per_s, "")
    };
    if v >= 100.0 {
        format!("{v:.0} {prefix}/s")
    } else {
        format!("{v:.3} {prefix}/s")
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
    fn seconds_and_rates() {
        assert_eq!(seconds(0.25), "250 ms");
        assert_eq!(seconds(1.2345), "1.234 s");
        assert_eq!(rate(12_345.0), "12.345 k/s");
        assert_eq!(rate(950.0), "950 /s");
    }
}
