//! Memory at each marker: the tree's RSS and PSS per event, per variant.
use std::collections::BTreeMap;

use runner::results_dir::MarkerRow;
use runner::RunRecord;

use super::*;
use crate::document::chart::{palette, Axis, Chart, Line, Unit};
use crate::document::{Block, Section};
use crate::run_data::RunData;

pub(super) fn per_event(data: &RunData) -> Option<Section> {
    if data.markers.is_empty() {
        return None;
    }
    let colors = colors(data);
    // x = the marker label, in order of first appearance (runs print the same events).
    let mut labels: Vec<String> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &data.markers {
        if !index.contains_key(m.label.as_str()) {
            index.insert(&m.label, labels.len());
            labels.push(m.label.clone());
        }
    }
    let runs: Vec<&RunRecord> = data.results.runs.iter().collect();
    let runs = in_legend_order(data, &runs);
    let bold = median_runs(&runs);
    let repeats = data.results.repeats.max(1) as usize;
    let mut s = Section::new("events", "Memory per event");
    s.push(Block::Paragraph(format!(
        "Tree totals at each output line matching the marker regex {}; x is the marker's label.",
        data.results.marker.clone().unwrap_or_default()
    )));
    for (metric, name, pick) in [
        (
            "pss",
            "PSS",
            (|m: &MarkerRow| m.pss) as fn(&MarkerRow) -> Option<u64>,
        ),
        ("rss", "RSS", |m| m.rss),
        ("vss", "VSS", |m| m.vss),
    ] {
        let lines = runs
            .iter()
            .map(|run| Line {
                label: format!("{}{}", run_label(run), params_suffix(run, data)),
                points: data
                    .markers
                    .iter()
                    .filter(|m| m.run == run.index)
                    .filter_map(|m| Some((index[m.label.as_str()] as f64, pick(m)? as f64)))
                    .collect(),
                color: colors
                    .get(&run.variant)
                    .cloned()
                    .unwrap_or_else(|| palette(0)),
                emphasis: emphasis(run, &bold, repeats),
            })
            .filter(|l| !l.points.is_empty())
            .collect();
        let groups: BTreeMap<String, String> = runs
            .iter()
            .map(|run| {
                let suffix = params_suffix(run, data);
                (
                    format!("{}{suffix}", run_label(run)),
                    format!("{}{suffix}", run.variant),
                )
            })
            .collect();
        let mut chart = Chart::from_lines(
            format!("{metric}-per-event"),
            format!("{name} per event"),
            Axis::new("event (marker label)", Unit::Plain),
            Axis::new(format!("total {name}"), Unit::Bytes),
            lines,
        );
        chart.x_labels = Some(labels.clone());
        chart.group_by(|s| groups.get(&s.label).cloned());
        s.push_chart(chart);
    }
    Some(s)
}
