//! The summary as Markdown, hyperfine's layout: per point a table of the variants, best first,
//! figures formatted with their units and ratios with ± one standard deviation.
use std::io::{self, Write};

use runner::{Group, VariantSummary};

use super::{point_name, SummaryContext};
use crate::format::{self, TimeScale};

pub(super) fn write(
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
            writeln!(out, "### {point}\n")?;
        }
        let with_throughput = group.variants.iter().any(|v| v.throughput_median.is_some());
        let scale = crate::render::run_table::shortest_wall(group);
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
    Ok(())
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
        format!("`{}` (baseline)", v.variant)
    } else {
        format!("`{}`", v.variant)
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
    let rate = |x: Option<f64>| x.map_or_else(dash, |x| format::rate_in(x, unit));
    vec![
        rate(v.throughput_median),
        match (v.throughput_min, v.throughput_max) {
            (Some(lo), Some(hi)) => format!("{}…{}", format::rate_number(lo), rate(Some(hi))),
            _ => dash(),
        },
        ratio(v.throughput_ratio, v.throughput_ratio_stddev),
    ]
}
