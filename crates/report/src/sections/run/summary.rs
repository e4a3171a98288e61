//! The summary: per point a time table and a memory table (`tables::run_summary`).
use super::*;
use crate::document::{Block, Section, Table};
use crate::run_data::RunData;
use crate::tables::{run_summary, Output};

/// Per point, a time table then a memory table (as the terminal prints them; the columns are
/// `tables::run_summary`'s): one table with every column does not fit 1400 px.
pub(super) fn summary(data: &RunData) -> Section {
    let mut s = Section::new("summary", "Summary");
    let order = param_order(data);
    let throughput = data.results.summary.iter().any(run_summary::has_throughput);
    let unit = data.results.throughput_unit.as_deref();
    for g in &data.results.summary {
        let point = point_name(&g.params, &order);
        let ranked = run_summary::ranking(g);
        let caption = |what: &str| {
            let mut c = what.to_string();
            if !point.is_empty() {
                c = format!("{point} — {c}");
            }
            if let Some(b) = &g.baseline {
                c.push_str(&format!("; ratios: variant / {b} ± one standard deviation"));
            }
            c
        };
        let [time, memory] = run_summary::HTML
            .map(|layout| run_summary::table(g, layout, Output::Html, unit, throughput));
        s.push(Block::Table(Table {
            caption: Some(caption(&format!("time, {ranked}"))),
            ..time
        }));
        s.push(Block::Table(Table {
            caption: Some(caption("memory of the whole tree (medians of the repeats)")),
            ..memory
        }));
    }
    s
}
