//! PNG and SVG figures of a document's charts, drawn with plotters at a fixed size
//! ([`FIGURE_WIDTH`] x [`FIGURE_HEIGHT`]), for papers, tickets and terminals without a browser.
//! Bitmap text needs a font: DejaVu Sans is embedded (assets/DejaVuSans.ttf, its licence beside it).
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::document::chart::{Chart, Emphasis};
use crate::document::Document;
use crate::format::format_value;

pub const FIGURE_WIDTH: u32 = 1200;
pub const FIGURE_HEIGHT: u32 = 700;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
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

/// Range of the positive or all values, padded, never empty.
fn range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (if log { 1.0 } else { 0.0 }, 1.0);
    }
    if log {
        return (lo / 1.5, hi * 1.5);
    }
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.04;
    (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (x0, x1) = match &chart.x_labels {
        Some(labels) => (-0.5, labels.len() as f64 - 0.5),
        None => range(chart.x.iter().copied(), chart.x_axis.log, false),
    };
    let (y0, y1) = range(
        chart
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied()),
        chart.y_axis.log,
        true,
    );
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, (FONT_NAME, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(100);
    // A sweep over whole numbers (threads, workers) gets ticks only at whole numbers.
    let whole_x = chart.x.len() <= 64 && chart.x.iter().all(|v| v.fract() == 0.0);
    let x_fmt = |v: &f64| match &chart.x_labels {
        Some(labels) if v.fract().abs() < 1e-9 && *v >= 0.0 => {
            labels.get(*v as usize).cloned().unwrap_or_default()
        }
        Some(_) => String::new(),
        None if whole_x && v.fract().abs() > 1e-9 => String::new(),
        None => format_value(chart.x_axis.unit, *v),
    };
    let y_fmt = |v: &f64| format_value(chart.y_axis.unit, *v);
    // Log and linear axes are different coordinate types in plotters, hence four arms.
    macro_rules! plot {
        ($xr:expr, $yr:expr) => {{
            let mut ctx = builder.build_cartesian_2d($xr, $yr).map_err(|e| err(&e))?;
            ctx.configure_mesh()
                .x_desc(&chart.x_axis.label)
                .y_desc(&chart.y_axis.label)
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .x_labels(chart.x_labels.as_ref().map_or(12, |l| l.len().clamp(2, 24)))
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
            for s in &chart.series {
                let color = parse_color(&s.color);
                let (alpha, width) = match s.emphasis {
                    Emphasis::Bold => (1.0, 3),
                    Emphasis::Normal => (1.0, 2),
                    Emphasis::Faint => (0.35, 1),
                };
                let style = color.mix(alpha).stroke_width(width);
                let points: Vec<(f64, f64)> = chart
                    .x
                    .iter()
                    .zip(&s.values)
                    .filter_map(|(x, y)| Some((*x, (*y)?)))
                    .filter(|(x, y)| {
                        (!chart.x_axis.log || *x > 0.0) && (!chart.y_axis.log || *y > 0.0)
                    })
                    .collect();
                let legend_style = style;
                let line: Vec<(f64, f64)> = if chart.connect {
                    points.clone()
                } else {
                    Vec::new()
                };
                ctx.draw_series(LineSeries::new(line, style))
                    .map_err(|e| err(&e))?
                    .label(s.label.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], legend_style)
                    });
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
    match (chart.x_axis.log, chart.y_axis.log) {
        (false, false) => plot!(x0..x1, y0..y1),
        (true, false) => plot!((x0..x1).log_scale(), y0..y1),
        (false, true) => plot!(x0..x1, (y0..y1).log_scale()),
        (true, true) => plot!((x0..x1).log_scale(), (y0..y1).log_scale()),
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
