//! Parsing of argument values shared by several commands, with one-line errors that say the fix.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use regex::Regex;
use runner::Param;

/// The variants of `-a LIST`, or glibc plus every installed known allocator.
pub fn variants(list: Option<&str>) -> anyhow::Result<Vec<allocators::Variant>> {
    let list = match list {
        Some(l) => l.to_string(),
        None => installed_allocators().join(","),
    };
    let variants = allocators::parse_variant_list(&list)?;
    let mut labels: Vec<&str> = variants.iter().map(|v| v.label.as_str()).collect();
    labels.sort();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        bail!(
            "variant '{}' is given twice in -a (give the second one a label: name@label:settings)",
            w[0]
        );
    }
    Ok(variants)
}

/// Names of the known allocators installed on this machine, glibc first.
pub fn installed_allocators() -> Vec<String> {
    allocators::discover()
        .into_iter()
        .filter(|a| a.installed)
        .map(|a| a.name)
        .collect()
}

/// `NAME=V1,V2,...`
pub fn param(text: &str) -> anyhow::Result<Param> {
    let (name, values) = text.split_once('=').ok_or_else(|| {
        anyhow!("--param '{text}' must look like NAME=V1,V2,... (e.g. threads=1,2,4)")
    })?;
    let valid_name =
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        bail!("--param name '{name}' must be letters, digits or _ (it is used as {{{name}}})");
    }
    let values: Vec<String> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
        .collect();
    if values.is_empty() {
        bail!("--param {name} has no values (e.g. {name}=1,2,4)");
    }
    Ok(Param {
        name: name.to_string(),
        values,
    })
}

/// Refuses a parameter given twice: the second would silently replace the first.
pub fn distinct_params(params: &[Param]) -> anyhow::Result<()> {
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            bail!(
                "--param {} is given twice (give all its values in one: --param {}=V1,V2,...)",
                p.name,
                p.name
            );
        }
    }
    Ok(())
}

/// The baseline variant: the one asked for, which must be among the variants, else glibc when it is
/// one of them, else the first.
pub fn baseline(asked: Option<String>, variants: &[allocators::Variant]) -> anyhow::Result<String> {
    let labels: Vec<&str> = variants.iter().map(|v| v.label.as_str()).collect();
    match asked {
        Some(b) if labels.contains(&b.as_str()) => Ok(b),
        Some(b) => bail!(
            "--baseline '{b}' is not one of the variants ({}); add it to -a or choose one of those",
            labels.join(", ")
        ),
        None if labels.contains(&allocators::GLIBC) => Ok(allocators::GLIBC.to_string()),
        None => Ok(labels
            .first()
            .copied()
            .unwrap_or(allocators::GLIBC)
            .to_string()),
    }
}

/// True when stdin is worth passing to the command: neither a terminal (the command runs in a process
/// group of its own, so a read from the terminal would stop it) nor /dev/null nor closed.
pub fn stdin_is_input() -> bool {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return false;
    }
    let (Ok(ours), Ok(null)) = (
        std::fs::metadata("/proc/self/fd/0"),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    !(ours.file_type().is_char_device() && ours.rdev() == null.rdev())
}

/// `NAME=VALUE`
pub fn env_pair(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => bail!("--env '{text}' must look like NAME=VALUE"),
    }
}

