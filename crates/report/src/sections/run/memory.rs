//! Memory of the process tree over time: one line per run, PSS, RSS and VSS.
use std::collections::BTreeMap;

use runner::results_dir::SampleRow;
use runner::RunRecord;

use super::*;
use crate::document::chart::{palette, Axis, Chart, Line, Unit};
use crate::document::{Block, Section};
use crate::run_data::RunData;

/// A total of samples.csv over time, one line per run (colour per variant, one legend entry per
/// variant), broken where samples are missing.
fn total_chart(
    data: &RunData,
    id: String,
    title: String,
    runs: &[&RunRecord],
    name: &str,
    pick: fn(&SampleRow) -> u64,
) -> Chart {
    let colors = colors(data);
    let totals = totals(data);
    let bold = median_runs(runs);
    let repeats = data.results.repeats.max(1) as usize;
    let lines = in_legend_order(data, runs)
        .iter()
        .map(|run| Line {
            label: run_label(run),
            points: totals
                .get(&run.index)
                .map(|rows| rows.iter().map(|r| (r.t_s, pick(r) as f64)).collect())
                .unwrap_or_default(),
            color: colors
                .get(&run.variant)
                .cloned()
                .unwrap_or_else(|| palette(0)),
            emphasis: emphasis(run, &bold, repeats),
        })
        .collect();
    let mut chart = Chart::from_sampled_lines(
        id,
        title,
        Axis::new("time since start", Unit::Seconds),
        Axis::new(format!("total {name}"), Unit::Bytes),
        lines,
        GAP_INTERVALS * data.results.interval_s,
    );
    let variant_of: BTreeMap<usize, String> =
        runs.iter().map(|r| (r.index, r.variant.clone())).collect();
    let labels: BTreeMap<String, usize> = runs.iter().map(|r| (run_label(r), r.index)).collect();
    chart.group_by(|s| {
        labels
            .get(&s.label)
            .and_then(|i| variant_of.get(i))
            .cloned()
    });
    chart
}

pub(super) fn memory_over_time(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let points = points(data);
    let repeats = data.results.repeats.max(1);
    let mut s = Section::new("memory", "Memory of the process tree over time");
    s.push(Block::Paragraph(format!(
        "Sum over the command and all its descendants at each sample. One line per run, one colour and \
         one legend entry per variant{}; a line is broken where no sample was taken for more than {} \
         sampling intervals. VSS is the address space reserved, mapped or not.",
        if repeats > 1 {
            format!(
                " (its {repeats} repeats: the one with the median peak PSS bold, the others thin)"
            )
        } else {
            String::new()
        },
        GAP_INTERVALS
    )));
    for (i, (params, runs)) in points.iter().enumerate() {
        let point = point_name(params, &order);
        for (metric, name, pick) in [
            (
                "pss",
                "PSS",
                (|s: &SampleRow| s.pss) as fn(&SampleRow) -> u64,
            ),
            ("rss", "RSS", |s: &SampleRow| s.rss),
            ("vss", "VSS", |s: &SampleRow| s.vss),
        ] {
            let title = if point.is_empty() {
                format!("Total {name} over time")
            } else {
                format!("Total {name} over time, {point}")
            };
            s.push_chart(total_chart(
                data,
                format!("{metric}-over-time{}", chart_suffix(i, points.len())),
                title,
                runs,
                name,
                pick,
            ));
        }
    }
    (s.blocks.len() > 1).then_some(s)
}
