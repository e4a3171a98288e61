//! The summary as Markdown, hyperfine's layout: per point a table of the variants, best first,
//! figures formatted with their units and ratios with ± one standard deviation; with `--ksm`, the
//! PSS saved per variant and point. Text from the user (variant labels, parameter values, the
//! throughput unit) is escaped, so a `|` or a backtick cannot break a table.
use std::io::{self, Write};

use runner::{Group, KsmSaving};

use crate::format;
use crate::summary_files::{ksm_point_name, point_name, SummaryContext};
use crate::tables::run_summary::{self, has_throughput, MARKDOWN};
use crate::tables::{Output, Table};

/// A table (without its caption) as GitHub-flavoured Markdown: the first `left` columns
/// left-aligned, the others right-aligned. The cells are Markdown already (see [`text`], [`code`]).
pub(crate) fn table(t: &Table, left: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "| {} |", t.headers.join(" | "))?;
    let align: Vec<&str> = (0..t.headers.len())
        .map(|i| if i < left { ":---" } else { "---:" })
        .collect();
    writeln!(out, "|{}|", align.join("|"))?;
    for row in &t.rows {
        writeln!(out, "| {} |", row.join(" | "))?;
    }
    Ok(())
}

/// The run summary: a heading and a table per point.
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
        let summary = run_summary::table(
            group,
            MARKDOWN,
            Output::Markdown,
            context.throughput_unit,
            has_throughput(group),
        );
        table(&summary, 1, out)?;
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
    let headers = [
        "Variant",
        "Point",
        "PSS saved",
        "Mean PSS off → on",
        "Peak PSS off → on",
        "pages_sharing",
        "Merged",
        "Settled",
        "ksmd CPU",
    ];
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{} → {}", format::bytes(a), format::bytes(b)),
        _ => dash(),
    };
    let mut rows = Vec::new();
    for s in savings {
        let saved = match s.saved_mean.zip(s.saved_mean_pct) {
            Some((b, pct)) if b < 0.0 => format!("-{} ({pct:.0} %)", format::bytes(-b)),
            Some((b, pct)) => format!("{} ({pct:.0} %)", format::bytes(b)),
            None => dash(),
        };
        rows.push(vec![
            code(&s.variant),
            text(&ksm_point_name(s, param_names)),
            saved,
            pair(s.mean_pss_off, s.mean_pss_on),
            pair(s.peak_pss_off, s.peak_pss_on),
            s.kernel_sharing.map_or_else(dash, format::bytes),
            s.kernel_merging.map_or_else(dash, format::bytes),
            s.settle_s.map_or_else(dash, format::seconds),
            s.ksmd_cpu_pct.map_or_else(dash, |c| format!("{c:.1} %")),
        ]);
    }
    let ksm = Table {
        caption: None,
        headers: headers.map(String::from).to_vec(),
        rows,
    };
    table(&ksm, 2, out)
}

/// Plain text in a table cell or heading: `|` would end the cell, a backtick start code, `<` a
/// tag, and `\\` escape what follows it.
pub(crate) fn text(s: &str) -> String {
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
pub(crate) fn code(s: &str) -> String {
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
