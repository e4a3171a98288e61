//! The content of a report, independent of its output: sections of plain-text blocks and charts.
//! Each kind of result (a run, a trace, later an allocator replay) implements [`Reportable`] in one
//! module of `sections/`; the renderers (`html`, `figures`, ...) know nothing about runs or traces.
//! Blocks hold plain text only, so a renderer escapes everything in one place.
pub mod chart;
pub mod flame;
pub mod ticks;

use chart::Chart;
use flame::{FlameGraph, SiteTable};

pub use crate::tables::Table;

/// A kind of result that can be reported.
pub trait Reportable {
    fn document(&self) -> Document;
}

#[derive(Debug, Clone, Default)]
pub struct Document {
    pub title: String,
    pub sections: Vec<Section>,
}

#[derive(Debug, Clone)]
pub struct Section {
    /// Unique in the document (an HTML anchor).
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone)]
pub enum Block {
    Paragraph(String),
    /// A command line or other verbatim text.
    Code(String),
    /// Something the reader must not miss (failed runs, allocator not loaded).
    Warning(String),
    /// Name/value pairs (machine, options).
    Facts(Vec<(String, String)>),
    Table(Table),
    Chart(Chart),
    /// A flame graph (drawn by the page; figures and Parquet leave it out).
    Flame(FlameGraph),
    /// A table of call sites, sortable in the page, linked to flame graphs.
    Sites(SiteTable),
    /// Values with their intervals, one row each, named on the left (figures leave it out).
    Intervals(IntervalPlot),
}

/// A horizontal interval plot: one row per item, its name on the left, its value as a dot and its
/// interval as a whisker on a common axis, with a reference line (the baseline's 1×). Readable
/// with dozens of rows, where a bar chart's names on the x axis would overlap.
#[derive(Debug, Clone)]
pub struct IntervalPlot {
    pub id: String,
    pub title: String,
    pub axis_label: String,
    /// A vertical line across every row (None: none).
    pub reference: Option<f64>,
    pub rows: Vec<IntervalRow>,
}

impl IntervalPlot {
    /// The value axis: every interval and the reference, widened to round steps.
    pub fn scale(&self) -> ticks::Scale {
        let finite = |v: f64| v.is_finite().then_some(v);
        let lo = self
            .rows
            .iter()
            .filter_map(|r| finite(r.low))
            .chain(self.reference)
            .fold(f64::INFINITY, f64::min);
        let hi = self
            .rows
            .iter()
            .filter_map(|r| finite(r.high))
            .chain(self.reference)
            .fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (0.0, 2.0)
        };
        let step = ticks::step(chart::Unit::Plain, hi - lo, 8, false);
        ticks::linear(
            chart::Unit::Plain,
            (lo / step).floor() * step,
            (hi / step).ceil() * step,
            8,
            false,
            false,
        )
    }
}

#[derive(Debug, Clone)]
pub struct IntervalRow {
    pub name: String,
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// CSS colour, "#rrggbb".
    pub color: String,
    /// Drawn bold (the recommendation).
    pub strong: bool,
    /// Shown after the interval ("dropped", "1 run").
    pub note: String,
}

impl Document {
    pub fn charts(&self) -> impl Iterator<Item = &Chart> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(|b| match b {
                Block::Chart(c) => Some(c),
                _ => None,
            })
        })
    }
}

impl Document {
    pub fn interval_plots(&self) -> impl Iterator<Item = &IntervalPlot> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(|b| match b {
                Block::Intervals(p) => Some(p),
                _ => None,
            })
        })
    }

    pub fn flames(&self) -> impl Iterator<Item = &FlameGraph> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(|b| match b {
                Block::Flame(f) => Some(f),
                _ => None,
            })
        })
    }
}

impl Section {
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> Section {
        Section {
            id: id.into(),
            title: title.into(),
            blocks: Vec::new(),
        }
    }

    pub fn push(&mut self, block: Block) -> &mut Section {
        self.blocks.push(block);
        self
    }

    /// Adds a chart only when it has something to draw (an empty chart is noise, and a test failure).
    pub fn push_chart(&mut self, chart: Chart) -> &mut Section {
        if chart.has_data() {
            self.blocks.push(Block::Chart(chart));
        }
        self
    }

    /// Adds a flame graph only when it has something to draw.
    pub fn push_flame(&mut self, flame: FlameGraph) -> &mut Section {
        if flame.has_data() {
            self.blocks.push(Block::Flame(flame));
        }
        self
    }
}
