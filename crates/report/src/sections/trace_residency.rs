//! A process page's heap residency (`analyze --residency`): what holds the heap's resident pages
//! over time, and the call sites that hold them at the most resident reading
//! (docs/memory-metrics.md, "Heap residency").
use analyze::residency::{ProcessResidency, ResidencyReading};

use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section, Table};
use crate::format;

/// Sites shown in the table.
const MAX_SITES: usize = 10;

/// A figure of a reading.
type Figure = fn(&ResidencyReading) -> u64;

/// The parts of each reading, in the chart's order: (label, value, colour).
const PARTS: [(&str, Figure, usize); 5] = [
    ("resident heap", |r| r.parts.resident, 3),
    ("held by live blocks", |r| r.parts.live_blocks, 0),
    ("free memory only", |r| r.parts.free_only, 1),
    ("allocator metadata", |r| r.parts.metadata, 4),
    ("outside the blocks' mappings", |r| r.parts.outside, 5),
];

/// Adds the chart of the split against time and the sites table of process `i`'s page.
pub(crate) fn push(section: &mut Section, i: usize, r: &ProcessResidency) {
    let mut lines: Vec<Line> = PARTS
        .iter()
        .map(|(label, value, color)| Line {
            label: label.to_string(),
            points: points(r, *value),
            color: palette(*color),
            emphasis: if *color == 3 {
                Emphasis::Bold
            } else {
                Emphasis::Normal
            },
        })
        .collect();
    lines.push(Line {
        label: "live bytes".into(),
        points: points(r, |r| r.parts.live_bytes),
        color: palette(2),
        emphasis: Emphasis::Faint,
    });
    section.push_chart(Chart::from_lines(
        format!("p{i}-residency-by-time"),
        "Heap resident pages by what holds them against time",
        Axis::new("time since process start", Unit::Seconds),
        Axis::new("bytes", Unit::Bytes),
        lines,
    ));
    if let Some(top) = r.readings.iter().max_by_key(|r| r.parts.resident) {
        section.push(Block::Table(sites_table(top)));
    }
}

fn points(r: &ProcessResidency, value: Figure) -> Vec<(f64, f64)> {
    r.readings
        .iter()
        .map(|x| (x.t_ns as f64 / 1e9, value(x) as f64))
        .collect()
}

fn sites_table(top: &ResidencyReading) -> Table {
    let share = |b: u64| {
        if top.parts.resident == 0 {
            "0 %".to_string()
        } else {
            format!("{:.1} %", 100.0 * b as f64 / top.parts.resident as f64)
        }
    };
    Table {
        caption: Some(format!(
            "Call sites holding the heap's resident pages at its most resident reading ({:.3} s: \
             {} resident, {} held by free memory only)",
            top.t_ns as f64 / 1e9,
            format::bytes(top.parts.resident as f64),
            format::bytes(top.parts.free_only as f64),
        )),
        headers: [
            "site",
            "resident (live blocks)",
            "free pages its frees left",
            "share of resident heap",
            "live bytes",
            "live, not resident",
        ]
        .map(String::from)
        .to_vec(),
        rows: top
            .sites
            .iter()
            .take(MAX_SITES)
            .map(|s| {
                vec![
                    s.site.clone(),
                    format::bytes(s.resident as f64),
                    format::bytes(s.free_left as f64),
                    share(s.resident + s.free_left),
                    format::bytes(s.live_bytes as f64),
                    format::bytes(s.live_not_resident as f64),
                ]
            })
            .collect(),
    }
}