/// A duration option's value: "250ms", "1.5s", "2m" (or "2min"), "1h", "7d", or a bare number of seconds,
/// at most `max`. Hand-written rather than `humantime`, which takes neither fractions ("2.5s") nor bare
/// numbers, both accepted since the first version. `max` keeps the value far from what `Duration`
/// and `Instant` arithmetic can hold, and from values that can only be typing mistakes.
pub fn duration(text: &str, option: &str, max: Duration) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("min").or_else(|| t.strip_suffix('m')) {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = t.strip_suffix('d') {
        (n, 86_400.0)
    } else {
        (t, 1.0)
    };
    let not_a_duration =
        || anyhow!("{option} '{text}' is not a duration (e.g. 100ms, 2.5s, 5m, 2h, 7d)");
    let value: f64 = number.trim().parse().map_err(|_| not_a_duration())?;
    if !value.is_finite() || value < 0.0 {
        return Err(not_a_duration());
    }
    let seconds = value * scale;
    // Every duration option is a time to wait or to sample at: 0 would time every run out at once
    // (--timeout), end a watch before its first sample (--duration), or spin (--interval).
    if seconds == 0.0 {
        bail!("{option} '{text}' must be longer than 0");
    }
    if seconds > max.as_secs_f64() {
        bail!(
            "{option} '{text}' is too long: at most {}",
            describe_duration(max)
        );
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// "1h", "365 days", "90s": the maximum as the error line shows it.
fn describe_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        86_400 => "1 day".to_string(),
        _ if s >= 86_400 && s.is_multiple_of(86_400) => format!("{} days", s / 86_400),
        _ if s >= 3600 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ => format!("{s}s"),
    }
}

/// An optional regular expression option's value.
pub fn optional_regex(text: Option<&str>, option: &str) -> anyhow::Result<Option<Regex>> {
    text.map(|t| regex(t, option)).transpose()
}

pub fn regex(text: &str, option: &str) -> anyhow::Result<Regex> {
    Regex::new(text).map_err(|e| {
        let first = e
            .to_string()
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_string();
        anyhow!("{option} '{text}' is not a valid regular expression: {first}")
    })
}

/// Fails early, before any run, when the program cannot be found or is not executable (as
/// `execvp` does, a file of PATH without an execute bit is passed over).
pub fn check_command_exists(program: &str) -> anyhow::Result<()> {
    if program.contains('{') {
        return Ok(()); // a placeholder: known only per run
    }
    if program.contains('/') {
        let path = Path::new(program);
        if !path.is_file() {
            bail!("command not found: '{program}' (no such file)");
        }
        if !is_executable(path) {
            bail!(
                "command '{program}' is not executable: chmod +x it, or give its interpreter first (e.g. sh {program})"
            );
        }
        return Ok(());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))) {
        return Ok(());
    }
    bail!("command not found: '{program}' (not in PATH; give a path or check the spelling)")
}

/// A regular file with an execute bit (root too needs one to exec a file).
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A new directory name in the current directory: PREFIX-YYYYmmdd-HHMMSS.
pub fn dated_dir(prefix: &str) -> PathBuf {
    PathBuf::from(format!(
        "{prefix}-{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |t| duration(t, "--x", Duration::from_secs(86_400));
        assert_eq!(d("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(d("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(d("2").unwrap(), Duration::from_secs(2));
        assert_eq!(d("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(d("5min").unwrap(), Duration::from_secs(300));
        assert_eq!(d("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(d("24h").unwrap(), Duration::from_secs(86_400));
        assert_eq!(d("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(d("0.5d").unwrap(), Duration::from_secs(43_200));
        assert!(d("1.5d").is_err()); // over the maximum, not misread
        assert!(d("soon").is_err());
        assert!(d("-1s").is_err());
        assert!(d("nan").is_err());
        assert!(d("infs").is_err());
        let e = d("99999999999999999999s").unwrap_err().to_string();
        assert_eq!(e, "--x '99999999999999999999s' is too long: at most 1 day");
        assert!(d("1e300s").is_err());
        assert!(d("24.001h").is_err());
        let e = d("0s").unwrap_err().to_string();
        assert_eq!(e, "--x '0s' must be longer than 0");
        assert!(d("0").is_err() && d("0.0ms").is_err());
    }

    #[test]
    fn params() {
        let p = param("threads=1, 2,4").unwrap();
        assert_eq!(p.name, "threads");
        assert_eq!(p.values, vec!["1", "2", "4"]);
        assert!(param("threads").is_err());
        assert!(param("a-b=1").is_err());
        assert!(param("n=").is_err());
    }

    #[test]
    fn bad_regex_is_one_line() {
        let e = regex("event (", "--marker").unwrap_err().to_string();
        assert!(
            e.starts_with("--marker 'event (' is not a valid regular expression"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
