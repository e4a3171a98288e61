//! `report A.alt --compare B.alt`: two traces on one page, as the git-cinnabar study compared two
//! versions of the same program. Processes are matched by position in pid order (pids differ between
//! recordings), as `alloclens diff` does; each matched pair gets charts with A's and B's lines
//! ("A: live bytes", "B: live bytes"), and a headline table gives both figures with the change.
use analyze::metrics::SIZE_HISTOGRAMS;
use analyze::ProcessReport;

use crate::diff::{diff, Diff, DiffRow};
use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Document, Reportable, Section, Table};
use crate::format::format_value;
use crate::sections::trace::{process_name, recording, size_histogram};
use crate::sections::trace_figures::TIMELINE_CHARTS;
use crate::trace_data::TraceData;

/// Allocating functions compared when both traces have stacks: the top ones by calls of each side.
const SITES_COMPARED: usize = 15;

/// Matched processes drawn (those with the most calls on either side); all are in the tables.
const MAX_PROCESS_SECTIONS: usize = 8;

/// Two analysed traces, A and B, reported as one page.
pub struct TraceComparison {
    pub a: TraceData,
    pub b: TraceData,
}

/// Colours of A's and B's lines; a second shade for a second line of the same side (lower bound).
const A_COLOR: usize = 0;
const B_COLOR: usize = 1;
const A_SECOND: usize = 7;
const B_SECOND: usize = 3;

impl TraceComparison {
    pub fn new(a: TraceData, b: TraceData) -> TraceComparison {
        TraceComparison { a, b }
    }

    /// Every headline figure of both with its change; processes are scoped by position only
    /// ("process #0") so that matched processes meet even when their executables are named differently.
    pub fn headline_diff(&self) -> Diff {
        let by_position = |i: usize, _: &ProcessReport| format!("process #{i}");
        diff(
            &self.a.path.display().to_string(),
            &self.a.headlines_scoped(by_position),
            &self.b.path.display().to_string(),
            &self.b.headlines_scoped(by_position),
        )
    }

    /// Pairs (i, A's process i, B's process i), in pid order.
    fn matched(&self) -> impl Iterator<Item = (usize, &ProcessReport, &ProcessReport)> {
        self.a
            .file
            .analysis
            .processes
            .iter()
            .zip(&self.b.file.analysis.processes)
            .enumerate()
            .map(|(i, (a, b))| (i, a, b))
    }
}

impl Reportable for TraceComparison {
    fn document(&self) -> Document {
        let command = |t: &TraceData| {
            if t.file.command.is_empty() {
                t.path.display().to_string()
            } else {
                t.file.command.join(" ")
            }
        };
        let title = format!(
            "alloclens traces compared: A {} / B {}",
            command(&self.a),
            command(&self.b)
        );
        let mut sections = vec![
            setup(self),
            headlines_section(&self.headline_diff()),
            matching_section(self),
        ];
        let mut ranked: Vec<_> = self.matched().collect();
        ranked.sort_by(|x, y| {
            let calls = |(_, a, b): &(usize, &ProcessReport, &ProcessReport)| {
                a.life_calls.max(b.life_calls)
            };
            calls(y).cmp(&calls(x)).then(x.0.cmp(&y.0))
        });
        ranked.truncate(MAX_PROCESS_SECTIONS);
        ranked.sort_by_key(|(i, _, _)| *i);
        for (i, a, b) in ranked {
            sections.push(process_section(i, a, b));
        }
        if let (Some(a), Some(b)) = (&self.a.file.call_sites, &self.b.file.call_sites) {
            sections.push(sites_section(&crate::site_diff::diff_sites(
                &self.a.path.display().to_string(),
                a,
                &self.b.path.display().to_string(),
                b,
                SITES_COMPARED,
            )));
        }
        Document { title, sections }
    }
}

