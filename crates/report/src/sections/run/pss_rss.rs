//! PSS against RSS of the median run of each variant: the gap between them is the sharing.
use runner::results_dir::SampleRow;

use super::*;
use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section};
use crate::run_data::RunData;

/// Per variant (and point), the PSS and RSS of its median run on one plot: RSS counts shared pages
/// in full in every process, PSS shares them out, so the gap between them is the sharing.
pub(super) fn pss_and_rss(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let points = points(data);
    let colors = colors(data);
    let totals = totals(data);
    let mut s = Section::new("pss-rss", "PSS and RSS per variant");
    s.push(Block::Paragraph(
        "The median run of each variant (by peak PSS): PSS (bold, the variant's colour) and RSS (grey) \
         of the whole tree. RSS counts pages shared between processes once per process, PSS shares \
         them out: the distance between the lines is the sharing."
            .into(),
    ));
    for (i, (params, runs)) in points.iter().enumerate() {
        let point = point_name(params, &order);
        let bold = median_runs(runs);
        for run in in_legend_order(data, runs)
            .into_iter()
            .filter(|r| bold.contains(&r.index))
        {
            let rows = totals.get(&run.index).cloned().unwrap_or_default();
            let line = |label: &str, color: String, emphasis, pick: fn(&SampleRow) -> u64| Line {
                label: label.into(),
                points: rows.iter().map(|r| (r.t_s, pick(r) as f64)).collect(),
                color,
                emphasis,
            };
            let color = colors
                .get(&run.variant)
                .cloned()
                .unwrap_or_else(|| palette(0));
            s.push_chart(Chart::from_sampled_lines(
                format!(
                    "pss-rss-{}{}",
                    slug(&run.variant),
                    chart_suffix(i, points.len())
                ),
                format!(
                    "PSS and RSS of {}{}",
                    run_label(run),
                    if point.is_empty() {
                        String::new()
                    } else {
                        format!(", {point}")
                    }
                ),
                Axis::new("time since start", Unit::Seconds),
                Axis::new("total", Unit::Bytes),
                vec![
                    line("PSS", color, Emphasis::Bold, |r| r.pss),
                    line("RSS", "#7f7f7f".into(), Emphasis::Normal, |r| r.rss),
                ],
                GAP_INTERVALS * data.results.interval_s,
            ));
        }
    }
    (s.blocks.len() > 1).then_some(s)
}
