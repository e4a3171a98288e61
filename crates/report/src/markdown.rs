//! The summary as Markdown, hyperfine's layout: per point a table of the variants, best first,
//! figures formatted with their units and ratios with ± one standard deviation; with `--ksm`, the
//! PSS saved per variant and point. Text from the user (variant labels, parameter values, the
//! throughput unit) is escaped, so a `|` or a backtick cannot break a table.
use std::io::{self, Write};

use runner::{Group, KsmSaving, VariantSummary};

use crate::format::{self, TimeScale};
use crate::summary_files::{ksm_point_name, point_name, SummaryContext};

pub(crate) fn write_summary(
    groups: &[Group],
    context: &SummaryContext<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    for (i, group) in groups.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let point = point_name(group, context.param_names);
        if !point.is_empty() {
            writeln!(out, "### {}\n", text(&point))?;
        }
        let with_throughput = group.variants.iter().any(|v| v.throughput_median.is_some());
        let scale = crate::terminal::run_summary::shortest_wall(group);
        let u = scale.unit;
        let timed = [
            format!("Mean ± σ [{u}]"),
            format!("Median [{u}]"),
            format!("Min [{u}]"),
            format!("Max [{u}]"),
            format!("User [{u}]"),
            format!("System [{u}]"),
        ];
        let mut header = vec!["Variant"];
        header.extend(timed.iter().map(String::as_str));
        header.extend([
            "Peak PSS",
            "Peak RSS",
            "Time ratio",
            "Peak PSS ratio",
            "Peak RSS ratio",
        ]);
        if with_throughput {
            header.extend([
                "Throughput (median)",
                "Throughput min…max",
                "Throughput ratio",
            ]);
        }
        writeln!(out, "| {} |", header.join(" | "))?;
        let align: Vec<&str> = header
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { ":---" } else { "---:" })
            .collect();
        writeln!(out, "|{}|", align.join("|"))?;
        for v in &group.variants {
            let mut row = cells(v, group.baseline.as_deref(), scale);
            if with_throughput {
                row.extend(throughput_cells(v, context.throughput_unit));
            }
            writeln!(out, "| {} |", row.join(" | "))?;
        }
    }
    write_ksm(context.ksm_savings, context.param_names, out)
}

/// The terminal's KSM table: one row per variant and point.
fn write_ksm(savings: &[KsmSaving], param_names: &[String], out: &mut dyn Write) -> io::Result<()> {
    if savings.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n### KSM: PSS saved (time-weighted mean, KSM off minus on; % of off)\n"
    )?;
    writeln!(out, "| Variant | Point | PSS saved | Mean PSS off → on | Peak PSS off → on | pages_sharing | Merged | Settled | ksmd CPU |")?;
    writeln!(out, "|:---|:---|---:|---:|---:|---:|---:|---:|---:|")?;
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{} → {}", format::bytes(a), format::bytes(b)),
        _ => dash(),
    };
    for s in savings {
        let saved = match s.saved_mean.zip(s.saved_mean_pct) {
            Some((b, pct)) if b < 0.0 => format!("-{} ({pct:.0} %)", format::bytes(-b)),
            Some((b, pct)) => format!("{} ({pct:.0} %)", format::bytes(b)),
            None => dash(),
        };
        let row = [
            code(&s.variant),
            text(&ksm_point_name(s, param_names)),
            saved,
            pair(s.mean_pss_off, s.mean_pss_on),
            pair(s.peak_pss_off, s.peak_pss_on),
            s.kernel_sharing.map_or_else(dash, format::bytes),
            s.kernel_merging.map_or_else(dash, format::bytes),
            s.settle_s.map_or_else(dash, format::seconds),
            s.ksmd_cpu_pct.map_or_else(dash, |c| format!("{c:.1} %")),
        ];
        writeln!(out, "| {} |", row.join(" | "))?;
    }
    Ok(())
}

/// Plain text in a table cell or heading: `|` would end the cell, a backtick start code, `<` a
/// tag, and `\\` escape what follows it.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '|' | '`' | '\\' | '<') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text shown as code in a table cell: fenced by more backticks than it holds in a row (with
/// spaces when it starts or ends with one), and its `|` escaped, which GitHub's tables read
/// before the code span.
fn code(s: &str) -> String {
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", s.replace('|', "\\|"))
}

fn dash() -> String {
    "—".to_string()
}

fn ratio(r: Option<f64>, sd: Option<f64>) -> String {
    r.map_or_else(dash, |r| format::ratio_pm(r, sd))
}

fn cells(v: &VariantSummary, baseline: Option<&str>, scale: TimeScale) -> Vec<String> {
    let secs = |x: Option<f64>| x.map_or_else(dash, |x| scale.number(x));
    let bytes = |x: Option<f64>| x.map_or_else(dash, format::bytes);
    let name = if baseline == Some(v.variant.as_str()) {
        format!("{} (baseline)", code(&v.variant))
    } else {
        code(&v.variant)
    };
    let mean = match (v.wall_mean, v.wall_stddev) {
        (Some(m), Some(s)) => format!("{} ± {}", scale.number(m), scale.number(s)),
        (m, _) => secs(m),
    };
    vec![
        name,
        mean,
        secs(v.wall_median),
        secs(v.wall_min),
        secs(v.wall_max),
        secs(v.user_mean),
        secs(v.sys_mean),
        bytes(v.peak_pss_median),
        bytes(v.peak_rss_median),
        ratio(v.wall_ratio, v.wall_ratio_stddev),
        ratio(v.peak_pss_ratio, v.peak_pss_ratio_stddev),
        ratio(v.peak_rss_ratio, v.peak_rss_ratio_stddev),
    ]
}

fn throughput_cells(v: &VariantSummary, unit: Option<&str>) -> Vec<String> {
    let rate = |x: Option<f64>| x.map_or_else(dash, |x| text(&format::rate_in(x, unit)));
    vec![
        rate(v.throughput_median),
        match (v.throughput_min, v.throughput_max) {
            (Some(lo), Some(hi)) => format!("{}…{}", format::rate_number(lo), rate(Some(hi))),
            _ => dash(),
        },
        ratio(v.throughput_ratio, v.throughput_ratio_stddev),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_the_table() {
        assert_eq!(text("a|b `c` d\\e"), "a\\|b \\`c\\` d\\\\e");
        assert_eq!(code("glibc"), "`glibc`");
        assert_eq!(code("my|lib"), "`my\\|lib`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x``"), "``` `x`` ```");
    }
}