fn setup(c: &TraceComparison) -> Section {
    let mut s = Section::new("setup", "Traces compared");
    for (name, t) in [("A", &c.a), ("B", &c.b)] {
        let a = &t.file;
        s.push(Block::Facts(vec![
            (name.to_string(), t.path.display().to_string()),
            ("command".to_string(), a.command.join(" ")),
            ("allocator".to_string(), a.allocator.clone()),
            (
                "processes".to_string(),
                super::trace::processes_and_images(&a.analysis.processes),
            ),
            ("recording".to_string(), recording(a)),
        ]));
        for w in &a.analysis.warnings {
            s.push(Block::Warning(format!("{name}: {w}")));
        }
    }
    s.push(Block::Paragraph(
        "Processes are matched by position in pid order (pids differ between recordings): process #i \
         of A is compared with process #i of B, as `alloclens diff` does. Lines of A are labelled \
         \"A: …\", lines of B \"B: …\". Cumulated upper bound: the sum of all requested sizes; lower \
         bound: the sum over allocations of their last size (docs/metrics.md). Lifetimes are counted \
         in allocator calls of the process."
            .into(),
    ));
    s
}

fn headlines_section(d: &Diff) -> Section {
    let mut s = Section::new("headlines", "Headline figures");
    s.push(Block::Table(Table {
        caption: Some(format!("A = {}, B = {}; change = B − A", d.a, d.b)),
        headers: ["scope", "metric", "A", "B", "change", "change %"]
            .map(String::from)
            .to_vec(),
        rows: d.rows.iter().map(diff_cells).collect(),
    }));
    s
}

/// Both traces recorded with stacks: their top allocating functions side by side, as `diff --sites`.
fn sites_section(d: &Diff) -> Section {
    let mut s = Section::new("sites-compared", "Call sites compared");
    s.push(Block::Paragraph(format!(
        "The {SITES_COMPARED} functions with the most allocating calls of each trace (the calls each \
         made itself), matched by function name and module file name across all processes, as \
         `alloclens diff --sites` does."
    )));
    for n in &d.notes {
        s.push(Block::Paragraph(format!("{n}.")));
    }
    s.push(Block::Table(Table {
        caption: Some(format!("A = {}, B = {}; change = B − A", d.a, d.b)),
        headers: [
            "function (module)",
            "metric",
            "A",
            "B",
            "change",
            "change %",
        ]
        .map(String::from)
        .to_vec(),
        rows: d.rows.iter().map(diff_cells).collect(),
    }));
    s
}

/// A figure as a table cell: counts in full (the page has room), other units as the figures show them.
fn value_cell(unit: Unit, v: f64) -> String {
    if unit == Unit::Count && v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format_value(unit, v)
    }
}

fn diff_cells(r: &DiffRow) -> Vec<String> {
    r.cells(value_cell).to_vec()
}

