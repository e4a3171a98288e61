//! PNG and SVG figures of a document's charts, drawn with plotters at a fixed size
//! ([`FIGURE_WIDTH`] x [`FIGURE_HEIGHT`]), for papers, tickets and terminals without a browser.
//! Bitmap text needs a font: DejaVu Sans is embedded (assets/DejaVuSans.ttf, its licence beside it).
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::document::chart::{Chart, Emphasis, Series};
use crate::document::ticks::Scale;
use crate::document::Document;

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
        match format {
            FigureFormat::Png => {
                let root =
                    BitMapBackend::new(&path, (FIGURE_WIDTH, FIGURE_HEIGHT)).into_drawing_area();
                draw(&root, chart).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
            FigureFormat::Svg => {
                let root =
                    SVGBackend::new(&path, (FIGURE_WIDTH, FIGURE_HEIGHT)).into_drawing_area();
                draw(&root, chart).map_err(draw_err)?;
                root.present().map_err(|e| draw_err(e.to_string()))?;
            }
        }
        written.push(path);
    }
    Ok(written)
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

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    // The same extent and round ticks as the HTML page (document::ticks).
    let (xs, ys) = (chart.x_scale(), chart.y_scale());
    let (x0, x1, y0, y1) = (xs.min, xs.max, ys.min, ys.max);
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, (FONT_NAME, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(100);
    let tick_label = |scale: &Scale, v: &f64| {
        scale
            .ticks
            .iter()
            .position(|t| (t - v).abs() <= 1e-9 * t.abs().max(1e-300))
            .map(|i| scale.labels[i].clone())
            .unwrap_or_default()
    };
    let x_fmt = |v: &f64| tick_label(&xs, v);
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
    let y_fmt = |v: &f64| tick_label(&ys, v);
    // Log and linear axes are different coordinate types in plotters, hence four arms.
    macro_rules! plot {
        ($xr:expr, $yr:expr) => {{
            let mut ctx = builder
                .build_cartesian_2d(
                    Ticked {
                        inner: $xr,
                        ticks: xs.ticks.clone(),
                    },
                    Ticked {
                        inner: $yr,
                        ticks: ys.ticks.clone(),
                    },
                )
                .map_err(|e| err(&e))?;
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
                .map_err(|e| err(&e))?;
            for (i, band) in chart.bands.iter().enumerate() {
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
            let overlaid = chart.series.len() > 1;
            for (si, s) in chart.series.iter().enumerate() {
                let color = parse_color(&s.color);
                let (alpha, width) = match s.emphasis {
                    Emphasis::Bold => (1.0, 3),
                    Emphasis::Normal => (1.0, 2),
                    Emphasis::Faint => (0.35, 1),
                };
                let style = color.mix(alpha).stroke_width(width);
                let legend_style = style;
                let mut drawn = Vec::new();
                if chart.bars || chart.bar_to.is_some() {
                    // Bars: a category bar 0.7 wide with its whisker, or a histogram bucket.
                    let fill = color.mix(if overlaid && !chart.bars { 0.6 } else { 0.85 });
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
                    let whiskers: Vec<PathElement<(f64, f64)>> = match (&s.low, &s.high) {
                        (Some(low), Some(high)) => chart
                            .x
                            .iter()
                            .zip(low.iter().zip(high))
                            .filter_map(|(x, (l, h))| Some((*x, (*l)?, (*h)?)))
                            .flat_map(|(x, l, h)| {
                                let w = BLACK.stroke_width(2);
                                [
                                    PathElement::new(vec![(x, l), (x, h)], w),
                                    PathElement::new(vec![(x - 0.1, l), (x + 0.1, l)], w),
                                    PathElement::new(vec![(x - 0.1, h), (x + 0.1, h)], w),
                                ]
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    let anno = ctx.draw_series(drawn).map_err(|e| err(&e))?;
                    anno.label(s.label.as_str()).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 20, y + 6)], fill.filled())
                    });
                    ctx.draw_series(whiskers).map_err(|e| err(&e))?;
                    continue;
                }
                // The spread of repeats at each point of a sweep, in the line's colour.
                let cap = (x1 - x0) * 0.006;
                let whiskers: Vec<PathElement<(f64, f64)>> = match (&s.low, &s.high) {
                    (Some(low), Some(high)) => chart
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
                        .collect(),
                    _ => Vec::new(),
                };
                ctx.draw_series(whiskers).map_err(|e| err(&e))?;
                let segs = segments(chart, s);
                let points: Vec<(f64, f64)> = segs.iter().flatten().copied().collect();
                let lines = if chart.connect { segs } else { Vec::new() };
                let anno = ctx
                    .draw_series(lines.into_iter().map(|seg| PathElement::new(seg, style)))
                    .map_err(|e| err(&e))?;
                if in_legend(chart, si) {
                    let name = s.group.clone().unwrap_or_else(|| s.label.clone());
                    anno.label(name).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], legend_style)
                    });
                }
                if chart.points {
                    ctx.draw_series(
                        points
                            .iter()
                            .map(|p| Circle::new(*p, 4, color.mix(alpha).filled())),
                    )
                    .map_err(|e| err(&e))?;
                }
            }
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .label_font((FONT_NAME, 15))
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    let lin = |a: f64, b: f64| RangedCoordf64::from(a..b);
    let log = |a: f64, b: f64| -> LogCoord<f64> { (a..b).log_scale().into() };
    match (chart.x_axis.log, chart.y_axis.log) {
        (false, false) => plot!(lin(x0, x1), lin(y0, y1)),
        (true, false) => plot!(log(x0, x1), lin(y0, y1)),
        (false, true) => plot!(lin(x0, x1), log(y0, y1)),
        (true, true) => plot!(log(x0, x1), log(y0, y1)),
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
}
