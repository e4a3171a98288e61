//! The figures against a swept parameter: one line per variant.
use std::collections::BTreeMap;

use runner::VariantSummary;

use super::compared::{spread, COMPARED};
use super::*;
use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section};
use crate::run_data::RunData;

pub(super) fn against_params(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let first = order.first()?;
    let colors = colors(data);
    let values: Vec<String> = data.results.params[0].values.clone();
    let numeric = values.iter().all(|v| v.parse::<f64>().is_ok());
    let x_of = |v: &str| -> Option<f64> {
        if numeric {
            v.parse().ok()
        } else {
            values.iter().position(|x| x == v).map(|i| i as f64)
        }
    };
    // One line per variant and per combination of the other parameters: (x, its summary).
    type Point<'a> = (f64, &'a VariantSummary, &'a BTreeMap<String, String>);
    let mut lines: BTreeMap<(String, String), Vec<Point>> = BTreeMap::new();
    for g in &data.results.summary {
        let Some(x) = g.params.get(first).and_then(|v| x_of(v)) else {
            continue;
        };
        let rest = point_name(&g.params, &order[1..]);
        for v in &g.variants {
            lines
                .entry((v.variant.clone(), rest.clone()))
                .or_default()
                .push((x, v, &g.params));
        }
    }
    let mut s = Section::new("parameters", format!("Against {first}"));
    s.push(Block::Paragraph(format!(
        "Medians over the repeats at each value of {first}, one line per variant{}; with repeats, a \
         whisker from the smallest to the largest.",
        if order.len() > 1 {
            " and combination of the other parameters"
        } else {
            ""
        }
    )));
    for c in COMPARED {
        let chart_lines = lines
            .iter()
            .map(|((variant, rest), pts)| Line {
                label: if rest.is_empty() {
                    variant.clone()
                } else {
                    format!("{variant} {rest}")
                },
                points: pts
                    .iter()
                    .filter_map(|(x, v, _)| Some((*x, (c.median)(v)?)))
                    .collect(),
                color: colors.get(variant).cloned().unwrap_or_else(|| palette(0)),
                emphasis: Emphasis::Normal,
            })
            .collect();
        let mut chart = Chart::from_lines(
            format!("{}-vs-{}", c.id, slug(first)),
            format!("{} against {first}", c.title),
            Axis::new(first.clone(), Unit::Plain),
            Axis::new(c.title.to_lowercase(), c.unit),
            chart_lines,
        );
        // The spread of the repeats at each point, as a whisker.
        for (series, ((variant, _), pts)) in chart.series.iter_mut().zip(&lines) {
            let mut low = vec![None; chart.x.len()];
            let mut high = vec![None; chart.x.len()];
            for (x, _, params) in pts {
                let Some((lo, hi)) = spread(data, variant, params, c.of_run) else {
                    continue;
                };
                if let Ok(i) = chart.x.binary_search_by(|v| v.total_cmp(x)) {
                    low[i] = Some(lo);
                    high[i] = Some(hi);
                }
            }
            if low.iter().any(Option::is_some) {
                series.low = Some(low);
                series.high = Some(high);
            }
        }
        chart.points = true;
        if !numeric {
            chart.x_labels = Some(values.clone());
        }
        s.push_chart(chart);
    }
    (s.blocks.len() > 1).then_some(s)
}
