//! The variants side by side: a bar per variant and figure, with the spread of the repeats.
use std::collections::BTreeMap;

use runner::{RunRecord, VariantSummary};

use super::*;
use crate::document::chart::{palette, Axis, Bar, Chart, Unit};
use crate::document::{Block, Section, Table};
use crate::format;
use crate::run_data::RunData;

/// A figure of the variants compared: its name, unit, whether more is better, its median (from
/// results.json's summary) and its value in one run (for the spread).
pub(super) struct Compared {
    pub(super) id: &'static str,
    pub(super) title: &'static str,
    pub(super) unit: Unit,
    pub(super) higher_is_better: bool,
    pub(super) median: fn(&VariantSummary) -> Option<f64>,
    pub(super) of_run: fn(&RunRecord) -> Option<f64>,
}

pub(super) const COMPARED: &[Compared] = &[
    Compared {
        id: "throughput",
        title: "Throughput",
        unit: Unit::Rate,
        higher_is_better: true,
        median: |v| v.throughput_median,
        of_run: |r| r.throughput,
    },
    Compared {
        id: "wall",
        title: "Wall time",
        unit: Unit::Seconds,
        higher_is_better: false,
        median: |v| v.wall_median,
        of_run: |r| Some(r.wall),
    },
    Compared {
        id: "peak-pss",
        title: "Peak PSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.peak_pss_median,
        of_run: |r| Some(r.memory.pss.peak as f64),
    },
    Compared {
        id: "mean-pss",
        title: "Mean PSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.mean_pss_median,
        of_run: |r| Some(r.memory.pss.mean),
    },
    Compared {
        id: "peak-rss",
        title: "Peak RSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.peak_rss_median,
        of_run: |r| r.memory.peak_rss().map(|p| p as f64),
    },
    Compared {
        id: "mean-rss",
        title: "Mean RSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.mean_rss_median,
        of_run: |r| Some(r.memory.rss.mean),
    },
];

/// The smallest and largest value of a figure over the successful runs of a variant at a point,
/// when there are at least two.
pub(super) fn spread(
    data: &RunData,
    variant: &str,
    params: &BTreeMap<String, String>,
    of_run: fn(&RunRecord) -> Option<f64>,
) -> Option<(f64, f64)> {
    let values: Vec<f64> = data
        .results
        .runs
        .iter()
        .filter(|r| r.variant == variant && r.params == *params && r.ending.ok())
        .filter_map(of_run)
        .collect();
    (values.len() > 1).then(|| {
        values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |a, x| {
                (a.0.min(*x), a.1.max(*x))
            })
    })
}

/// The variants side by side: per figure, one bar per variant (its median over the repeats), best
/// first, with the spread of the successful repeats (min to max) as a whisker; and a ranking line.
/// With a swept parameter, the same figures are lines against it (`against_params`).
pub(super) fn compared(data: &RunData) -> Option<Section> {
    // One variant has nothing to be compared with; a sweep has its lines against the parameter.
    if !data.results.params.is_empty()
        || data.results.summary.is_empty()
        || data.results.summary[0].variants.len() < 2
    {
        return None;
    }
    let colors = colors(data);
    let mut s = Section::new("compared", "Variants compared");
    let repeats = data.results.repeats.max(1);
    s.push(Block::Paragraph(format!(
        "Per figure, one bar per variant, best first: the median over its successful runs{}.",
        if repeats > 1 {
            ", the whisker from the smallest to the largest repeat"
        } else {
            ""
        }
    )));
    let group = &data.results.summary[0];
    let mut charts = Vec::new();
    // Ranking table: one column per figure, row i = the i-th best variant.
    let mut headers = vec!["rank".to_string()];
    let mut columns: Vec<Vec<String>> = Vec::new();
    for c in COMPARED {
        let mut bars: Vec<Bar> = group
            .variants
            .iter()
            .filter_map(|v| {
                let median = (c.median)(v)?;
                let spread = spread(data, &v.variant, &group.params, c.of_run);
                let color = colors
                    .get(&v.variant)
                    .cloned()
                    .unwrap_or_else(|| palette(0));
                Some(Bar {
                    name: v.variant.clone(),
                    value: median,
                    spread,
                    color,
                })
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        bars.sort_by(|a, b| {
            if c.higher_is_better {
                b.value.total_cmp(&a.value)
            } else {
                a.value.total_cmp(&b.value)
            }
        });
        headers.push(format!(
            "{} ({} is better)",
            c.title,
            if c.higher_is_better {
                "higher"
            } else {
                "lower"
            }
        ));
        columns.push(
            bars.iter()
                .map(|b| format!("{} {}", b.name, format::format_value(c.unit, b.value)))
                .collect(),
        );
        charts.push(Chart::bars(
            format!("{}-by-variant", c.id),
            format!("{}, best first", c.title),
            Axis::new(c.title.to_lowercase(), c.unit),
            bars,
        ));
    }
    let ranks = columns.iter().map(Vec::len).max().unwrap_or(0);
    s.push(Block::Table(Table {
        caption: Some("Ranking: per figure, the variants from best to worst (medians)".into()),
        headers,
        rows: (0..ranks)
            .map(|i| {
                std::iter::once((i + 1).to_string())
                    .chain(
                        columns
                            .iter()
                            .map(|c| c.get(i).cloned().unwrap_or_default()),
                    )
                    .collect()
            })
            .collect(),
    }));
    for chart in charts {
        s.push_chart(chart);
    }
    (s.blocks.len() > 1).then_some(s)
}
