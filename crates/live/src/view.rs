//! Draws the state on one screen, every panel readable at 80x24 and without colour: each series
//! of the chart has its own mark (named beside its figure), the colours only help.
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Table, Wrap,
};
use ratatui::Frame;

use watch::WatchSample;

use crate::app::{App, Ending, OnQuit, SortKey};
use crate::format::{bytes, duration, signed_bytes};

/// One series of the chart: its name, its mark, its colour, its value in a sample.
struct Series {
    name: &'static str,
    mark: &'static str,
    marker: Marker,
    color: Color,
    value: fn(&WatchSample) -> Option<u64>,
}

/// Drawn in this order: the last on top.
const SERIES: [Series; 5] = [
    Series {
        name: "PSS",
        mark: "⠿",
        marker: Marker::Braille,
        color: Color::Blue,
        value: |s| Some(s.pss),
    },
    Series {
        name: "heap RSS",
        mark: "▄",
        marker: Marker::Bar,
        color: Color::Yellow,
        value: |s| Some(s.heap),
    },
    Series {
        name: "free",
        mark: "▀",
        marker: Marker::HalfBlock,
        color: Color::Magenta,
        value: |s| s.free_resident,
    },
    Series {
        name: "live",
        mark: "█",
        marker: Marker::Block,
        color: Color::Green,
        value: |s| s.live_bytes.or(s.handed_out),
    },
    Series {
        name: "RSS",
        mark: "•",
        marker: Marker::Dot,
        color: Color::Red,
        value: |s| Some(s.rss),
    },
];

const MIB: f64 = 1024.0 * 1024.0;

pub fn draw(frame: &mut Frame, app: &App) {
    let output_rows = if app.output_pane { 6 } else { 1 };
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(9),
            Constraint::Min(4),
            Constraint::Length(3),
            Constraint::Length(output_rows),
            Constraint::Length(1),
        ])
        .split(frame.area());
    frame.render_widget(Paragraph::new(header(app)), rows[0]);
    let top = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Min(30), Constraint::Length(26)])
        .split(rows[1]);
    draw_chart(frame, app, top[0]);
    draw_figures(frame, app, top[1]);
    draw_sites(frame, app, rows[2]);
    draw_verdict(frame, app, rows[3]);
    draw_output(frame, app, rows[4]);
    frame.render_widget(Paragraph::new(keys(app)), rows[5]);
}

fn titled(title: String) -> Block<'static> {
    Block::default().borders(Borders::TOP).title(Span::styled(
        title,
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

fn header(app: &App) -> Line<'static> {
    let t = app.samples.last().map_or(0.0, |s| s.t_s);
    let state = match (&app.ending, app.paused) {
        (Ending::Running, true) => "PAUSED (still collecting)".to_string(),
        (Ending::Running, false) => "running".to_string(),
        (Ending::Asking, _) => "quit: keep collecting?".to_string(),
        (Ending::Quitting, _) if app.collector.is_some() => "stopping the collector...".into(),
        (Ending::Quitting, _) => "ending the watch...".to_string(),
        (Ending::Over(what), _) => what.clone(),
    };
    let pid = app.root_pid.map_or(String::new(), |p| format!("pid {p}  "));
    Line::from(vec![
        Span::styled(
            "alloclens live",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!("  {state}  t {}  {pid}{}", duration(t), app.title)),
    ])
}

fn draw_chart(frame: &mut Frame, app: &App, area: Rect) {
    let first = app.samples.first().map_or(0.0, |s| s.t_s);
    let last = app.samples.last().map_or(1.0, |s| s.t_s).max(first + 1.0);
    let series: Vec<Vec<(f64, f64)>> = SERIES
        .iter()
        .map(|s| {
            app.samples
                .iter()
                .filter_map(|x| (s.value)(x).map(|v| (x.t_s, v as f64 / MIB)))
                .collect()
        })
        .collect();
    let top = series.iter().flatten().map(|p| p.1).fold(1.0_f64, f64::max) * 1.05;
    let datasets = SERIES
        .iter()
        .zip(&series)
        .map(|(s, data)| {
            Dataset::default()
                .marker(s.marker)
                .graph_type(GraphType::Scatter)
                .style(Style::default().fg(s.color))
                .data(data)
        })
        .collect();
    // A collector's view shows its whole history: the count says how much was read.
    let count = if app.collector.is_some() {
        format!(", {} samples", app.samples.len())
    } else {
        String::new()
    };
    let chart = Chart::new(datasets)
        .block(titled(format!("memory over time{count}")))
        .x_axis(
            Axis::default()
                .bounds([first, last])
                .labels([duration(first), duration(last)]),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, top])
                .labels(["0".to_string(), format!("{top:.0} MiB")]),
        );
    frame.render_widget(chart, area);
}

