//! The report of a trace (through `analyze`): per process, live bytes and allocations and the cumulated
//! upper/lower bounds against allocator calls and against time (phases shaded), size histograms on log
//! scales, the lifetime CDF; tables per process, thread and phase.
use analyze::analysis::Bucket;
use analyze::metrics::SIZE_HISTOGRAMS;
use analyze::{FileAnalysis, ProcessReport};

use crate::document::chart::{
    merge_bars, merge_into, palette, Axis, Band, Chart, Emphasis, Line, Unit, MAX_HISTOGRAM_BARS,
};
use crate::document::{Block, Document, Reportable, Section, Table};
use crate::format;
use crate::sections::trace_figures::{scope_cells, scope_headers, TIMELINE_CHARTS};
use crate::trace_data::TraceData;

/// Processes drawn in full (the most active ones); all are in the tables.
const MAX_PROCESS_SECTIONS: usize = 8;

impl Reportable for TraceData {
    fn document(&self) -> Document {
        let a = &self.analysis;
        let title = if a.command.is_empty() {
            format!("alloclens trace: {}", self.path.display())
        } else {
            format!("alloclens trace: {}", a.command.join(" "))
        };
        let mut sections = vec![setup(self), processes_table(self)];
        let mut ranked: Vec<(usize, &ProcessReport)> =
            a.analysis.processes.iter().enumerate().collect();
        ranked.sort_by(|x, y| y.1.life_calls.cmp(&x.1.life_calls).then(x.0.cmp(&y.0)));
        ranked.truncate(MAX_PROCESS_SECTIONS);
        ranked.sort_by_key(|(i, _)| *i);
        for (i, p) in ranked {
            sections.push(process_section(i, p));
        }
        if let Some(sites) = &a.call_sites {
            sections.extend(crate::sections::trace_sites::sections(sites));
        }
        Document { title, sections }
    }
}

/// "PID EXE", with the exec number when the pid exec()ed.
pub(crate) fn process_name(p: &ProcessReport) -> String {
    let exe = executable(p);
    if p.exec_index > 0 {
        format!("{} {exe} (exec {})", p.pid, p.exec_index)
    } else {
        format!("{} {exe}", p.pid)
    }
}

fn setup(t: &TraceData) -> Section {
    let a = &t.analysis;
    let mut s = Section::new("setup", "Trace");
    if !a.command.is_empty() {
        s.push(Block::Code(a.command.join(" ")));
    }
    let mut facts = vec![
        ("trace".to_string(), t.path.display().to_string()),
        ("allocator".to_string(), a.allocator.clone()),
        (
            "processes".to_string(),
            a.analysis.processes.len().to_string(),
        ),
        ("recording".to_string(), recording(a)),
    ];
    if !a.analysis.untraced.is_empty() {
        facts.push((
            "programs not traced".into(),
            a.analysis.untraced.len().to_string(),
        ));
    }
    if let Some(phase) = &a.analysis.filters.phase {
        facts.push(("phase filter".into(), phase.clone()));
    }
    if let Some(pid) = a.analysis.filters.process {
        facts.push(("process filter".into(), pid.to_string()));
    }
    s.push(Block::Facts(facts));
    s.push(Block::Paragraph(
        "Cumulated upper bound: the sum of all requested sizes; lower bound: the sum over allocations of \
         their last size (docs/metrics.md). Lifetimes are counted in allocator calls of the process."
            .into(),
    ));
    for w in &a.analysis.warnings {
        s.push(Block::Warning(w.clone()));
    }
    for u in &a.analysis.untraced {
        s.push(Block::Warning(format!(
            "not traced (none of its calls are counted): {}",
            analyze::describe_untraced(u)
        )));
    }
    s
}

/// Whether the recorder finished the trace (wrote its trailer).
pub(crate) fn recording(a: &FileAnalysis) -> String {
    if a.analysis.recorder_finished {
        "finished".into()
    } else {
        "UNFINISHED: no trailer (the recorder was killed or crashed, or the file was cut)".into()
    }
}

fn processes_table(t: &TraceData) -> Section {
    let mut s = Section::new("processes", "Processes");
    let mut headers = scope_headers("process");
    headers.insert(1, "ppid".into());
    headers.insert(2, "command".into());
    s.push(Block::Table(Table {
        caption: None,
        headers,
        rows: t
            .analysis
            .analysis
            .processes
            .iter()
            .map(|p| {
                let mut row = vec![process_name(p), p.ppid.to_string(), p.cmdline.join(" ")];
                row.extend(scope_cells(&p.stats));
                row
            })
            .collect(),
    }));
    s
}

