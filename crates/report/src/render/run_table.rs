//! The terminal summary of a run: one table per parameter point, best variant first, with ratios to the
//! baseline, in the spirit of hyperfine's relative-speed summary.
use runner::{AllocatorCheck, Group, VariantSummary};

use crate::format;

const HEADERS: [&str; 9] = [
    "variant",
    "wall (median, min…max)",
    "throughput",
    "peak PSS",
    "mean PSS",
    "peak RSS",
    "mean RSS",
    "time",
    "peak PSS",
];

/// Renders every group; `param_names` orders the parameters in the group headings.
pub fn render_run_table(groups: &[Group], param_names: &[String]) -> String {
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
        match &group.baseline {
            Some(b) => out.push_str(&format!(
                "{heading}   (ratios: variant / {b}; lower is better)\n"
            )),
            None => out.push_str(&format!("{heading}\n")),
        }
        let rows: Vec<[String; 9]> = group.variants.iter().map(row).collect();
        let mut widths = HEADERS.map(|h| h.chars().count());
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let mut s = String::from(" ");
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                let pad = w - cell.chars().count();
                if i == 0 {
                    s.push_str(&format!(" {cell}{}", " ".repeat(pad)));
                } else {
                    s.push_str(&format!("  {}{cell}", " ".repeat(pad)));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&HEADERS.map(String::from)));
        for (r, v) in rows.iter().zip(&group.variants) {
            out.push_str(&line(r));
            for note in notes(v) {
                out.push_str(&format!("      ! {note}\n"));
            }
        }
        out.push('\n');
    }
    out
}

fn row(v: &VariantSummary) -> [String; 9] {
    let dash = || "—".to_string();
    let bytes = |x: Option<f64>| x.map_or_else(dash, format::bytes);
    let wall = match (v.wall_median, v.wall_min, v.wall_max) {
        (Some(m), Some(lo), Some(hi)) if v.runs - v.failed > 1 => {
            format!("{} ({:.3}…{:.3})", format::seconds(m), lo, hi)
        }
        (Some(m), _, _) => format::seconds(m),
        _ => dash(),
    };
    [
        v.variant.clone(),
        wall,
        v.throughput_median.map_or_else(dash, format::rate),
        bytes(v.peak_pss_median),
        bytes(v.mean_pss_median),
        bytes(v.peak_rss_median),
        bytes(v.mean_rss_median),
        v.wall_ratio.map_or_else(dash, format::ratio),
        v.peak_pss_ratio.map_or_else(dash, format::ratio),
    ]
}

/// Problems a reader must not miss: failed runs, an allocator that was not really loaded.
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
