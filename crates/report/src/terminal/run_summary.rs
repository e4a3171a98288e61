//! The terminal summary of a run: per parameter point a time table and a memory table, best variant
//! first, with ratios to the baseline and their uncertainty, in the spirit of hyperfine's summary
//! (the columns are `tables::run_summary`'s).
use runner::{AllocatorCheck, Group, VariantSummary};

use crate::format;
use crate::tables::run_summary::{self, has_throughput, ranking, TERMINAL};
use crate::tables::{Output, Table};

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
        let point = crate::summary_files::point_name(group, param_names);
        let heading = if point.is_empty() {
            "Summary".to_string()
        } else {
            point
        };
        let ranked = ranking(group);
        match &group.baseline {
            Some(b) => out.push_str(&format!(
                "{heading}   ({ranked}; ratios: variant / {b}, ± one standard deviation)\n"
            )),
            None => out.push_str(&format!("{heading}   ({ranked})\n")),
        }
        let [time, memory] = TERMINAL.map(|layout| {
            run_summary::table(
                group,
                layout,
                Output::Terminal,
                throughput_unit,
                has_throughput(group),
            )
        });
        let (mut time, mut memory) = (time, memory);
        let notes: Vec<Vec<String>> = group.variants.iter().map(notes).collect();
        let noise = mark_within_noise(&mut time, &group.variants);
        out.push_str(&super::table(&time, &notes));
        out.extend(noise);
        let kernel_peak = mark_kernel_peak(&mut memory, &group.variants);
        out.push_str(&super::table(&memory, &[]));
        out.extend(kernel_peak);
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

/// The mark of a ratio within the noise of the repeats, and of a peak RSS that is the kernel's.
const NOISE_MARK: &str = "~";
const KERNEL_PEAK_MARK: &str = "*";

/// Appends `mark` to the cell of `column` (a name of the layout) in the rows `marked` says; the
/// table's rows are the variants in order.
fn mark_cells(table: &mut Table, layout: &[&str], column: &str, mark: &str, marked: &[bool]) {
    let Some(j) = layout.iter().position(|c| *c == column) else {
        return;
    };
    for (row, _) in table.rows.iter_mut().zip(marked).filter(|(_, m)| **m) {
        if let Some(cell) = row.get_mut(j) {
            cell.push_str(mark);
        }
    }
}

/// Marks the time and throughput ratios within the noise of the repeats; the table's legend line
/// (one for the table, not one per row: `make demo` repeated the sentence under most rows).
fn mark_within_noise(table: &mut Table, variants: &[VariantSummary]) -> Option<String> {
    let wall: Vec<bool> = variants
        .iter()
        .map(|v| v.wall_within_noise == Some(true))
        .collect();
    let throughput: Vec<bool> = variants
        .iter()
        .map(|v| v.throughput_within_noise == Some(true))
        .collect();
    if !wall.contains(&true) && !throughput.contains(&true) {
        return None;
    }
    let layout = TERMINAL[0];
    mark_cells(table, layout, "wall_ratio", NOISE_MARK, &wall);
    mark_cells(table, layout, "throughput_ratio", NOISE_MARK, &throughput);
    Some(format!(
        "  {NOISE_MARK} within the noise of the repeats: the ratio's ± one standard deviation includes 1\n"
    ))
}

/// Marks the peak RSS that is the kernel's high-water mark rather than a sample's, where it is
/// (docs/results-format.md); the table's legend line says in how many runs of each.
fn mark_kernel_peak(table: &mut Table, variants: &[VariantSummary]) -> Option<String> {
    let marked: Vec<bool> = variants
        .iter()
        .map(|v| v.peak_rss_kernel_runs > 0)
        .collect();
    if !marked.contains(&true) {
        return None;
    }
    mark_cells(
        table,
        TERMINAL[1],
        "peak_rss_median",
        KERNEL_PEAK_MARK,
        &marked,
    );
    let ok = |v: &VariantSummary| v.runs - v.failed.min(v.runs);
    let kernel: Vec<&VariantSummary> = variants
        .iter()
        .filter(|v| v.peak_rss_kernel_runs > 0)
        .collect();
    let runs = if kernel.iter().all(|v| v.peak_rss_kernel_runs >= ok(v)) {
        "every run".to_string()
    } else {
        let each: Vec<String> = kernel
            .iter()
            .map(|v| format!("{} of {} of {}", v.peak_rss_kernel_runs, ok(v), v.variant))
            .collect();
        format!("{} runs", each.join(", "))
    };
    Some(format!(
        "  {KERNEL_PEAK_MARK} peak RSS: the kernel's high-water mark of the largest process (wait4) in {runs}: they ended before a sample or peaked between two\n"
    ))
}

/// Problems a reader must not miss, under the variant's row: failed runs, an allocator that was
/// not really loaded.
fn notes(v: &VariantSummary) -> Vec<String> {
    let mut notes = Vec::new();
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
    let mut headers = vec!["variant (RSS / PSS)".to_string()];
    headers.extend(labels.iter().map(|l| l.to_string()));
    let rows = variant_order
        .iter()
        .map(|v| {
            let mut row = vec![v.clone()];
            row.extend(labels.iter().map(|l| cell(v, l)));
            row
        })
        .collect();
    let table = Table {
        caption: Some("Memory of the tree at each marker (median over repeats)".into()),
        headers,
        rows,
    };
    let mut out = format!("{}\n", table.caption.as_deref().unwrap_or_default());
    out.push_str(&super::table(&table, &[]));
    out.push('\n');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner::Ranking;

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
        // The noise is a mark in the cell and one legend line, not a note under each row.
        assert!(text.contains("1.02 ± 0.05×~"), "{text}");
        assert_eq!(text.matches("within the noise").count(), 1, "{text}");
        assert!(!text.contains("! time"), "{text}");
        assert!(!text.contains("one run per variant"), "{text}");
    }

    /// Issue 35: `make demo` printed "peak RSS: the kernel's high-water mark ..." under most rows;
    /// a mark in the cell and one legend line per table say it once.
    #[test]
    fn a_kernel_peak_is_a_mark_and_one_legend_line_per_table() {
        let kernel = |name: &str, runs: u32| VariantSummary {
            peak_rss_median: Some(50.0 * 1024.0 * 1024.0),
            peak_rss_kernel_runs: runs,
            ..variant(name, 1.0, None)
        };
        let group = Group {
            baseline: Some("glibc".into()),
            variants: vec![
                kernel("glibc", 3),
                kernel("jemalloc", 3),
                kernel("mimalloc", 0),
            ],
            ..Group::default()
        };
        let text = render_run_table(&[group.clone(), group], &[], None);
        assert_eq!(text.matches("high-water mark").count(), 2, "{text}");
        assert!(
            text.contains("  * peak RSS: the kernel's high-water mark of the largest process (wait4) in every run:"),
            "{text}"
        );
        assert_eq!(text.matches("50.0 MiB*").count(), 4, "{text}");
        assert!(!text.contains("! peak RSS"), "{text}");
        let some = Group {
            variants: vec![kernel("glibc", 1), kernel("jemalloc", 3)],
            ..Group::default()
        };
        let text = render_run_table(&[some], &[], None);
        assert!(
            text.contains("in 1 of 3 of glibc, 3 of 3 of jemalloc runs"),
            "{text}"
        );
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
