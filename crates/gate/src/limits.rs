//! The limits file (TOML, docs/gate.md): which figures may not exceed what, the iterations the
//! growth is measured over, and the call sites whose memory not freed is expected.
//!
//! ```toml
//! [limits]
//! peak_rss = "512 MiB"            # a hard limit
//! mean_pss = "+10%"               # at most 10 % above the baseline
//! allocations = ["2M", "+5%"]     # both
//!
//! [growth]
//! marker = "iteration"            # the phases (record --marker labels) that are iterations
//! warmup = 2
//!
//! [[site]]
//! function = "parse_row"
//! not_freed_bytes = "0"
//!
//! [[suppress]]
//! function = "init_cache"
//! reason = "kept until exit on purpose"
//! ```
use std::path::Path;

use toml::Value;

use crate::error::GateError;
use crate::metric::Metric;

/// An upper bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// The figure may not exceed this value.
    AtMost(f64),
    /// The figure may not exceed the baseline's by more than this many percent.
    AboveBaseline(f64),
}

/// One limit: a figure (of the whole program, or of the call sites matching `site`) and a bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub metric: Metric,
    pub bound: Bound,
    /// `[[site]] function = ...`: the stacks through a function whose name contains this.
    pub site: Option<String>,
}

/// The phases whose peaks make `live_growth_per_iteration`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Growth {
    /// Their label (record --marker's capture); by default the most frequent label.
    pub marker: Option<String>,
    /// Iterations left out at the start (caches filling, pools growing).
    pub warmup: usize,
}

/// Stacks whose memory not freed at exit is expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Suppression {
    pub function: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    pub rules: Vec<Rule>,
    pub growth: Growth,
    pub suppressions: Vec<Suppression>,
}

impl Limits {
    pub fn read(path: &Path) -> Result<Limits, GateError> {
        let text = std::fs::read_to_string(path).map_err(|source| GateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Limits::parse(&text).map_err(|what| GateError::Limits {
            path: path.to_path_buf(),
            what,
        })
    }

    /// Parses a limits file's text; the error names the key and what is expected there.
    pub fn parse(text: &str) -> Result<Limits, String> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            e.message().lines().next().unwrap_or("not TOML").to_string()
        })?;
        let mut limits = Limits::default();
        for (key, value) in &doc {
            match key.as_str() {
                "limits" => {
                    let table = value.as_table().ok_or("[limits] must be a table")?;
                    for (name, bounds) in table {
                        let metric = metric_named(name)?;
                        for bound in bounds_of(name, bounds)? {
                            limits.rules.push(Rule {
                                metric,
                                bound,
                                site: None,
                            });
                        }
                    }
                }
                "growth" => limits.growth = growth(value)?,
                "site" => {
                    for site in array_of_tables(value, "[[site]]")? {
                        limits.rules.extend(site_rules(site)?);
                    }
                }
                "suppress" => {
                    for s in array_of_tables(value, "[[suppress]]")? {
                        limits.suppressions.push(suppression(s)?);
                    }
                }
                other => {
                    return Err(format!(
                    "unknown section '{other}' (known: [limits], [growth], [[site]], [[suppress]])"
                ))
                }
            }
        }
        if limits.rules.is_empty() {
            return Err("no limit: add a [limits] or [[site]] section".into());
        }
        Ok(limits)
    }

    /// Whether some limit is relative to a baseline.
    pub fn needs_baseline(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.bound, Bound::AboveBaseline(_)))
    }
}

fn metric_named(name: &str) -> Result<Metric, String> {
    Metric::from_name(name)
        .ok_or_else(|| format!("unknown figure '{name}' (known: {})", Metric::names()))
}

fn array_of_tables<'a>(value: &'a Value, what: &str) -> Result<Vec<&'a toml::Table>, String> {
    value
        .as_array()
        .and_then(|a| a.iter().map(Value::as_table).collect::<Option<Vec<_>>>())
        .ok_or_else(|| format!("{what} must be an array of tables"))
}

fn site_rules(site: &toml::Table) -> Result<Vec<Rule>, String> {
    let function = string_field(site, "function", "[[site]]")?;
    let mut rules = Vec::new();
    for (name, bounds) in site {
        if name == "function" {
            continue;
        }
        let metric = metric_named(name)?;
        if !Metric::OF_SITES.contains(&metric) {
            return Err(format!(
                "[[site]] '{function}': '{name}' is not a figure of a call site (known: {})",
                Metric::OF_SITES.map(Metric::name).join(", ")
            ));
        }
        for bound in bounds_of(name, bounds)? {
            rules.push(Rule {
                metric,
                bound,
                site: Some(function.clone()),
            });
        }
    }
    if rules.is_empty() {
        return Err(format!("[[site]] '{function}' has no limit"));
    }
    Ok(rules)
}

