//! The terminal summary of a run: per parameter point a time table and a memory table, best variant
//! first, with ratios to the baseline and their uncertainty, in the spirit of hyperfine's summary.
use runner::{AllocatorCheck, Group, Ranking, VariantSummary};

use crate::format;

/// Renders every group: a time table then a memory table, the same variants in the same order
/// (best first); `param_names` orders the parameters in the group headings and `throughput_unit`
/// names the unit of `--throughput` (e.g. "ops/s").
pub fn render_run_table(
    groups: &[Group],
    param_names: &[String],
    throughput_unit: Option<&str>,
) -> String {
    let mut out = String::new();
    for group in groups {
        let point: Vec<String> = param_names
            .iter()
            .filter_map(|n| group.params.get(n).map(|v| format!("{n}={v}")))
            .collect();
        let heading = if point.is_empty() {
            "Summary".to_string()
        } else {
            point.join(" ")
        };
        let ranked = match group.ranked_by {
            Ranking::Throughput => "ranked by throughput, highest first",
            Ranking::Wall => "ranked by median wall time",
        };
        match &group.baseline {
            Some(b) => out.push_str(&format!(
                "{heading}   ({ranked}; ratios: variant / {b}, ± one standard deviation)\n"
            )),
            None => out.push_str(&format!("{heading}   ({ranked})\n")),
        }
        let with_throughput = group.variants.iter().any(|v| v.throughput_median.is_some());
        let mut time = vec![cells(&[
            "variant",
            "wall mean ± σ",
            "median (min…max)",
            "user",
            "sys",
            "time ratio",
        ])];
        if with_throughput {
            time[0].extend(cells(&["throughput median (min…max)", "throughput ratio"]));
        }
        let mut memory = vec![cells(&[
            "variant",
            "peak PSS",
            "mean PSS",
            "peak RSS",
            "mean RSS",
            "peak PSS ratio",
            "peak RSS ratio",
        ])];
        let scale = shortest_wall(group);
        for v in &group.variants {
            let mut row = time_row(v, scale);
            if with_throughput {
                row.extend(throughput_cells(v, throughput_unit));
            }
            time.push(row);
            memory.push(memory_row(v));
        }
        let mut notes_of = group.variants.iter().map(notes);
        out.push_str(&lines(&time, &mut |_| notes_of.next().unwrap_or_default()));
        out.push_str(&lines(&memory, &mut |_| Vec::new()));
        let succeeded = group.variants.iter().map(|v| v.runs - v.failed.min(v.runs));
        let succeeded: Vec<u32> = succeeded.filter(|n| *n > 0).collect();
        if group.baseline.is_some() && !succeeded.is_empty() && succeeded.iter().all(|n| *n == 1) {
            out.push_str(
                "  (one run per variant: the ratios have no uncertainty; use --runs 3 or more)\n",
            );
        }
        out.push('\n');
    }
    out
}

fn cells(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| t.to_string()).collect()
}

