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
        let notes: Vec<Vec<String>> = group.variants.iter().map(notes).collect();
        out.push_str(&super::table(&time, &notes));
        let memory_notes: Vec<Vec<String>> = group.variants.iter().map(memory_notes).collect();
        out.push_str(&super::table(&memory, &memory_notes));
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

/// Which figure the peak RSS is where it is not the samples' (docs/results-format.md).
fn memory_notes(v: &VariantSummary) -> Vec<String> {
    let ok = v.runs - v.failed.min(v.runs);
    if v.peak_rss_kernel_runs == 0 {
        return Vec::new();
    }
    vec![format!(
        "peak RSS: the kernel's high-water mark of the largest process (wait4) in {} of {ok} runs: they ended before a sample or peaked between two",
        v.peak_rss_kernel_runs
    )]
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
