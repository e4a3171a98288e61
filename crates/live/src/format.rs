//! Figures as the screen writes them: one format for bytes (MiB with one decimal below 1 GiB, so
//! a reader, or a test, compares them to watch.json's bytes within 0.05 MiB).

/// `n` bytes: "512 B", "12.3 KiB", "45.6 MiB", "1.2 GiB".
pub fn bytes(n: f64) -> String {
    let n = n.max(0.0);
    if n < 1024.0 {
        return format!("{n:.0} B");
    }
    // Compared after rounding to one decimal: 1,048,575 B is "1.0 MiB", not "1024.0 KiB".
    let (value, unit) = if n < 1023.95 * 1024.0 {
        (n / 1024.0, "KiB")
    } else if n < 1023.95 * 1024.0 * 1024.0 {
        (n / (1024.0 * 1024.0), "MiB")
    } else {
        (n / (1024.0 * 1024.0 * 1024.0), "GiB")
    };
    format!("{value:.1} {unit}")
}

/// A signed change: "+1.2 MiB", "-300 B", "0 B".
pub fn signed_bytes(n: f64) -> String {
    if n.abs() < 0.5 {
        return "0 B".into();
    }
    format!("{}{}", if n < 0.0 { "-" } else { "+" }, bytes(n.abs()))
}

/// Seconds as "42 s", "3m05s", "2h07m".
pub fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=99 => format!("{s} s"),
        100..=5999 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_with_their_unit() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(1048575.0), "1.0 MiB");
        assert_eq!(bytes(45.6 * 1048576.0), "45.6 MiB");
        assert_eq!(bytes(1.3 * 1073741824.0), "1.3 GiB");
        assert_eq!(signed_bytes(-2048.0), "-2.0 KiB");
        assert_eq!(signed_bytes(0.1), "0 B");
        assert_eq!(duration(185.0), "3m05s");
    }
}
