//! The report of a trace (through `analyze`): per process, live bytes and allocations and the cumulated
//! upper/lower bounds against allocator calls and against time (phases shaded), size histograms on log
//! scales, the lifetime CDF; tables per process, thread and phase.
use analyze::analysis::Bucket;
use analyze::metrics::SIZE_HISTOGRAMS;
use analyze::{FileAnalysis, ProcessReport, TimelinePoint};

use crate::document::chart::{
    merge_bars, merge_into, palette, Axis, Band, Chart, Emphasis, Line, Unit, MAX_HISTOGRAM_BARS,
};
use crate::document::{Block, Document, Reportable, Section, Table};
use crate::format;
use crate::sections::trace_figures::{scope_cells, scope_headers, TIMELINE_CHARTS};
use crate::trace_data::TraceData;

/// Processes drawn in full (the largest by peak live bytes); all are in the table, and the page says
/// when some are left out.
const MAX_PROCESS_SECTIONS: usize = 8;

impl Reportable for TraceData {
    fn document(&self) -> Document {
        let a = &self.file;
        let title = if a.command.is_empty() {
            format!("alloclens trace: {}", self.path.display())
        } else {
            format!("alloclens trace: {}", a.command.join(" "))
        };
        let mut sections = vec![setup(self)];
        sections.extend(whole_tree(self));
        sections.push(processes_table(self));
        for (i, p) in ranked(&a.analysis.processes)
            .into_iter()
            .take(MAX_PROCESS_SECTIONS)
        {
            let mut section = process_section(i, p, self.memory_of(p));
            if let Some(r) = self.residency_of(p) {
                crate::sections::trace_residency::push(&mut section, i, r);
            }
            sections.push(section);
        }
        if let Some(sites) = &a.call_sites {
            sections.extend(crate::sections::trace_sites::sections(sites));
        }
        Document { title, sections }
    }
}

/// Processes (with their index in the analysis) by peak live bytes, then calls, largest first; pid
/// order among equals.
pub(crate) fn ranked(processes: &[ProcessReport]) -> Vec<(usize, &ProcessReport)> {
    let mut out: Vec<(usize, &ProcessReport)> = processes.iter().enumerate().collect();
    out.sort_by(|x, y| {
        let key = |p: &ProcessReport| (p.stats.peak_live_bytes.value, p.stats.calls_total);
        key(y.1).cmp(&key(x.1)).then(x.0.cmp(&y.0))
    });
    out
}