fn matching_section(c: &TraceComparison) -> Section {
    let mut s = Section::new("matching", "Processes matched");
    let (pa, pb) = (&c.a.file.analysis.processes, &c.b.file.analysis.processes);
    let side = |p: Option<&ProcessReport>| match p {
        Some(p) => [
            process_name(p),
            p.cmdline.join(" "),
            p.life_calls.to_string(),
        ],
        None => ["—".to_string(), "not in this trace".to_string(), dash()],
    };
    let rows = (0..pa.len().max(pb.len()))
        .map(|i| {
            let mut row = vec![format!("#{i}")];
            row.extend(side(pa.get(i)));
            row.extend(side(pb.get(i)));
            row
        })
        .collect();
    if pa.len() != pb.len() {
        s.push(Block::Warning(format!(
            "A has {} process images and B {}: only the first {} are matched",
            pa.len(),
            pb.len(),
            pa.len().min(pb.len())
        )));
    }
    s.push(Block::Table(Table {
        caption: Some("By position in pid order".into()),
        headers: [
            "#",
            "A process",
            "A command",
            "A calls",
            "B process",
            "B command",
            "B calls",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }));
    s
}

fn dash() -> String {
    "—".to_string()
}

fn line(label: String, points: Vec<(f64, f64)>, color: usize, emphasis: Emphasis) -> Line {
    Line {
        label,
        points,
        color: palette(color),
        emphasis,
    }
}

/// A's and B's lines of one quantity: `f` gives a side's points.
fn both(
    what: &str,
    a: &ProcessReport,
    b: &ProcessReport,
    f: impl Fn(&ProcessReport) -> Vec<(f64, f64)>,
    colors: (usize, usize),
    emphasis: Emphasis,
) -> [Line; 2] {
    [
        line(format!("A: {what}"), f(a), colors.0, emphasis),
        line(format!("B: {what}"), f(b), colors.1, emphasis),
    ]
}

fn by_calls(p: &ProcessReport, f: fn(&analyze::TimelinePoint) -> u64) -> Vec<(f64, f64)> {
    p.timeline_by_calls
        .iter()
        .map(|t| (t.calls as f64, f(t) as f64))
        .collect()
}

fn process_section(i: usize, a: &ProcessReport, b: &ProcessReport) -> Section {
    let id = |name: &str| format!("p{i}-{name}");
    let mut s = Section::new(
        format!("process-{i}"),
        format!(
            "Process #{i}: A {} / B {}",
            process_name(a),
            process_name(b)
        ),
    );
    for (name, p) in [("A", a), ("B", b)] {
        if p.truncated {
            s.push(Block::Warning(format!(
                "{name}: this process's stream is truncated: figures cover what was recorded"
            )));
        }
    }
    let sides = (A_COLOR, B_COLOR);
    for c in TIMELINE_CHARTS {
        // The faint extremes of a step are left out; a side's first line is drawn in its colour, its
        // second (the lower bound) in its second shade.
        let drawn: Vec<_> = c
            .lines
            .iter()
            .filter(|l| l.emphasis != Emphasis::Faint)
            .collect();
        let mut lines = Vec::new();
        for (side, p) in [("A", a), ("B", b)] {
            for (k, l) in drawn.iter().enumerate() {
                let (colors, emphasis) = if k == 0 {
                    (sides, Emphasis::Bold)
                } else {
                    ((A_SECOND, B_SECOND), Emphasis::Normal)
                };
                let color = if side == "A" { colors.0 } else { colors.1 };
                lines.push(line(
                    format!("{side}: {}", l.label),
                    by_calls(p, l.value()),
                    color,
                    emphasis,
                ));
            }
        }
        s.push_chart(Chart::from_lines(
            id(&format!("{}-by-calls", c.name)),
            format!("{} against allocator calls", c.title),
            Axis::new("allocator calls", Unit::Count),
            Axis::new(c.title.to_lowercase(), c.unit()),
            lines,
        ));
    }
    // The fixed-width histograms only: power-of-two buckets overlaid say little.
    for h in SIZE_HISTOGRAMS.iter().filter(|h| h.width.is_some()) {
        s.push_chart(size_histogram(
            id(&format!("sizes-{}", h.key)),
            &format!("Request sizes, {}", h.buckets_label),
            h.width.unwrap_or(0),
            vec![
                (
                    "A: requests".into(),
                    (h.buckets)(&a.stats.sizes),
                    palette(A_COLOR),
                ),
                (
                    "B: requests".into(),
                    (h.buckets)(&b.stats.sizes),
                    palette(B_COLOR),
                ),
            ],
        ));
    }
    s.push_chart(Chart::from_lines(
        id("lifetime-cdf"),
        "Lifetime CDF (fraction of allocations freed within x calls)",
        Axis::new("lifetime, allocator calls", Unit::Count).log(),
        Axis::new("fraction of allocations", Unit::Plain),
        both(
            "fraction",
            a,
            b,
            |p| {
                p.stats
                    .lifetimes
                    .cdf
                    .iter()
                    .map(|c| (c.below_calls.max(1) as f64, c.fraction))
                    .collect()
            },
            sides,
            Emphasis::Bold,
        )
        .to_vec(),
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_shown_in_full_with_their_sign() {
        let row = |unit, a, b| {
            let d = diff(
                "a",
                &[crate::headlines::Headline {
                    scope: "process #0".into(),
                    metric: "calls".into(),
                    unit,
                    value: Some(a),
                }],
                "b",
                &[crate::headlines::Headline {
                    scope: "process #0".into(),
                    metric: "calls".into(),
                    unit,
                    value: Some(b),
                }],
            );
            diff_cells(&d.rows[0])
        };
        assert_eq!(
            row(Unit::Count, 1_234_567.0, 1_200_000.0),
            [
                "process #0",
                "calls",
                "1234567",
                "1200000",
                "-34567",
                "-2.8%"
            ]
        );
        assert_eq!(row(Unit::Bytes, 1024.0, 3072.0)[4], "+2.00 KiB");
        assert_eq!(row(Unit::Count, 0.0, 5.0)[5], "—", "no percentage of zero");
    }
}