/// The rows aligned (first column left, the others right), each followed by its `notes`.
fn lines(rows: &[Vec<String>], notes: &mut dyn FnMut(usize) -> Vec<String>) -> String {
    let mut widths = vec![0; rows[0].len()];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (i, cells) in rows.iter().enumerate() {
        let mut s = String::from(" ");
        for (j, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - cell.chars().count();
            if j == 0 {
                s.push_str(&format!(" {cell}{}", " ".repeat(pad)));
            } else {
                s.push_str(&format!("  {}{cell}", " ".repeat(pad)));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
        if i > 0 {
            for note in notes(i - 1) {
                out.push_str(&format!("      ! {note}\n"));
            }
        }
    }
    out
}

fn dash() -> String {
    "—".to_string()
}

/// The time unit of a group's table: from its shortest mean wall time.
pub(crate) fn shortest_wall(group: &Group) -> format::TimeScale {
    let shortest = group
        .variants
        .iter()
        .filter_map(|v| v.wall_mean)
        .reduce(f64::min);
    format::TimeScale::for_shortest(shortest)
}

fn time_row(v: &VariantSummary, scale: format::TimeScale) -> Vec<String> {
    let time = |x: Option<f64>| x.map_or_else(dash, |x| scale.with_unit(x));
    let mean = match (v.wall_mean, v.wall_stddev) {
        (Some(m), Some(s)) => format!("{} ± {}", scale.number(m), scale.with_unit(s)),
        (m, _) => time(m),
    };
    let median = match (v.wall_median, v.wall_min, v.wall_max) {
        (Some(m), Some(lo), Some(hi)) if v.runs - v.failed > 1 => format!(
            "{} ({}…{})",
            scale.number(m),
            scale.number(lo),
            scale.with_unit(hi)
        ),
        (m, _, _) => time(m),
    };
    vec![
        v.variant.clone(),
        mean,
        median,
        time(v.user_mean),
        time(v.sys_mean),
        v.wall_ratio
            .map_or_else(dash, |r| format::ratio_pm(r, v.wall_ratio_stddev)),
    ]
}

fn throughput_cells(v: &VariantSummary, unit: Option<&str>) -> Vec<String> {
    let median = match (v.throughput_median, v.throughput_min, v.throughput_max) {
        (Some(m), Some(lo), Some(hi)) if lo < hi => format!(
            "{} ({}…{})",
            format::rate_in(m, unit),
            format::rate_number(lo),
            format::rate_number(hi)
        ),
        (Some(m), _, _) => format::rate_in(m, unit),
        _ => dash(),
    };
    vec![
        median,
        v.throughput_ratio
            .map_or_else(dash, |r| format::ratio_pm(r, v.throughput_ratio_stddev)),
    ]
}

fn memory_row(v: &VariantSummary) -> Vec<String> {
    let bytes = |x: Option<f64>| x.map_or_else(dash, format::bytes);
    vec![
        v.variant.clone(),
        bytes(v.peak_pss_median),
        bytes(v.mean_pss_median),
        bytes(v.peak_rss_median),
        bytes(v.mean_rss_median),
        v.peak_pss_ratio
            .map_or_else(dash, |r| format::ratio_pm(r, v.peak_pss_ratio_stddev)),
        v.peak_rss_ratio
            .map_or_else(dash, |r| format::ratio_pm(r, v.peak_rss_ratio_stddev)),
    ]
}

/// Problems a reader must not miss: failed runs, an allocator that was not really loaded.
fn notes(v: &VariantSummary) -> Vec<String> {
    let mut notes = Vec::new();
    let noise = |what: &str, r: Option<f64>, sd: Option<f64>| {
        format!(
            "{what}: within the noise of the repeats ({} the baseline's)",
            format::ratio_pm(r.unwrap_or(1.0), sd)
        )
    };
    if v.wall_within_noise == Some(true) {
        notes.push(noise("time", v.wall_ratio, v.wall_ratio_stddev));
    }
    if v.throughput_within_noise == Some(true) {
        notes.push(noise(
            "throughput",
            v.throughput_ratio,
            v.throughput_ratio_stddev,
        ));
    }
    if v.failed > 0 {
        let mut kinds = v.failures.clone();
        kinds.dedup();
        notes.push(format!(
            "{} of {} runs failed ({}); medians use the others",
            v.failed,
            v.runs,
            kinds.join(", ")
        ));
    }
    match v.allocator_check {
        AllocatorCheck::NotLoaded => notes.push(format!(
            "{}'s library was NOT mapped in the process (static binary, setuid, or LD_PRELOAD reset): these figures are not its",
            v.variant
        )),
        AllocatorCheck::Unverified => {
            notes.push("the process ended before the allocator library could be checked in /proc/PID/maps".into())
        }
        _ => {}
    }
    notes
}

/// Most distinct marker labels for which the per-marker table is printed (an event loop's thousands
/// of markers belong in the CSV and the HTML report, not in the terminal).
pub const MARKER_TABLE_MAX_LABELS: usize = 12;

/// Tree RSS and PSS at each marker label, median over the repeats of each variant, for runs whose
/// markers name a few phases (e.g. twowave's wave-a, wave-b, freed-a, end). None when there are no
/// markers or too many distinct labels.
pub fn render_marker_table(runs: &[runner::RunRecord], variant_order: &[String]) -> Option<String> {
    let mut labels: Vec<&str> = Vec::new();
    for m in runs.iter().flat_map(|r| &r.marker_records) {
        if !labels.contains(&m.label.as_str()) {
            labels.push(&m.label);
        }
    }
    if labels.is_empty() || labels.len() > MARKER_TABLE_MAX_LABELS {
        return None;
    }
    let cell = |variant: &str, label: &str| -> String {
        let of = |f: fn(&runner::MarkerRecord) -> Option<u64>| -> Option<f64> {
            let values: Vec<f64> = runs
                .iter()
                .filter(|r| r.variant == variant && r.ending.ok())
                .flat_map(|r| r.marker_records.iter().filter(|m| m.label == label))
                .filter_map(|m| f(m).map(|v| v as f64))
                .collect();
            runner::median(&values)
        };
        match (of(|m| m.rss), of(|m| m.pss)) {
            (Some(rss), Some(pss)) => format!("{} / {}", format::bytes(rss), format::bytes(pss)),
            _ => "—".to_string(),
        }
    };
    let mut header = vec!["variant (RSS / PSS)".to_string()];
    header.extend(labels.iter().map(|l| l.to_string()));
    let mut rows = vec![header];
    for v in variant_order {
        let mut row = vec![v.clone()];
        row.extend(labels.iter().map(|l| cell(v, l)));
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("Memory of the tree at each marker (median over repeats)\n");
    for row in rows {
        let mut line = String::from(" ");
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            if i == 0 {
                line.push_str(&format!(" {c}{pad}"));
            } else {
                line.push_str(&format!("  {pad}{c}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(name: &str, ratio: f64, sd: Option<f64>) -> VariantSummary {
        VariantSummary {
            variant: name.into(),
            runs: 3,
            wall_median: Some(0.050 * ratio),
            wall_min: Some(0.049 * ratio),
            wall_max: Some(0.052 * ratio),
            wall_mean: Some(0.0502 * ratio),
            wall_stddev: Some(0.0012),
            user_mean: Some(0.0401),
            sys_mean: Some(0.0063),
            throughput_median: Some(6_825_000.0),
            throughput_min: Some(5_993_000.0),
            throughput_max: Some(7_619_000.0),
            wall_ratio: Some(ratio),
            wall_ratio_stddev: sd,
            wall_within_noise: sd.map(|s| (ratio - 1.0).abs() <= s),
            ..VariantSummary::default()
        }
    }

    #[test]
    fn rows_show_mean_sigma_cpu_throughput_spread_and_noise() {
        let group = Group {
            baseline: Some("glibc".into()),
            ranked_by: Ranking::Throughput,
            variants: vec![
                variant("jemalloc", 1.02, Some(0.05)),
                variant("glibc", 1.0, None),
            ],
            ..Group::default()
        };
        let text = render_run_table(&[group], &[], Some("ops/s"));
        assert!(
            text.starts_with(
                "Summary   (ranked by throughput, highest first; ratios: variant / glibc"
            ),
            "{text}"
        );
        // 50.2 ms × 1.02 = 51.2 ms; σ 1.2 ms; the range in the median's unit.
        assert!(text.contains("51.2 ± 1.2 ms"), "{text}");
        assert!(text.contains("51.0 (50.0…53.0 ms)"), "{text}");
        assert!(
            text.contains("40.1 ms") && text.contains("6.3 ms"),
            "{text}"
        );
        assert!(text.contains("6.825 M ops/s (5.993 M…7.619 M)"), "{text}");
        assert!(text.contains("1.02 ± 0.05×"), "{text}");
        assert!(
            text.contains("! time: within the noise of the repeats (1.02 ± 0.05× the baseline's)"),
            "{text}"
        );
        assert!(!text.contains("one run per variant"), "{text}");
    }

    #[test]
    fn one_run_each_says_the_ratios_have_no_uncertainty() {
        let one = |name: &str, r: f64| VariantSummary {
            runs: 1,
            wall_stddev: None,
            ..variant(name, r, None)
        };
        let group = Group {
            baseline: Some("glibc".into()),
            variants: vec![one("glibc", 1.0), one("jemalloc", 0.78)],
            ..Group::default()
        };
        let text = render_run_table(&[group], &[], None);
        assert!(text.contains("0.78×") && !text.contains("0.78 ±"), "{text}");
        assert!(
            text.contains("one run per variant: the ratios have no uncertainty"),
            "{text}"
        );
    }
}
