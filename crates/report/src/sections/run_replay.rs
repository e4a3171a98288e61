//! The charts of an `alloclens replay` results directory (replay.csv, original.csv beside
//! results.json): RSS and the trace's live bytes against the recorded call axis per variant, the
//! original run's memory on the same axis, and fragmentation (RSS / live) per variant.
use std::collections::BTreeMap;
use std::path::Path;

use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section};
use crate::run_data::RunData;

#[derive(Debug, serde::Deserialize)]
struct Row {
    variant: String,
    repeat: u32,
    seq: u64,
    rss: u64,
    live: u64,
}

#[derive(Debug, serde::Deserialize)]
struct OriginalRow {
    seq: u64,
    anon: u64,
    heap: Option<u64>,
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    let Ok(mut r) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    r.deserialize().filter_map(Result::ok).collect()
}

/// None unless the directory is a replay's.
pub(crate) fn replay(data: &RunData) -> Option<Section> {
    let rows: Vec<Row> = read(&data.dir.join("replay.csv"));
    if rows.is_empty() {
        return None;
    }
    let original: Vec<OriginalRow> = read(&data.dir.join("original.csv"));
    let mut order: Vec<String> = Vec::new();
    for r in &rows {
        if !order.contains(&r.variant) {
            order.push(r.variant.clone());
        }
    }
    let mut by_run: BTreeMap<(usize, u32), Vec<&Row>> = BTreeMap::new();
    for r in &rows {
        let v = order.iter().position(|o| *o == r.variant).unwrap_or(0);
        by_run.entry((v, r.repeat)).or_default().push(r);
    }
    let mut s = Section::new("replay", "Replay: RSS against the live bytes of the trace");
    s.push(Block::Paragraph(
        "Each variant performed the trace's calls; its RSS (anonymous resident memory of the replay \
         process, the driver's own mappings excluded) is drawn on the trace's call axis, beside the \
         bytes the program held live at that call (black, the same for every variant) and, when the \
         trace recorded it, the original run's own memory (grey). Fragmentation is RSS / live bytes."
            .into(),
    ));
    let emphasis = |repeat: u32| {
        if repeat == 0 {
            Emphasis::Normal
        } else {
            Emphasis::Faint
        }
    };
    let mut lines = Vec::new();
    let mut ratios = Vec::new();
    for ((v, repeat), points) in &by_run {
        let label = if *repeat == 0 {
            order[*v].clone()
        } else {
            format!("{} #{}", order[*v], repeat + 1)
        };
        lines.push(Line {
            label: label.clone(),
            points: points
                .iter()
                .map(|r| (r.seq as f64, r.rss as f64))
                .collect(),
            color: palette(*v),
            emphasis: emphasis(*repeat),
        });
        ratios.push(Line {
            label,
            points: points
                .iter()
                .filter(|r| r.live > 0)
                .map(|r| (r.seq as f64, r.rss as f64 / r.live as f64))
                .collect(),
            color: palette(*v),
            emphasis: emphasis(*repeat),
        });
    }
    if let Some(first) = by_run.values().next() {
        lines.push(Line {
            label: "live bytes (trace)".into(),
            points: first
                .iter()
                .map(|r| (r.seq as f64, r.live as f64))
                .collect(),
            color: "#000000".into(),
            emphasis: Emphasis::Bold,
        });
    }
    if !original.is_empty() {
        let heap = original.iter().all(|o| o.heap.is_some());
        lines.push(Line {
            label: if heap {
                "original run: heap".into()
            } else {
                "original run: anonymous".into()
            },
            points: original
                .iter()
                .map(|o| (o.seq as f64, o.heap.unwrap_or(o.anon) as f64))
                .collect(),
            color: "#888888".into(),
            emphasis: Emphasis::Bold,
        });
    }
    s.push_chart(Chart::from_lines(
        "replay-rss",
        "RSS and live bytes against the calls",
        Axis::new("calls (recorded order)", Unit::Count),
        Axis::new("bytes", Unit::Bytes),
        lines,
    ));
    s.push_chart(Chart::from_lines(
        "replay-fragmentation",
        "Fragmentation: RSS / live bytes against the calls",
        Axis::new("calls (recorded order)", Unit::Count),
        Axis::new("RSS / live", Unit::Plain).log(),
        ratios,
    ));
    Some(s)
}