/// The live bytes of all processes together against time since the first one started: each
/// process's timeline over time, placed at its start (`start_unix_ns`), counting 0 before its start
/// and after its last point (its memory went with it).
fn whole_tree(t: &TraceData) -> Option<Section> {
    let processes = &t.file.analysis.processes;
    let t0 = processes.iter().map(|p| p.start_unix_ns).min()?;
    // The sum over processes of one timeline column, as a step function of time since t0.
    let total = |pick: fn(&analyze::TimelinePoint) -> u64| {
        // (time since t0 in s, process, value from then on)
        let mut changes: Vec<(f64, usize, u64)> = Vec::new();
        for (i, p) in processes.iter().enumerate() {
            let at = |t_ns: u64| (p.start_unix_ns - t0 + t_ns) as f64 / 1e9;
            changes.push((at(0), i, 0));
            changes.extend(
                p.timeline_by_time
                    .iter()
                    .map(|pt| (at(pt.t_ns), i, pick(pt))),
            );
            if let Some(last) = p.timeline_by_time.last() {
                changes.push((at(last.t_ns) + 1e-9, i, 0));
            }
        }
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut current = vec![0u64; processes.len()];
        let mut sum: u64 = 0;
        let mut points: Vec<(f64, f64)> = Vec::with_capacity(changes.len());
        for (at, i, value) in changes {
            sum = sum - current[i] + value;
            current[i] = value;
            match points.last_mut() {
                Some(last) if last.0 == at => last.1 = sum as f64,
                _ => points.push((at, sum as f64)),
            }
        }
        points
    };
    let mut s = Section::new("whole-tree", "All processes");
    s.push(Block::Paragraph(format!(
        "Live bytes of all {} process images together, against time since the first one started: \
         each image counts from its start to its last allocator call. The faint line sums each \
         image's largest live bytes within a time step (short peaks that fall between two steps).",
        processes.len()
    )));
    s.push_chart(Chart::from_lines(
        "tree-live-bytes-by-time",
        "Live bytes of all processes against time",
        Axis::new("time since the first process started", Unit::Seconds),
        Axis::new("live bytes", Unit::Bytes),
        vec![
            Line {
                label: "all processes".into(),
                points: total(|pt| pt.live_bytes),
                color: palette(0),
                emphasis: Emphasis::Bold,
            },
            Line {
                label: "max in step".into(),
                points: total(|pt| pt.live_bytes_max),
                color: palette(0),
                emphasis: Emphasis::Faint,
            },
        ],
    ));
    (s.blocks.len() > 1).then_some(s)
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
    let a = &t.file;
    let mut s = Section::new("setup", "Trace");
    if !a.command.is_empty() {
        s.push(Block::Code(a.command.join(" ")));
    }
    let mut facts = vec![
        ("trace".to_string(), t.path.display().to_string()),
        ("allocator".to_string(), a.allocator.clone()),
        (
            "processes".to_string(),
            processes_and_images(&a.analysis.processes),
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

/// "43 (81 process images)": each exec starts a new image of the same process, as analyze counts them.
pub(crate) fn processes_and_images(processes: &[ProcessReport]) -> String {
    let count = analyze::process_count(processes);
    if count == processes.len() {
        return count.to_string();
    }
    format!("{count} ({} process images)", processes.len())
}

fn processes_table(t: &TraceData) -> Section {
    let mut s = Section::new("processes", "Processes");
    let processes = &t.file.analysis.processes;
    s.push(Block::Paragraph(if processes.len() > MAX_PROCESS_SECTIONS {
        format!(
            "By peak live bytes, then calls (click a header to sort by another column). Charts follow \
             for the {MAX_PROCESS_SECTIONS} largest of the {} process images; the others are in this table only \
             (`alloclens analyze TRACE --process PID` reports one in full).",
            processes.len()
        )
    } else {
        "By peak live bytes, then calls (click a header to sort by another column); each has its \
         charts below."
            .into()
    }));
    let mut headers = scope_headers("process");
    headers.insert(1, "ppid".into());
    headers.insert(2, "command".into());
    s.push(Block::Table(Table {
        caption: None,
        headers,
        rows: ranked(processes)
            .into_iter()
            .map(|(_, p)| {
                let mut row = vec![process_name(p), p.ppid.to_string(), p.cmdline.join(" ")];
                row.extend(scope_cells(&p.stats));
                row
            })
            .collect(),
    }));
    s
}

/// A process's page: its charts against allocator calls, then against time, its phases, request
/// sizes, lifetimes and threads.
fn process_section(i: usize, p: &ProcessReport, memory: &[trace::MemorySample]) -> Section {
    let mut s = Section::new(
        format!("process-{i}"),
        format!("Process {}", process_name(p)),
    );
    if p.truncated {
        s.push(Block::Warning(
            "this process's stream is truncated: figures cover what was recorded".into(),
        ));
    }
    for x in [ProcessAxis::calls(p), ProcessAxis::time(p)] {
        for chart in x.timeline_charts(i) {
            s.push_chart(chart);
        }
        if !memory.is_empty() {
            s.push_chart(x.memory_chart(i, memory));
        }
    }
    if let Some(table) = phases_table(p) {
        s.push(table);
    }
    for chart in size_charts(i, p) {
        s.push_chart(chart);
    }
    s.push_chart(lifetime_cdf(i, p));
    s.push(threads_table(p));
    s
}

/// The id of one of process `i`'s charts.
fn chart_id(i: usize, name: &str) -> String {
    format!("p{i}-{name}")
}

fn line(label: &str, points: Vec<(f64, f64)>, color: usize, emphasis: Emphasis) -> Line {
    Line {
        label: label.to_string(),
        points,
        color: palette(color),
        emphasis,
    }
}

/// One x axis of a process's charts, allocator calls or time since the process started: where
/// its timeline points and memory readings fall, and its phases as bands.
struct ProcessAxis<'a> {
    /// In the charts' ids: "calls", "time".
    by: &'static str,
    /// In the charts' titles.
    against: &'static str,
    axis: Axis,
    /// The phases, shaded when there are more than one.
    bands: Vec<Band>,
    points: Vec<(f64, &'a TimelinePoint)>,
    /// Where a memory reading falls on this axis.
    at: fn(&trace::MemorySample) -> f64,
}

impl<'a> ProcessAxis<'a> {
    fn calls(p: &'a ProcessReport) -> Self {
        ProcessAxis {
            by: "calls",
            against: "allocator calls",
            axis: Axis::new("allocator calls", Unit::Count),
            bands: shaded(p.phases.iter().map(|ph| Band {
                from: ph.start_call as f64,
                to: ph.end_call as f64,
                label: ph.name.clone(),
            })),
            points: p
                .timeline_by_calls
                .iter()
                .map(|t| (t.calls as f64, t))
                .collect(),
            at: |m| m.seq as f64,
        }
    }

    fn time(p: &'a ProcessReport) -> Self {
        ProcessAxis {
            by: "time",
            against: "time",
            axis: Axis::new("time since process start", Unit::Seconds),
            bands: shaded(p.phases.iter().map(|ph| Band {
                from: ph.start_ns as f64 / 1e9,
                to: ph.end_ns as f64 / 1e9,
                label: ph.name.clone(),
            })),
            points: p
                .timeline_by_time
                .iter()
                .map(|t| (t.t_ns as f64 / 1e9, t))
                .collect(),
            at: |m| m.t_ns as f64 / 1e9,
        }
    }

    /// One chart per timeline figure (live bytes, allocations, cumulated bounds, ...).
    fn timeline_charts(&self, i: usize) -> Vec<Chart> {
        TIMELINE_CHARTS
            .iter()
            .map(|c| {
                let lines = c
                    .lines
                    .iter()
                    .map(|l| {
                        let value = l.value();
                        let points = self
                            .points
                            .iter()
                            .map(|(x, t)| (*x, value(t) as f64))
                            .collect();
                        line(l.label, points, l.color, l.emphasis)
                    })
                    .collect();
                let mut chart = Chart::from_lines(
                    chart_id(i, &format!("{}-by-{}", c.name, self.by)),
                    format!("{} against {}", c.title, self.against),
                    self.axis.clone(),
                    Axis::new(c.title.to_lowercase(), c.unit()),
                    lines,
                );
                chart.bands = self.bands.clone();
                chart
            })
            .collect()
    }

    /// RSS and heap as recorded, with the live bytes.
    fn memory_chart(&self, i: usize, memory: &[trace::MemorySample]) -> Chart {
        let at = self.at;
        let live = self
            .points
            .iter()
            .map(|(x, t)| (*x, t.live_bytes as f64))
            .collect();
        let rss = memory.iter().map(|m| (at(m), m.rss as f64)).collect();
        let heap = memory
            .iter()
            .filter_map(|m| Some((at(m), m.heap? as f64)))
            .collect();
        let mut chart = Chart::from_lines(
            chart_id(i, &format!("memory-by-{}", self.by)),
            format!(
                "Memory as recorded (RSS, heap) and live bytes against {}",
                self.against
            ),
            self.axis.clone(),
            Axis::new("bytes", Unit::Bytes),
            vec![
                line("RSS", rss, 3, Emphasis::Bold),
                line("heap (private anonymous)", heap, 2, Emphasis::Bold),
                line("live bytes", live, 0, Emphasis::Faint),
            ],
        );
        chart.bands = self.bands.clone();
        chart
    }
}

/// Phases are shaded only when there are several (one phase is the whole axis).
fn shaded(bands: impl Iterator<Item = Band>) -> Vec<Band> {
    let bands: Vec<Band> = bands.collect();
    if bands.len() > 1 {
        bands
    } else {
        Vec::new()
    }
}

fn phases_table(p: &ProcessReport) -> Option<Block> {
    if p.phases.is_empty() {
        return None;
    }
    let mut headers = scope_headers("phase");
    headers.insert(1, "calls range".into());
    Some(Block::Table(Table {
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
    }))
}

fn size_charts(i: usize, p: &ProcessReport) -> Vec<Chart> {
    SIZE_HISTOGRAMS
        .iter()
        .map(|h| {
            size_histogram(
                chart_id(i, &format!("sizes-{}", h.key)),
                &format!("Request sizes, {}", h.buckets_label),
                // Power-of-two buckets (at most 65) are never merged.
                h.width.unwrap_or(0),
                vec![("requests".into(), (h.buckets)(&p.stats.sizes), palette(0))],
            )
        })
        .collect()
}

fn lifetime_cdf(i: usize, p: &ProcessReport) -> Chart {
    let cdf = &p.stats.lifetimes.cdf;
    Chart::from_lines(
        chart_id(i, "lifetime-cdf"),
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
    )
}

fn threads_table(p: &ProcessReport) -> Block {
    Block::Table(Table {
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
    })
}

/// A chart of request-size histograms, one line per `(label, buckets width bytes wide, colour)`, every
/// bucket drawn as its CSV row has it: a bar from its low end to its high end + 1 (`width` 0: power-of-two
/// buckets, [0, 0] then [2^k, 2^(k+1))), height its count. Beyond `MAX_HISTOGRAM_BARS` buckets on a line,
/// all lines are summed into the same wider buckets and the title says so: a histogram is never
/// thinned into another shape.
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
    let merged_width = if width == 0 {
        0
    } else {
        bars.iter()
            .map(|b| merge_bars(b, width, MAX_HISTOGRAM_BARS).1)
            .max()
            .unwrap_or(width)
    };
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
            points: if merged_width == 0 {
                bars
            } else {
                merge_into(&bars, merged_width)
            }
            .into_iter()
            .map(|(low, count)| (low as f64, count as f64))
            .collect(),
            color,
            emphasis: Emphasis::Normal,
        })
        .collect();
    let bucket_end = move |low: f64| match merged_width {
        0 if low == 0.0 => 1.0,
        0 => low * 2.0,
        w => low + w as f64,
    };
    Chart::histogram(
        id,
        title,
        Axis::new("request size", Unit::Bytes).log(),
        Axis::new("requests", Unit::Count).log(),
        lines,
        bucket_end,
    )
}

/// The executable's file name (first word of the command line), "" when unknown.
pub(crate) fn executable(p: &ProcessReport) -> &str {
    p.cmdline
        .first()
        .map_or("", |c| c.rsplit('/').next().unwrap_or(c))
}
