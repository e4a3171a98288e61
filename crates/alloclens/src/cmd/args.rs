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

/// `NAME=VALUE`
pub fn env_pair(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => bail!("--env '{text}' must look like NAME=VALUE"),
    }
}

/// "250ms", "1.5s", "2m", "1h", or a bare number of seconds.
pub fn duration(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("min").or_else(|| t.strip_suffix('m')) {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| anyhow!("'{text}' is not a duration (e.g. 100ms, 2.5s, 5m)"))?;
    if !value.is_finite() || value < 0.0 {
        bail!("'{text}' is not a duration (e.g. 100ms, 2.5s, 5m)");
    }
    Ok(Duration::from_secs_f64(value * scale))
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

/// Fails early, before any run, when the program cannot be found.
pub fn check_command_exists(program: &str) -> anyhow::Result<()> {
    if program.contains('{') {
        return Ok(()); // a placeholder: known only per run
    }
    if program.contains('/') {
        if Path::new(program).is_file() {
            return Ok(());
        }
        bail!("command not found: '{program}' (no such file)");
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(program).is_file()) {
        return Ok(());
    }
    bail!("command not found: '{program}' (not in PATH; give a path or check the spelling)")
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
        assert_eq!(duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert!(duration("soon").is_err());
        assert!(duration("-1s").is_err());
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
