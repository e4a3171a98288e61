//! The KSM section of a run's page (`run --ksm`, docs/ksm.md): KSM's counters over time per run with
//! KSM on, the saving against the swept parameter, and ksmd's CPU against `pages_to_scan` when that is
//! swept. Absent when the results have no KSM data, so other pages are unchanged.
use std::collections::{BTreeMap, BTreeSet};

use runner::{median, substitute, RunRecord, KSM_PARAM};

use super::run::{colors, param_order, point_name, run_label, slug, totals};
use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section, Table};
use crate::format;
use crate::run_data::RunData;

/// The knob whose cost (c) is drawn against.
const PAGES_TO_SCAN: &str = "pages_to_scan";

pub(super) fn ksm(data: &RunData) -> Option<Section> {
    let r = &data.results;
    if r.ksm.is_none() && r.ksm_savings.is_empty() && r.runs.iter().all(|run| run.ksm.is_none()) {
        return None;
    }
    let mut s = Section::new("ksm", "KSM: kernel samepage merging");
    let mut intro = String::from(
        "Each variant and point ran with KSM off (the tree not mergeable) and on; the saving is \
         the difference of the measured PSS (docs/ksm.md).",
    );
    if let Some(session) = &r.ksm {
        intro.push_str(&format!(" Tree made mergeable by {}.", session.mechanism));
        if !session.settings.is_empty() {
            let set = session
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            intro.push_str(&format!(" ksmd settings: {set}."));
        }
    }
    s.push(Block::Paragraph(intro));
    savings_table(data, &mut s);
    against_param(data, &mut s);
    cpu_against_pages_to_scan(data, &mut s);
    over_time(data, &mut s);
    (s.blocks.len() > 1).then_some(s)
}

/// The parameters of the sweep other than `ksm`, in order.
fn swept(data: &RunData) -> Vec<String> {
    param_order(data)
        .into_iter()
        .filter(|n| n != KSM_PARAM)
        .collect()
}

