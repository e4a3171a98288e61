//! PNG and SVG figures of a document's charts, drawn with plotters at a fixed size
//! ([`FIGURE_WIDTH`] x [`FIGURE_HEIGHT`]), for papers, tickets and terminals without a browser.
//! Bitmap text needs a font: DejaVu Sans is embedded (assets/DejaVuSans.ttf, its licence beside it).
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use crate::document::chart::{Chart, Emphasis, Series};
use crate::document::ticks::Scale;
use crate::document::{Document, IntervalPlot};

pub const FIGURE_WIDTH: u32 = 1200;
pub const FIGURE_HEIGHT: u32 = 700;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FONT_NAME: &str = "sans-serif";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureFormat {
    Png,
    Svg,
}

impl FigureFormat {
    pub fn extension(self) -> &'static str {
        match self {
            FigureFormat::Png => "png",
            FigureFormat::Svg => "svg",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("cannot create the figure directory '{path}': {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot draw the figure '{path}': {message}")]
    Draw { path: PathBuf, message: String },
    #[error("the embedded font cannot be loaded (a build defect)")]
    Font,
}

/// Writes one file per chart of `doc` into `dir` (created if needed), named `CHART_ID.png|svg`;
/// returns the paths written.
pub fn write_figures(
    doc: &Document,
    dir: &Path,
    format: FigureFormat,
) -> Result<Vec<PathBuf>, FigureError> {
    register_font()?;
    std::fs::create_dir_all(dir).map_err(|source| FigureError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for chart in doc.charts() {
        let path = dir.join(format!("{}.{}", chart.id, format.extension()));
        let draw_err = |message: String| FigureError::Draw {
            path: path.clone(),
            message,
        };
        // Drawn into a temporary file renamed over the name (a device or a link's target
        // respected: `safe_output`), so an earlier figure stays whole until the new one is.
        let file = safe_output::WholeFile::create(&path).map_err(|e| draw_err(e.to_string()))?;
        match format {
            FigureFormat::Png => {
                let root = BitMapBackend::new(file.path(), (FIGURE_WIDTH, FIGURE_HEIGHT))
                    .into_drawing_area();
                draw(&root, chart).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            FigureFormat::Svg => {
                let root =
                    SVGBackend::new(file.path(), (FIGURE_WIDTH, FIGURE_HEIGHT)).into_drawing_area();
                draw(&root, chart).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
        }
        file.commit().map_err(|e| draw_err(e.to_string()))?;
        written.push(path);
    }
    for plot in doc.interval_plots() {
        let path = dir.join(format!("{}.{}", plot.id, format.extension()));
        let size = (FIGURE_WIDTH, interval_figure_height(plot));
        let drawn = match format {
            FigureFormat::Png => {
                let root = BitMapBackend::new(&path, size).into_drawing_area();
                draw_intervals(&root, plot).and_then(|()| root.present().map_err(|e| err(&e)))
            }
            FigureFormat::Svg => {
                let root = SVGBackend::new(&path, size).into_drawing_area();
                draw_intervals(&root, plot).and_then(|()| root.present().map_err(|e| err(&e)))
            }
        };
        drawn.map_err(|message| FigureError::Draw {
            path: path.clone(),
            message,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// An interval plot's rows, 18 px each, below its title and above its axis.
const INTERVAL_ROW: u32 = 18;

fn interval_figure_height(plot: &IntervalPlot) -> u32 {
    (110 + INTERVAL_ROW * plot.rows.len() as u32).max(300)
}

/// The HTML page's interval plot (html/intervals.rs) drawn with plotters: names right-aligned on
/// the left, a dot and a whisker per row, the reference as a grey line.
fn draw_intervals<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &IntervalPlot,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let scale = plot.scale();
    let longest = plot.rows.iter().map(|r| r.name.chars().count()).max();
    let left = (longest.unwrap_or(10) as f64 * 7.5 + 16.0).clamp(120.0, 560.0);
    let right = FIGURE_WIDTH as f64 - 160.0;
    let (top, row) = (50.0, INTERVAL_ROW as f64);
    let bottom = top + row * plot.rows.len() as f64;
    let x = |v: f64| (left + (v - scale.min) / (scale.max - scale.min) * (right - left)) as i32;
    let font = |size: u32| (FONT_NAME, size).into_font();
    let text = |s: &str, at: (i32, i32), size: u32, h: HPos| {
        Text::new(
            s.to_string(),
            at,
            font(size).color(&BLACK).pos(Pos::new(h, VPos::Center)),
        )
    };
    root.draw(&text(
        &plot.title,
        (FIGURE_WIDTH as i32 / 2, 22),
        20,
        HPos::Center,
    ))
    .map_err(|e| err(&e))?;
    let grid = RGBColor(221, 221, 221);
    for (t, label) in scale.ticks.iter().zip(&scale.labels) {
        let tx = x(*t);
        root.draw(&PathElement::new(
            vec![(tx, top as i32), (tx, bottom as i32)],
            grid.stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
        root.draw(&text(label, (tx, bottom as i32 + 14), 13, HPos::Center))
            .map_err(|e| err(&e))?;
    }
    root.draw(&text(
        &plot.axis_label,
        (((left + right) / 2.0) as i32, bottom as i32 + 38),
        14,
        HPos::Center,
    ))
    .map_err(|e| err(&e))?;
    if let Some(r) = plot.reference {
        root.draw(&PathElement::new(
            vec![(x(r), top as i32), (x(r), bottom as i32)],
            RGBColor(85, 85, 85).stroke_width(1),
        ))
        .map_err(|e| err(&e))?;
    }
    for (i, r) in plot.rows.iter().enumerate() {
        let cy = (top + row * (i as f64 + 0.5)) as i32;
        let color = parse_color(&r.color);
        root.draw(&text(&r.name, (left as i32 - 8, cy), 13, HPos::Right))
            .map_err(|e| err(&e))?;
        if r.low.is_finite() && r.high.is_finite() {
            let (x0, x1) = (x(r.low), x(r.high));
            for segment in [
                vec![(x0, cy), (x1, cy)],
                vec![(x0, cy - 4), (x0, cy + 4)],
                vec![(x1, cy - 4), (x1, cy + 4)],
            ] {
                root.draw(&PathElement::new(segment, color.stroke_width(2)))
                    .map_err(|e| err(&e))?;
            }
        }
        let radius = if r.strong { 5 } else { 4 };
        root.draw(&Circle::new((x(r.value), cy), radius, color.filled()))
            .map_err(|e| err(&e))?;
        root.draw(&text(&r.note, (right as i32 + 8, cy), 12, HPos::Left))
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

fn register_font() -> Result<(), FigureError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        [FontStyle::Normal, FontStyle::Bold]
            .into_iter()
            .all(|style| plotters::style::register_font(FONT_NAME, style, FONT).is_ok())
    });
    ok.then_some(()).ok_or(FigureError::Font)
}

fn parse_color(hex: &str) -> RGBColor {
    let h = hex.trim_start_matches('#');
    let c = |i: usize| u8::from_str_radix(h.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    RGBColor(c(0), c(2), c(4))
}

/// An axis with our round ticks (`document::ticks`) as its only key points (grid lines and labels).
/// plotters' own `WithKeyPoints` loses the f64 label formatter, hence this wrapper.
struct Ticked<R: Ranged<ValueType = f64>> {
    inner: R,
    ticks: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

/// The points of each unbroken stretch of a series (split at its breaks), positive only on log axes.
fn segments(chart: &Chart, s: &Series) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (i, (x, y)) in chart.x.iter().zip(&s.values).enumerate() {
        if s.breaks.binary_search(&i).is_ok() && !out.last().is_some_and(Vec::is_empty) {
            out.push(Vec::new());
        }
        let Some(y) = y else { continue };
        if (!chart.x_axis.log || *x > 0.0) && (!chart.y_axis.log || *y > 0.0) {
            if let Some(last) = out.last_mut() {
                last.push((*x, *y));
            }
        }
    }
    out.retain(|seg| !seg.is_empty());
    out
}

/// Whether series `i` holds a legend entry: no group, or the first series of its group.
fn in_legend(chart: &Chart, i: usize) -> bool {
    match &chart.series[i].group {
        None => true,
        Some(g) => !chart.series[..i]
            .iter()
            .any(|s| s.group.as_ref() == Some(g)),
    }
}

/// A chart on a linear or log axis each: plotters' coordinate types differ, so [`plot`] is
/// generic over them.
fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| err(&e))?;
    // The same extent and round ticks as the HTML page (document::ticks).
    let (xs, ys) = (chart.x_scale(), chart.y_scale());
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, (FONT_NAME, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(100);
    let lin = |s: &Scale| RangedCoordf64::from(s.min..s.max);
    let log = |s: &Scale| -> LogCoord<f64> { (s.min..s.max).log_scale().into() };
    let axes = Axes {
        chart,
        xs: &xs,
        ys: &ys,
    };
    match (chart.x_axis.log, chart.y_axis.log) {
        (false, false) => plot(&mut builder, &axes, lin(&xs), lin(&ys)),
        (true, false) => plot(&mut builder, &axes, log(&xs), lin(&ys)),
        (false, true) => plot(&mut builder, &axes, lin(&xs), log(&ys)),
        (true, true) => plot(&mut builder, &axes, log(&xs), log(&ys)),
    }
}

fn err(e: &dyn std::fmt::Display) -> String {
    e.to_string()
}

/// A chart and its scales (extent, round ticks and their labels).
struct Axes<'a> {
    chart: &'a Chart,
    xs: &'a Scale,
    ys: &'a Scale,
}

/// The plotting area of a chart, on coordinates `X` and `Y` (linear or log).
type Plot<'a, DB, X, Y> = ChartContext<'a, DB, Cartesian2d<Ticked<X>, Ticked<Y>>>;

/// The mesh, the bands, each series (bars or lines) and the legend.
fn plot<DB, X, Y>(
    builder: &mut ChartBuilder<'_, '_, DB>,
    axes: &Axes<'_>,
    x: X,
    y: Y,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let chart = axes.chart;
    let mut ctx = builder
        .build_cartesian_2d(
            Ticked {
                inner: x,
                ticks: axes.xs.ticks.clone(),
            },
            Ticked {
                inner: y,
                ticks: axes.ys.ticks.clone(),
            },
        )
        .map_err(|e| err(&e))?;
    mesh(&mut ctx, axes)?;
    bands(&mut ctx, axes)?;
    for (si, s) in chart.series.iter().enumerate() {
        if chart.bars || chart.bar_to.is_some() {
            bar_series(&mut ctx, axes, s)?;
        } else {
            line_series(&mut ctx, axes, si)?;
        }
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT_NAME, 15))
        .draw()
        .map_err(|e| err(&e))
}

/// The label of a round tick (no label elsewhere).
fn tick_label(scale: &Scale, v: &f64) -> String {
    scale
        .ticks
        .iter()
        .position(|t| (t - v).abs() <= 1e-9 * t.abs().max(1e-300))
        .map(|i| scale.labels[i].clone())
        .unwrap_or_default()
}

/// The axes, their descriptions and the grid at the round ticks.
fn mesh<DB, X, Y>(ctx: &mut Plot<'_, DB, X, Y>, axes: &Axes<'_>) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (chart, xs, ys) = (axes.chart, axes.xs, axes.ys);
    let x_fmt = |v: &f64| tick_label(xs, v);
    let y_fmt = |v: &f64| tick_label(ys, v);
    ctx.configure_mesh()
        .x_desc(&chart.x_axis.label)
        .y_desc(&chart.y_axis.label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_labels(xs.ticks.len().max(2))
        .y_labels(ys.ticks.len().max(2))
        .label_style((FONT_NAME, 15))
        .axis_desc_style((FONT_NAME, 17))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(|e| err(&e))
}

/// The chart's bands (phases), green and blue in turn, the full height.
fn bands<DB, X, Y>(ctx: &mut Plot<'_, DB, X, Y>, axes: &Axes<'_>) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (y0, y1) = (axes.ys.min, axes.ys.max);
    for (i, band) in axes.chart.bands.iter().enumerate() {
        let fill = if i % 2 == 0 {
            RGBColor(120, 200, 120).mix(0.12)
        } else {
            RGBColor(120, 120, 200).mix(0.12)
        };
        ctx.draw_series(std::iter::once(Rectangle::new(
            [(band.from, y0), (band.to, y1)],
            fill.filled(),
        )))
        .map_err(|e| err(&e))?;
    }
    Ok(())
}

/// The spread of a series (low to high at each x) as whiskers, capped `cap` wide on each side.
fn whiskers(chart: &Chart, s: &Series, color: RGBColor, cap: f64) -> Vec<PathElement<(f64, f64)>> {
    let (Some(low), Some(high)) = (&s.low, &s.high) else {
        return Vec::new();
    };
    chart
        .x
        .iter()
        .zip(low.iter().zip(high))
        .filter_map(|(x, (l, h))| Some((*x, (*l)?, (*h)?)))
        .flat_map(|(x, l, h)| {
            let w = color.stroke_width(2);
            [
                PathElement::new(vec![(x, l), (x, h)], w),
                PathElement::new(vec![(x - cap, l), (x + cap, l)], w),
                PathElement::new(vec![(x - cap, h), (x + cap, h)], w),
            ]
        })
        .collect()
}

/// The colour, opacity and width of a series' lines.
fn stroke(s: &Series) -> (RGBColor, f64, u32) {
    let (alpha, width) = match s.emphasis {
        Emphasis::Bold => (1.0, 3),
        Emphasis::Normal => (1.0, 2),
        Emphasis::Faint => (0.35, 1),
    };
    (parse_color(&s.color), alpha, width)
}

/// A series as bars: a category bar 0.7 wide with its whisker, or a histogram bucket.
fn bar_series<DB, X, Y>(
    ctx: &mut Plot<'_, DB, X, Y>,
    axes: &Axes<'_>,
    s: &Series,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let chart = axes.chart;
    let (x0, x1, y0) = (axes.xs.min, axes.xs.max, axes.ys.min);
    // The right end of a bar starting at `left` one pixel wide at least (a 16 B bucket near 64 KiB
    // on a log axis is a fraction of a pixel, and plotters would draw nothing).
    let pixel = 1.0 / f64::from(FIGURE_WIDTH - 140);
    let at_least_a_pixel = |left: f64| {
        if chart.x_axis.log {
            left * (x1 / x0).powf(pixel)
        } else {
            left + (x1 - x0) * pixel
        }
    };
    let (color, _, _) = stroke(s);
    let overlaid = chart.series.len() > 1;
    let fill = color.mix(if overlaid && !chart.bars { 0.6 } else { 0.85 });
    let mut drawn = Vec::new();
    for (i, (x, v)) in chart.x.iter().zip(&s.values).enumerate() {
        let Some(v) = v else { continue };
        let (left, right) = match &chart.bar_to {
            Some(to) => {
                let left = (if *x > 0.0 { *x } else { x0 }).max(x0);
                (left, to[i].min(x1).max(at_least_a_pixel(left)))
            }
            None => (x - 0.35, x + 0.35),
        };
        drawn.push(Rectangle::new([(left, y0), (right, *v)], fill.filled()));
    }
    let anno = ctx.draw_series(drawn).map_err(|e| err(&e))?;
    anno.label(s.label.as_str())
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], fill.filled()));
    ctx.draw_series(whiskers(chart, s, BLACK, 0.1))
        .map_err(|e| err(&e))?;
    Ok(())
}

/// Series `si` as lines (broken at its gaps) and points, with the spread of repeats at each point
/// of a sweep as whiskers in the line's colour.
fn line_series<DB, X, Y>(
    ctx: &mut Plot<'_, DB, X, Y>,
    axes: &Axes<'_>,
    si: usize,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let chart = axes.chart;
    let s = &chart.series[si];
    let (color, alpha, width) = stroke(s);
    let style = color.mix(alpha).stroke_width(width);
    let cap = (axes.xs.max - axes.xs.min) * 0.006;
    ctx.draw_series(whiskers(chart, s, color, cap))
        .map_err(|e| err(&e))?;
    let segs = segments(chart, s);
    let points: Vec<(f64, f64)> = segs.iter().flatten().copied().collect();
    let lines = if chart.connect { segs } else { Vec::new() };
    let anno = ctx
        .draw_series(lines.into_iter().map(|seg| PathElement::new(seg, style)))
        .map_err(|e| err(&e))?;
    if in_legend(chart, si) {
        let name = s.group.clone().unwrap_or_else(|| s.label.clone());
        anno.label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    if chart.points {
        ctx.draw_series(
            points
                .iter()
                .map(|p| Circle::new(*p, 4, color.mix(alpha).filled())),
        )
        .map_err(|e| err(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::chart::{Axis, Line, Unit};
    use crate::document::{Block, Section};

    #[test]
    fn png_and_svg_of_a_log_chart_have_the_fixed_size() {
        let mut section = Section::new("s", "s");
        section.push(Block::Chart(Chart::from_lines(
            "sizes",
            "Sizes",
            Axis::new("size", Unit::Bytes).log(),
            Axis::new("calls", Unit::Count).log(),
            vec![Line {
                label: "calls".into(),
                points: vec![(16.0, 100.0), (32.0, 0.0), (4096.0, 3.0)],
                color: "#1f77b4".into(),
                emphasis: Emphasis::Bold,
            }],
        )));
        let doc = Document {
            title: "t".into(),
            sections: vec![section],
        };
        let dir = tempfile::tempdir().unwrap();
        let png = write_figures(&doc, dir.path(), FigureFormat::Png).unwrap();
        let bytes = std::fs::read(&png[0]).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let dims = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!((dims(16), dims(20)), (FIGURE_WIDTH, FIGURE_HEIGHT));
        let svg = write_figures(&doc, dir.path(), FigureFormat::Svg).unwrap();
        let text = std::fs::read_to_string(&svg[0]).unwrap();
        assert!(text.contains("<svg") && text.contains("Sizes"));
    }

    /// The page's interval plot is a figure too, as tall as its rows need.
    #[test]
    fn an_interval_plot_is_a_figure_with_a_row_per_item() {
        let rows: Vec<crate::document::IntervalRow> = (0..40)
            .map(|i| crate::document::IntervalRow {
                name: format!("jemalloc:narenas={i}"),
                value: 1.0 + i as f64 / 100.0,
                low: 0.9,
                high: 1.2 + i as f64 / 100.0,
                color: "#1f77b4".into(),
                strong: i == 0,
                note: "2 runs, kept".into(),
            })
            .collect();
        let mut section = Section::new("s", "s");
        section.push(Block::Intervals(IntervalPlot {
            id: "tune-intervals".into(),
            title: "Candidates".into(),
            axis_label: "ratio".into(),
            reference: Some(1.0),
            rows,
        }));
        let doc = Document {
            title: "t".into(),
            sections: vec![section],
        };
        let dir = tempfile::tempdir().unwrap();
        let png = write_figures(&doc, dir.path(), FigureFormat::Png).unwrap();
        assert_eq!(png, vec![dir.path().join("tune-intervals.png")]);
        let bytes = std::fs::read(&png[0]).unwrap();
        let dims = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!(
            (dims(16), dims(20)),
            (FIGURE_WIDTH, 110 + 40 * INTERVAL_ROW)
        );
        let svg = write_figures(&doc, dir.path(), FigureFormat::Svg).unwrap();
        let text = std::fs::read_to_string(&svg[0]).unwrap();
        assert!(text.contains("jemalloc:narenas=39") && text.contains("2 runs, kept"));
    }
}
