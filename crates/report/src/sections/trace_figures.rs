//! Which of analyze's metrics (`analyze::metrics`) the trace pages show and how they label them: the
//! columns of the process, thread and phase tables and the timeline charts (the headline figures are in
//! `headlines`). The figures themselves come from the metric tables.
use analyze::metrics::{self, scope_metric, timeline_column, Value};
use analyze::{ScopeReport, TimelinePoint};

use crate::document::chart::{Emphasis, Unit};
use crate::format;

/// The unit a chart or a headline gives a metric.
pub(crate) fn chart_unit(unit: metrics::Unit) -> Unit {
    match unit {
        metrics::Unit::Bytes => Unit::Bytes,
        metrics::Unit::Count | metrics::Unit::Calls => Unit::Count,
        metrics::Unit::Nanoseconds | metrics::Unit::Share => Unit::Plain,
    }
}

/// A column of the process, thread and phase tables.
struct TableColumn {
    header: &'static str,
    metric: &'static str,
    /// Shown as "BYTES in COUNT" with this metric as the count.
    count: Option<&'static str>,
}

const fn col(header: &'static str, metric: &'static str) -> TableColumn {
    TableColumn {
        header,
        metric,
        count: None,
    }
}

const SCOPE_COLUMNS: &[TableColumn] = &[
    col("calls", "calls"),
    col("allocations", "allocations"),
    col("requested (upper)", "requested_bytes"),
    col("cumulated lower", "cumulated_lower_bytes"),
    col("peak live bytes", "peak_live_bytes"),
    col("peak live allocs", "peak_live_allocations"),
    col("median lifetime (calls)", "lifetime_median_calls"),
    TableColumn {
        count: Some("leaked_allocations"),
        ..col("leaked", "leaked_bytes")
    },
];

pub(crate) fn scope_headers(first: &str) -> Vec<String> {
    std::iter::once(first)
        .chain(SCOPE_COLUMNS.iter().map(|c| c.header))
        .map(String::from)
        .collect()
}

pub(crate) fn scope_cells(s: &ScopeReport) -> Vec<String> {
    let cell = |key: &str| {
        let m = scope_metric(key);
        match (m.unit, (m.value)(s)) {
            (_, Value::Missing) => "—".to_string(),
            (metrics::Unit::Bytes, Value::Int(n)) => format::bytes(n as f64),
            (_, Value::Int(n)) => n.to_string(),
            (_, Value::Share(v)) => format!("{:.1}%", v * 100.0),
        }
    };
    SCOPE_COLUMNS
        .iter()
        .map(|c| match c.count {
            Some(count) => format!("{} in {}", cell(c.metric), cell(count)),
            None => cell(c.metric),
        })
        .collect()
}

/// A line of a timeline chart: a column of `analyze::metrics::TIMELINE_COLUMNS`.
pub(crate) struct ChartLine {
    pub label: &'static str,
    pub column: &'static str,
    /// Index in `chart::palette` on a one-trace page.
    pub color: usize,
    /// Faint lines (the extremes within a step) are left out of a comparison.
    pub emphasis: Emphasis,
}

impl ChartLine {
    pub fn value(&self) -> fn(&TimelinePoint) -> u64 {
        timeline_column(self.column).value
    }
}

/// A timeline chart of a process: its id ("live-bytes-by-calls"), title and lines; the y unit is the
/// unit of its first line.
pub(crate) struct TimelineChart {
    pub name: &'static str,
    pub title: &'static str,
    pub lines: &'static [ChartLine],
}

impl TimelineChart {
    pub fn unit(&self) -> Unit {
        chart_unit(timeline_column(self.lines[0].column).unit)
    }
}

const fn line(
    label: &'static str,
    column: &'static str,
    color: usize,
    emphasis: Emphasis,
) -> ChartLine {
    ChartLine {
        label,
        column,
        color,
        emphasis,
    }
}

pub(crate) const TIMELINE_CHARTS: &[TimelineChart] = &[
    TimelineChart {
        name: "live-bytes",
        title: "Live bytes",
        lines: &[
            line("live bytes", "live_bytes", 0, Emphasis::Bold),
            line("max in step", "live_bytes_max", 0, Emphasis::Faint),
            line("min in step", "live_bytes_min", 0, Emphasis::Faint),
        ],
    },
    TimelineChart {
        name: "live-allocations",
        title: "Live allocations",
        lines: &[
            line("live allocations", "live_allocations", 1, Emphasis::Bold),
            line("max in step", "live_allocations_max", 1, Emphasis::Faint),
            line("min in step", "live_allocations_min", 1, Emphasis::Faint),
        ],
    },
    TimelineChart {
        name: "cumulated",
        title: "Cumulated bytes",
        lines: &[
            line(
                "upper bound (requested)",
                "cumulated_upper_bytes",
                3,
                Emphasis::Bold,
            ),
            line("lower bound", "cumulated_lower_bytes", 2, Emphasis::Bold),
        ],
    },
];