fn draw_figures(frame: &mut Frame, app: &App, area: Rect) {
    let Some(s) = app.samples.last() else {
        frame.render_widget(
            Paragraph::new("waiting for the first sample").block(titled("now".into())),
            area,
        );
        return;
    };
    let row = |mark: &str, name: &str, value: Option<u64>| {
        Line::from(format!(
            "{mark} {name:<9}{:>14}",
            value.map_or("-".to_string(), |v| bytes(v as f64))
        ))
    };
    let mark = |name: &str| {
        SERIES
            .iter()
            .find(|s| s.name == name)
            .map_or(" ", |s| s.mark)
    };
    let lines = vec![
        row(mark("RSS"), "RSS", Some(s.rss)),
        row(mark("PSS"), "PSS", Some(s.pss)),
        row(mark("heap RSS"), "heap RSS", Some(s.heap)),
        row(
            if s.live_bytes.is_some() {
                mark("live")
            } else {
                " "
            },
            "live",
            s.live_bytes,
        ),
        row(
            if s.live_bytes.is_none() {
                mark("live")
            } else {
                " "
            },
            "in use",
            s.handed_out,
        ),
        row(mark("free"), "free", s.free_resident),
        Line::from(format!(
            "  {:<9}{:>14}",
            "blocks",
            s.live_blocks.map_or("-".to_string(), |b| b.to_string())
        )),
        Line::from(format!("  {:<9}{:>14}", "processes", s.processes)),
    ];
    let title = format!("now, t {}", duration(s.t_s));
    frame.render_widget(Paragraph::new(lines).block(titled(title)), area);
}

fn draw_sites(frame: &mut Frame, app: &App, area: Rect) {
    let window = if app.growth_window_s >= 59.5 {
        "1 min".to_string()
    } else {
        duration(app.growth_window_s)
    };
    // An attached agent samples what is allocated from its attach on.
    let since = if app.started_here {
        ""
    } else {
        " since attach"
    };
    let title = format!(
        "call sites{since} by {} (s: sort), growth over {window}, ± std. error",
        app.sort.name()
    );
    if app.sites.is_empty() {
        let mut text = app.sites_note.clone();
        for note in &app.notes {
            text.push_str(&format!("\nalloclens: {note}"));
        }
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: true })
                .block(titled(title)),
            area,
        );
        return;
    }
    let arrow = |key: SortKey, name: &str| {
        if app.sort == key {
            format!("{name}▼")
        } else {
            name.to_string()
        }
    };
    let header = Row::new(vec![
        Cell::from(arrow(SortKey::Site, "site")),
        Cell::from(arrow(SortKey::InUse, "in use")),
        Cell::from("±"),
        Cell::from(arrow(SortKey::Growth, "growth")),
        Cell::from("pid"),
    ])
    .style(Style::default().add_modifier(Modifier::UNDERLINED));
    let rows = app.sites.iter().map(|r| {
        Row::new(vec![
            Cell::from(r.site.clone()),
            Cell::from(bytes(r.inuse)),
            Cell::from(bytes(r.stderr)),
            Cell::from(signed_bytes(r.growth)),
            Cell::from(r.pid.to_string()),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Min(20),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(11),
            Constraint::Length(7),
        ],
    )
    .header(header)
    .block(titled(title));
    frame.render_widget(table, area);
}

fn draw_verdict(frame: &mut Frame, app: &App, area: Rect) {
    let (title, text) = match &app.verdict {
        None => ("verdict so far".to_string(), "no sample yet".to_string()),
        Some(v) => {
            let so_far = if matches!(app.ending, Ending::Over(_)) {
                "verdict (watch.json)"
            } else {
                "verdict so far"
            };
            let why = v.evidence.first().cloned().unwrap_or_default();
            (format!("{so_far}: {}", v.class.name()), why)
        }
    };
    frame.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: true })
            .block(titled(title)),
        area,
    );
}

fn draw_output(frame: &mut Frame, app: &App, area: Rect) {
    if let Ending::Over(_) = app.ending {
        let dir = app.results_dir.display();
        let line = format!("results in {dir}: `alloclens report {dir}` draws them; q: leave");
        if !app.output_pane {
            frame.render_widget(Paragraph::new(line), area);
            return;
        }
        // The pane stays, under the line saying where the results are.
        let lines: Vec<Line> = app
            .output_tail
            .iter()
            .map(|l| Line::from(l.clone()))
            .collect();
        frame.render_widget(Paragraph::new(lines).block(titled(line)), area);
        return;
    }
    let Some(path) = &app.output_path else {
        let line = "program output: where it went before the attach (not shown here)";
        frame.render_widget(Paragraph::new(line), area);
        return;
    };
    if !app.output_pane {
        let line = format!("program output kept in {} (o: show)", path.display());
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let lines: Vec<Line> = app
        .output_tail
        .iter()
        .map(|l| Line::from(l.clone()))
        .collect();
    let title = format!("program output ({}; o: hide)", path.display());
    frame.render_widget(Paragraph::new(lines).block(titled(title)), area);
}

fn keys(app: &App) -> Line<'static> {
    let reversed = Style::default().add_modifier(Modifier::REVERSED);
    if app.ending == Ending::Asking {
        return Line::from("keep collecting with no viewer? k:keep  s/Enter:stop  Esc:back")
            .style(reversed);
    }
    let quit = match (&app.ending, app.started_here, app.collector) {
        (Ending::Over(_), _, _) => "q:leave",
        (_, _, Some((_, OnQuit::Ask))) => "q:quit (keep or stop?)",
        (_, _, Some((_, OnQuit::Keep))) => "q:quit, collecting goes on",
        (_, _, Some((_, OnQuit::Stop))) => "q:quit+stop collecting",
        (_, true, None) => "q:quit+end program",
        (_, false, None) => "q:quit, program runs on",
    };
    let output = if app.output_path.is_some() {
        " o:output"
    } else {
        ""
    };
    let pause = if app.paused { "p:resume" } else { "p:pause" };
    Line::from(format!(
        "{quit}  s:sort  {pause}{output}  threads merged: no per-thread data"
    ))
    .style(reversed)
}