fn savings_table(data: &RunData, s: &mut Section) {
    let order = swept(data);
    let dash = || "—".to_string();
    let bytes = |x: Option<f64>| x.map_or_else(dash, format::bytes);
    let rows: Vec<Vec<String>> = data
        .results
        .ksm_savings
        .iter()
        .map(|k| {
            let saved = match (k.saved_mean, k.saved_mean_pct) {
                (Some(b), Some(p)) => format!("{} ({p:.0} %)", format::bytes(b)),
                (Some(b), None) => format::bytes(b),
                _ => dash(),
            };
            vec![
                k.variant.clone(),
                // "all" without a sweep, as in the terminal's table.
                Some(point_name(&k.params, &order))
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "all".into()),
                format!("{}/{}", k.runs_off, k.runs_on),
                format!("{} → {}", bytes(k.mean_pss_off), bytes(k.mean_pss_on)),
                saved,
                format!("{} → {}", bytes(k.peak_pss_off), bytes(k.peak_pss_on)),
                bytes(k.kernel_sharing),
                bytes(k.kernel_merging),
                k.settle_s.map_or_else(dash, format::seconds),
                k.ksmd_cpu_pct.map_or_else(dash, |c| format!("{c:.1} %")),
            ]
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    // Paired columns (off → on) and short headings keep the table within a 1400 px page with the
    // "A: "/"B: " labels of report --compare (tests/ksm.rs measures it in Chromium).
    s.push(Block::Table(Table {
        caption: Some(
            "PSS saved: time-weighted mean PSS with KSM off minus with KSM on (medians over the \
             repeats); the kernel's figures are peaks of the KSM-on runs; settled: time until the \
             tree's merged bytes reached 90 % of their peak"
                .into(),
        ),
        headers: [
            "variant",
            "point",
            "runs off/on",
            "mean PSS off → on",
            "PSS saved",
            "peak PSS off → on",
            "pages_sharing",
            "tree merged",
            "settled",
            "ksmd CPU",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }));
}

/// x of a parameter value: the number, or the value's index when not all values are numbers.
fn x_axis_of(values: &[String]) -> (bool, impl Fn(&str) -> Option<f64> + '_) {
    let numeric = values.iter().all(|v| v.parse::<f64>().is_ok());
    (numeric, move |v: &str| -> Option<f64> {
        if numeric {
            v.parse().ok()
        } else {
            values.iter().position(|x| x == v).map(|i| i as f64)
        }
    })
}

/// (b) Mean PSS off and on, and the saving, against the first swept parameter (not `ksm`).
fn against_param(data: &RunData, s: &mut Section) {
    let order = swept(data);
    let Some(first) = order.first() else {
        return;
    };
    let Some(values) = data
        .results
        .params
        .iter()
        .find(|p| &p.name == first)
        .map(|p| p.values.clone())
    else {
        return;
    };
    let (numeric, x_of) = x_axis_of(&values);
    let colors = colors(data);
    // (variant, other parameters) -> (x, mean off, mean on, saved).
    type Point = (f64, Option<f64>, Option<f64>, Option<f64>);
    let mut lines: BTreeMap<(String, String), Vec<Point>> = BTreeMap::new();
    for k in &data.results.ksm_savings {
        let Some(x) = k.params.get(first).and_then(|v| x_of(v)) else {
            continue;
        };
        lines
            .entry((k.variant.clone(), point_name(&k.params, &order[1..])))
            .or_default()
            .push((x, k.mean_pss_off, k.mean_pss_on, k.saved_mean));
    }
    let label = |variant: &str, rest: &str, what: &str| {
        [variant, rest, what]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let keys: Vec<(String, String)> = lines.keys().cloned().collect();
    let color = |variant: &str, rest: &str| line_color(&colors, &keys, variant, rest);
    let mut mean_lines = Vec::new();
    let mut saved_lines = Vec::new();
    for ((variant, rest), pts) in &lines {
        for (what, emphasis, pick) in [
            (
                "KSM off",
                Emphasis::Faint,
                (|p: &Point| p.1) as fn(&Point) -> Option<f64>,
            ),
            ("KSM on", Emphasis::Bold, |p: &Point| p.2),
        ] {
            mean_lines.push(Line {
                label: label(variant, rest, what),
                points: pts.iter().filter_map(|p| Some((p.0, pick(p)?))).collect(),
                color: color(variant, rest),
                emphasis,
            });
        }
        saved_lines.push(Line {
            label: label(variant, rest, ""),
            points: pts.iter().filter_map(|p| Some((p.0, p.3?))).collect(),
            color: color(variant, rest),
            emphasis: Emphasis::Normal,
        });
    }
    for (id, title, y, chart_lines) in [
        (
            "ksm-mean-pss",
            "Mean PSS with KSM off and on",
            "mean PSS",
            mean_lines,
        ),
        (
            "ksm-saved",
            "PSS saved by KSM (mean off - mean on)",
            "PSS saved",
            saved_lines,
        ),
    ] {
        let mut chart = Chart::from_lines(
            format!("{id}-vs-{}", slug(first)),
            format!("{title} against {first}"),
            Axis::new(first.clone(), Unit::Plain),
            Axis::new(y, Unit::Bytes),
            chart_lines,
        );
        chart.points = true;
        if !numeric {
            chart.x_labels = Some(values.clone());
        }
        s.push_chart(chart);
    }
}

/// (c) ksmd's CPU (median over the KSM-on runs) against `pages_to_scan`, when a `--ksm-set
/// pages_to_scan={NAME}` swept it.
fn cpu_against_pages_to_scan(data: &RunData, s: &mut Section) {
    let Some(setting) = data.results.ksm.as_ref().and_then(|k| {
        k.settings
            .iter()
            .rev()
            .find(|(name, _)| name == PAGES_TO_SCAN)
            .map(|(_, v)| v.clone())
    }) else {
        return;
    };
    let order = swept(data);
    // Lines apart for the parameters pages_to_scan does not follow.
    let rest: Vec<String> = order
        .iter()
        .filter(|n| !setting.contains(&format!("{{{n}}}")))
        .cloned()
        .collect();
    let colors = colors(data);
    let mut cpu: BTreeMap<(String, String), BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    let mut scans: BTreeSet<u64> = BTreeSet::new();
    for run in on_runs(data) {
        let Some(pct) = run.ksm.as_ref().and_then(|k| k.ksmd_cpu_pct) else {
            continue;
        };
        let Ok(scan) = substitute(&setting, &run.params).trim().parse::<u64>() else {
            continue;
        };
        scans.insert(scan);
        cpu.entry((run.variant.clone(), point_name(&run.params, &rest)))
            .or_default()
            .entry(scan)
            .or_default()
            .push(pct);
    }
    if scans.len() < 2 {
        return;
    }
    let keys: Vec<(String, String)> = cpu.keys().cloned().collect();
    let lines = cpu
        .into_iter()
        .map(|((variant, rest), by_scan)| Line {
            color: line_color(&colors, &keys, &variant, &rest),
            label: if rest.is_empty() {
                variant.clone()
            } else {
                format!("{variant} {rest}")
            },
            points: by_scan
                .into_iter()
                .filter_map(|(scan, pcts)| Some((scan as f64, median(&pcts)?)))
                .collect(),
            emphasis: Emphasis::Normal,
        })
        .collect();
    let mut chart = Chart::from_lines(
        "ksmd-cpu-vs-pages_to_scan",
        "ksmd CPU against pages_to_scan (runs with KSM on, median)",
        Axis::new(PAGES_TO_SCAN, Unit::Plain),
        Axis::new("ksmd CPU, % of one core", Unit::Plain),
        lines,
    );
    chart.points = true;
    s.push_chart(chart);
}

/// The variant's colour when the lines differ only by variant; otherwise one colour per line, since
/// lines of one variant at other parameter values would look alike.
fn line_color(
    colors: &BTreeMap<String, String>,
    keys: &[(String, String)],
    variant: &str,
    rest: &str,
) -> String {
    if keys.iter().all(|(_, r)| r.is_empty()) {
        return colors.get(variant).cloned().unwrap_or_else(|| palette(0));
    }
    let i = keys
        .iter()
        .position(|(v, r)| v == variant && r == rest)
        .unwrap_or(0);
    palette(i)
}

/// The runs whose tree was mergeable, in results.json order.
fn on_runs(data: &RunData) -> impl Iterator<Item = &RunRecord> {
    data.results.runs.iter().filter(|r| {
        r.ksm.as_ref().is_some_and(|k| k.merging_enabled)
            || r.params.get(KSM_PARAM).is_some_and(|v| v == "on")
    })
}

/// (a) Per run with KSM on: the tree's merged bytes, the system's pages_sharing and pages_volatile
/// (bytes) and, for scale, the tree's PSS, against the time since the start as in the PSS charts.
fn over_time(data: &RunData, s: &mut Section) {
    let totals = totals(data);
    let order = swept(data);
    for run in on_runs(data) {
        let Some(rows) = totals.get(&run.index) else {
            continue;
        };
        type Pick = fn(&runner::results_dir::SampleRow) -> Option<u64>;
        let series: [(&str, Pick, Emphasis); 4] = [
            (
                "tree merged (ksm_merging)",
                |r| r.ksm.as_ref()?.merging,
                Emphasis::Bold,
            ),
            (
                "pages_sharing",
                |r| r.ksm.as_ref()?.sharing,
                Emphasis::Normal,
            ),
            (
                "pages_volatile",
                |r| r.ksm.as_ref()?.volatile,
                Emphasis::Normal,
            ),
            ("tree PSS", |r| Some(r.pss), Emphasis::Faint),
        ];
        if !rows.iter().any(|r| r.ksm.is_some()) {
            continue;
        }
        let lines = series
            .iter()
            .enumerate()
            .map(|(i, (label, pick, emphasis))| Line {
                label: label.to_string(),
                points: rows
                    .iter()
                    .filter_map(|r| Some((r.t_s, pick(r)? as f64)))
                    .collect(),
                color: palette(i),
                emphasis: *emphasis,
            })
            .collect();
        let point = point_name(&run.params, &order);
        let what = if point.is_empty() {
            run_label(run)
        } else {
            format!("{}, {point}", run_label(run))
        };
        s.push_chart(Chart::from_lines(
            format!("ksm-over-time-{}", run.index),
            format!("KSM over time, run {} ({what})", run.index),
            Axis::new("time since start", Unit::Seconds),
            Axis::new("bytes", Unit::Bytes),
            lines,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner::RunResults;

    #[test]
    fn results_without_ksm_data_have_no_section() {
        let data = RunData {
            dir: "r".into(),
            results: RunResults {
                runs: vec![RunRecord::default()],
                ..RunResults::default()
            },
            samples: Vec::new(),
            markers: Vec::new(),
            compared: Vec::new(),
        };
        assert!(ksm(&data).is_none());
    }
}