fn suppression(table: &toml::Table) -> Result<Suppression, String> {
    for key in table.keys() {
        if key != "function" && key != "reason" {
            return Err(format!(
                "[[suppress]]: unknown key '{key}' (known: function, reason)"
            ));
        }
    }
    Ok(Suppression {
        function: string_field(table, "function", "[[suppress]]")?,
        reason: table
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

fn growth(value: &Value) -> Result<Growth, String> {
    let table = value.as_table().ok_or("[growth] must be a table")?;
    let mut growth = Growth::default();
    for (key, v) in table {
        match key.as_str() {
            "marker" => {
                growth.marker = Some(
                    v.as_str()
                        .ok_or("[growth] marker must be a string (a marker label)")?
                        .to_string(),
                )
            }
            "warmup" => {
                growth.warmup = v
                    .as_integer()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or("[growth] warmup must be a count of iterations (0 or more)")?
            }
            other => {
                return Err(format!(
                    "[growth]: unknown key '{other}' (known: marker, warmup)"
                ))
            }
        }
    }
    Ok(growth)
}

fn string_field(table: &toml::Table, key: &str, what: &str) -> Result<String, String> {
    match table.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(format!(
            "{what} needs a {key} = \"...\" (a function name or part of one)"
        )),
    }
}

/// A bound, or an array of them.
fn bounds_of(name: &str, value: &Value) -> Result<Vec<Bound>, String> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            items.iter().map(|item| bound(name, item)).collect()
        }
        other => Ok(vec![bound(name, other)?]),
    }
}

fn bound(name: &str, value: &Value) -> Result<Bound, String> {
    let expected = || {
        format!(
            "{name}: expected a limit such as 0, 1024, \"512 MiB\" or \"+10%\" (above the baseline), found {}",
            shown(value)
        )
    };
    match value {
        Value::Integer(n) if *n >= 0 => Ok(Bound::AtMost(*n as f64)),
        Value::Float(x) if *x >= 0.0 && x.is_finite() => Ok(Bound::AtMost(*x)),
        Value::String(s) => parse_bound(s).ok_or_else(expected),
        _ => Err(expected()),
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        Value::Integer(n) => n.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(_) => "an array".into(),
        Value::Table(_) => "a table".into(),
        Value::Datetime(d) => d.to_string(),
    }
}

/// "+10%" (relative to the baseline) or a size: "0", "2M", "512 MiB", "1.5 GiB".
pub fn parse_bound(text: &str) -> Option<Bound> {
    let text: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .collect();
    if let Some(percent) = text.strip_suffix('%') {
        let percent: f64 = percent.strip_prefix('+').unwrap_or(percent).parse().ok()?;
        return (percent.is_finite() && percent >= 0.0).then_some(Bound::AboveBaseline(percent));
    }
    if let Some(bytes) = allocators::settings::parse_size(&text) {
        return Some(Bound::AtMost(bytes as f64));
    }
    // A fraction with a unit: "1.5GiB".
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit_bytes = allocators::settings::parse_size(&format!("1{unit}"))? as f64;
    (number.is_finite() && number >= 0.0).then_some(Bound::AtMost(number * unit_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_sizes_counts_or_percent_above_the_baseline() {
        assert_eq!(
            parse_bound("512 MiB"),
            Some(Bound::AtMost(512.0 * 1048576.0))
        );
        assert_eq!(
            parse_bound("1.5GiB"),
            Some(Bound::AtMost(1.5 * 1073741824.0))
        );
        assert_eq!(parse_bound("0"), Some(Bound::AtMost(0.0)));
        assert_eq!(parse_bound("2_000_000"), Some(Bound::AtMost(2e6)));
        assert_eq!(parse_bound("+10%"), Some(Bound::AboveBaseline(10.0)));
        assert_eq!(parse_bound("-10%"), None);
        assert_eq!(parse_bound("lots"), None);
    }

    #[test]
    fn a_limits_file_parses_into_rules() {
        let limits = Limits::parse(
            r#"
            [limits]
            peak_rss = "512 MiB"
            allocations = ["2M", "+5%"]
            not_freed_bytes = 0
            [growth]
            marker = "iteration"
            warmup = 2
            [[site]]
            function = "parse_row"
            not_freed_bytes = "1 KiB"
            [[suppress]]
            function = "init_cache"
            reason = "kept on purpose"
            "#,
        )
        .unwrap();
        assert_eq!(limits.rules.len(), 5);
        assert!(limits.needs_baseline());
        assert_eq!(limits.growth.warmup, 2);
        assert_eq!(limits.suppressions[0].function, "init_cache");
        let site = limits.rules.iter().find(|r| r.site.is_some()).unwrap();
        assert_eq!(site.metric, Metric::NotFreedBytes);
        assert_eq!(site.bound, Bound::AtMost(1024.0));
    }

    #[test]
    fn mistakes_are_named() {
        let err = |t: &str| Limits::parse(t).unwrap_err();
        assert!(err("[limits]\npeak_rsss = 1").contains("unknown figure 'peak_rsss'"));
        assert!(err("[limits]\npeak_rss = \"big\"").contains("peak_rss: expected a limit"));
        assert!(
            err("[[site]]\nfunction = \"f\"\npeak_rss = 1").contains("not a figure of a call site")
        );
        assert!(err("[[site]]\nnot_freed_bytes = 1").contains("needs a function"));
        assert!(err("[limit]\npeak_rss = 1").contains("unknown section 'limit'"));
        assert!(err("").contains("no limit"));
        assert!(err("[limits\n").len() > 3);
    }
}
