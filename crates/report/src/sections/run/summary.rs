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
        if let Some(note) = kernel_peak_note(g) {
            s.push(Block::Paragraph(note));
        }
    }
    s
}

/// Which variants' peak RSS is, in some runs, the kernel's figure rather than a sample's.
fn kernel_peak_note(group: &runner::Group) -> Option<String> {
    let variants: Vec<String> = group
        .variants
        .iter()
        .filter(|v| v.peak_rss_kernel_runs > 0)
        .map(|v| {
            let ok = v.runs - v.failed.min(v.runs);
            format!("{} ({} of {ok} runs)", v.variant, v.peak_rss_kernel_runs)
        })
        .collect();
    (!variants.is_empty()).then(|| {
        format!(
            "Peak RSS of {}: the kernel's high-water mark of the largest process (wait4), not a sample of the tree: those runs ended before a sample or peaked between two.",
            variants.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use runner::{Group, Ranking, RunResults, VariantSummary};

    use super::*;
    use crate::terminal::run_summary::render_run_table;

    /// The page and the terminal said "ranked by wall time" and "ranked by median wall time" of the
    /// same ranking: they name it in one place now.
    #[test]
    fn the_page_names_the_ranking_as_the_terminal_does() {
        for (ranked_by, phrase) in [
            (Ranking::Wall, "ranked by median wall time"),
            (Ranking::Throughput, "ranked by throughput, highest first"),
        ] {
            let group = Group {
                baseline: Some("glibc".into()),
                ranked_by,
                variants: vec![VariantSummary {
                    variant: "glibc".into(),
                    runs: 1,
                    wall_median: Some(0.5),
                    ..VariantSummary::default()
                }],
                ..Group::default()
            };
            let data = RunData {
                dir: "r".into(),
                results: RunResults {
                    summary: vec![group.clone()],
                    ..RunResults::default()
                },
                samples: Vec::new(),
                markers: Vec::new(),
                compared: Vec::new(),
            };
            let terminal = render_run_table(&[group], &[], None);
            assert!(terminal.contains(&format!("({phrase};")), "{terminal}");
            let Block::Table(time) = &summary(&data).blocks[0] else {
                panic!("the summary starts with its time table");
            };
            let caption = time.caption.clone().unwrap_or_default();
            assert!(
                caption.starts_with(&format!("time, {phrase};")),
                "{caption}"
            );
        }
    }
}