fn process_section(i: usize, p: &ProcessReport) -> Section {
    let id = |name: &str| format!("p{i}-{name}");
    let mut s = Section::new(
        format!("process-{i}"),
        format!("Process {}", process_name(p)),
    );
    if p.truncated {
        s.push(Block::Warning(
            "this process's stream is truncated: figures cover what was recorded".into(),
        ));
    }
    let line = |label: &str, points: Vec<(f64, f64)>, color: usize, emphasis| Line {
        label: label.to_string(),
        points,
        color: palette(color),
        emphasis,
    };
    for (by, x_axis, bands, xs) in [
        (
            "calls",
            Axis::new("allocator calls", Unit::Count),
            p.phases
                .iter()
                .map(|ph| Band {
                    from: ph.start_call as f64,
                    to: ph.end_call as f64,
                    label: ph.name.clone(),
                })
                .collect::<Vec<_>>(),
            p.timeline_by_calls
                .iter()
                .map(|t| (t.calls as f64, t))
                .collect::<Vec<_>>(),
        ),
        (
            "time",
            Axis::new("time since process start", Unit::Seconds),
            p.phases
                .iter()
                .map(|ph| Band {
                    from: ph.start_ns as f64 / 1e9,
                    to: ph.end_ns as f64 / 1e9,
                    label: ph.name.clone(),
                })
                .collect(),
            p.timeline_by_time
                .iter()
                .map(|t| (t.t_ns as f64 / 1e9, t))
                .collect(),
        ),
    ] {
        let bands = if bands.len() > 1 { bands } else { Vec::new() };
        let against = if by == "calls" {
            "allocator calls"
        } else {
            "time"
        };
        for c in TIMELINE_CHARTS {
            let lines = c
                .lines
                .iter()
                .map(|l| {
                    let value = l.value();
                    let points = xs.iter().map(|(x, t)| (*x, value(t) as f64)).collect();
                    line(l.label, points, l.color, l.emphasis)
                })
                .collect();
            let mut chart = Chart::from_lines(
                id(&format!("{}-by-{by}", c.name)),
                format!("{} against {against}", c.title),
                x_axis.clone(),
                Axis::new(c.title.to_lowercase(), c.unit()),
                lines,
            );
            chart.bands = bands.clone();
            s.push_chart(chart);
        }
    }
    if !p.phases.is_empty() {
        let mut headers = scope_headers("phase");
        headers.insert(1, "calls range".into());
        s.push(Block::Table(Table {
            caption: Some("Phases (shaded in the charts)".into()),
            headers,
            rows: p
                .phases
                .iter()
                .map(|ph| {
                    let mut row = vec![
                        ph.name.clone(),
                        format!("{}…{}", ph.start_call, ph.end_call),
                    ];
                    row.extend(scope_cells(&ph.stats));
                    row
                })
                .collect(),
        }));
    }
    for h in SIZE_HISTOGRAMS {
        s.push_chart(size_histogram(
            id(&format!("sizes-{}", h.key)),
            &format!("Request sizes, {}", h.buckets_label),
            // Power-of-two buckets (at most 65) are never merged.
            h.width.unwrap_or(1),
            vec![("requests".into(), (h.buckets)(&p.stats.sizes), palette(0))],
        ));
    }
    let cdf = &p.stats.lifetimes.cdf;
    s.push_chart(Chart::from_lines(
        id("lifetime-cdf"),
        "Lifetime CDF (fraction of allocations freed within x calls)",
        Axis::new("lifetime, allocator calls", Unit::Count).log(),
        Axis::new("fraction of allocations", Unit::Plain),
        vec![line(
            "fraction",
            cdf.iter()
                .map(|c| (c.below_calls.max(1) as f64, c.fraction))
                .collect(),
            4,
            Emphasis::Bold,
        )],
    ));
    s.push(Block::Table(Table {
        caption: Some("Threads".into()),
        headers: scope_headers("thread"),
        rows: p
            .threads
            .iter()
            .map(|t| {
                let mut row = vec![t.tid.to_string()];
                row.extend(scope_cells(&t.stats));
                row
            })
            .collect(),
    }));
    s
}

/// A chart of request-size histograms, one line per `(label, buckets width bytes wide, colour)`, every
/// bucket drawn as its CSV row has it (x = low end, at least 1 for the log axis; y = count). Beyond
/// `MAX_HISTOGRAM_BARS` buckets on a line, all lines are summed into the same wider buckets and the
/// title says so: a histogram is never thinned into another shape.
pub(crate) fn size_histogram(
    id: String,
    title: &str,
    width: u64,
    lines: Vec<(String, &[Bucket], String)>,
) -> Chart {
    let bars: Vec<Vec<(u64, u64)>> = lines
        .iter()
        .map(|(_, buckets, _)| buckets.iter().map(|b| (b.low, b.count)).collect())
        .collect();
    let merged_width = bars
        .iter()
        .map(|b| merge_bars(b, width, MAX_HISTOGRAM_BARS).1)
        .max()
        .unwrap_or(width);
    let title = if merged_width > width {
        format!(
            "{title}, merged into {} buckets (more than {MAX_HISTOGRAM_BARS} non-empty ones)",
            format::bytes(merged_width as f64)
        )
    } else {
        title.to_string()
    };
    let lines = lines
        .into_iter()
        .zip(bars)
        .map(|((label, _, color), bars)| Line {
            label,
            points: merge_into(&bars, merged_width)
                .into_iter()
                .map(|(low, count)| (low.max(1) as f64, count as f64))
                .collect(),
            color,
            emphasis: Emphasis::Normal,
        })
        .collect();
    Chart::histogram(
        id,
        title,
        Axis::new("size (bucket low end)", Unit::Bytes).log(),
        Axis::new("requests", Unit::Count).log(),
        lines,
    )
}

/// The executable's file name (first word of the command line), "" when unknown.
pub(crate) fn executable(p: &ProcessReport) -> &str {
    p.cmdline
        .first()
        .map_or("", |c| c.rsplit('/').next().unwrap_or(c))
}
