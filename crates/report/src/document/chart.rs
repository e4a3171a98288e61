//! The chart model shared by every renderer: the HTML page draws it with uPlot, the figures module with
//! plotters. A section describes *what* to plot once; each renderer decides *how*.
use serde::Serialize;

/// At most this many points per line of a series over time or calls; longer lines are decimated (min
/// and max of each bucket kept, so peaks survive) to keep the page small and the browser fast.
pub const MAX_POINTS_PER_LINE: usize = 2000;

/// At most this many bars per histogram line. Histograms are never decimated (keeping the minimum and
/// maximum of neighbouring buckets draws a different shape): above this, buckets are merged into wider
/// ones by summing their counts (`merge_bars`), and the chart says so. A trace of 16 B buckets up to
/// 256 KiB has about 16 k non-empty ones, drawn in full.
pub const MAX_HISTOGRAM_BARS: usize = 20_000;

/// How the values of an axis are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Bytes,
    Seconds,
    Count,
    /// Operations or events per second.
    Rate,
    /// A swept parameter or an index: shown as is.
    Plain,
}

#[derive(Debug, Clone, Serialize)]
pub struct Axis {
    pub label: String,
    pub unit: Unit,
    pub log: bool,
}

impl Axis {
    pub fn new(label: impl Into<String>, unit: Unit) -> Axis {
        Axis {
            label: label.into(),
            unit,
            log: false,
        }
    }

    pub fn log(mut self) -> Axis {
        self.log = true;
        self
    }
}

/// How prominent a line is: the median repeat bold, the other repeats faint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Emphasis {
    Normal,
    Bold,
    Faint,
}

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub label: String,
    /// One value per entry of `Chart::x`; None where this line has no point.
    pub values: Vec<Option<f64>>,
    /// CSS colour, "#rrggbb".
    pub color: String,
    pub emphasis: Emphasis,
}

/// A shaded range of x (a trace phase).
#[derive(Debug, Clone, Serialize)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// Unique in a report; also the file name of the figure (`ID.png`).
    pub id: String,
    pub title: String,
    pub x_axis: Axis,
    pub y_axis: Axis,
    /// Sorted ascending.
    pub x: Vec<f64>,
    /// Category axis: `x` holds 0..n and these are the names shown.
    pub x_labels: Option<Vec<String>>,
    pub series: Vec<Series>,
    pub bands: Vec<Band>,
    /// Draw a marker at each point (per-parameter figures, histograms).
    pub points: bool,
    /// Join the points with lines (false for histograms: a line between buckets means nothing).
    pub connect: bool,
}

/// One line before alignment: its own (x, y) points in any order.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: String,
    pub emphasis: Emphasis,
}

impl Chart {
    /// Builds a chart from lines with unrelated x values: x is the union of all (after decimation),
    /// and each series is None where it has no point (the page spans those gaps).
    pub fn from_lines(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
    ) -> Chart {
        Chart::aligned(id, title, x_axis, y_axis, lines, MAX_POINTS_PER_LINE)
    }

    /// A histogram: one unconnected point per bucket (x its low end, y its count), every point kept.
    /// Callers with more than `MAX_HISTOGRAM_BARS` buckets merge them first (`merge_bars`).
    pub fn histogram(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
    ) -> Chart {
        let mut chart = Chart::aligned(id, title, x_axis, y_axis, lines, usize::MAX);
        chart.points = true;
        chart.connect = false;
        chart
    }

    fn aligned(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
        max_points: usize,
    ) -> Chart {
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|mut l| {
                l.points.retain(|(x, y)| x.is_finite() && y.is_finite());
                l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
                l.points = decimate(&l.points, max_points);
                l
            })
            .collect();
        let mut x: Vec<f64> = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .collect();
        x.sort_by(f64::total_cmp);
        x.dedup();
        let series = lines
            .into_iter()
            .map(|l| {
                let mut values = vec![None; x.len()];
                for (px, py) in l.points {
                    if let Ok(i) = x.binary_search_by(|v| v.total_cmp(&px)) {
                        values[i] = Some(py);
                    }
                }
                Series {
                    label: l.label,
                    values,
                    color: l.color,
                    emphasis: l.emphasis,
                }
            })
            .collect();
        Chart {
            id: id.into(),
            title: title.into(),
            x_axis,
            y_axis,
            x,
            x_labels: None,
            series,
            bands: Vec::new(),
            points: false,
            connect: true,
        }
    }

    /// Whether there is anything to draw.
    pub fn has_data(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.values.iter().any(Option::is_some))
    }
}

/// Keeps at most about `max` points: the first and last, and per bucket the minimum and the maximum, in
/// x order, so a short peak is never lost.
pub fn decimate(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let buckets = (max - 2) / 2;
    let inner = &points[1..points.len() - 1];
    let mut out = Vec::with_capacity(max);
    out.push(points[0]);
    for b in 0..buckets {
        let lo = b * inner.len() / buckets;
        let hi = ((b + 1) * inner.len() / buckets)
            .max(lo + 1)
            .min(inner.len());
        let chunk = &inner[lo..hi];
        let (mut imin, mut imax) = (0, 0);
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[imin].1 {
                imin = i;
            }
            if p.1 > chunk[imax].1 {
                imax = i;
            }
        }
        let (a, b) = (imin.min(imax), imin.max(imax));
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out.push(points[points.len() - 1]);
    out
}

/// Histogram bars `(low end, count)` of buckets `width` bytes wide, in increasing order, merged by summing
/// into buckets `width * 2^k` wide, the smallest k leaving at most `max` bars. Returns the bars and the
/// width they have (`width` itself when nothing had to be merged).
pub fn merge_bars(bars: &[(u64, u64)], width: u64, max: usize) -> (Vec<(u64, u64)>, u64) {
    let mut wide = width.max(1);
    loop {
        let merged = merge_into(bars, wide);
        if merged.len() <= max.max(1) || wide > u64::MAX / 2 {
            return (merged, wide);
        }
        wide *= 2;
    }
}

/// `bars` summed into buckets `width` wide, aligned on multiples of `width`.
pub fn merge_into(bars: &[(u64, u64)], width: u64) -> Vec<(u64, u64)> {
    let width = width.max(1);
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(low, count) in bars {
        let start = low - low % width;
        match out.last_mut() {
            Some(last) if last.0 == start => last.1 += count,
            _ => out.push((start, count)),
        }
    }
    out
}

/// A palette readable on white and distinguishable in print; variant i gets colour i.
pub fn palette(i: usize) -> String {
    const COLORS: [&str; 10] = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
        "#7f7f7f", "#bcbd22",
    ];
    COLORS[i % COLORS.len()].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_bounds_the_size_and_keeps_the_peak() {
        let points: Vec<(f64, f64)> = (0..100_000)
            .map(|i| (i as f64, if i == 54_321 { 1e9 } else { (i % 7) as f64 }))
            .collect();
        let out = decimate(&points, 2000);
        assert!(out.len() <= 2000, "{}", out.len());
        assert!(out.iter().any(|p| p.1 == 1e9));
        assert_eq!(out.first(), points.first());
        assert_eq!(out.last(), points.last());
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn merged_bars_keep_every_count_in_uniform_wider_buckets() {
        // 16 B buckets: every one from 0 to 64 KiB, then a few far ones.
        let mut bars: Vec<(u64, u64)> = (0..4096u64).map(|i| (i * 16, 1 + i % 5)).collect();
        bars.extend([(1 << 20, 7), ((1 << 20) + 16, 3), (1 << 30, 1)]);
        let total: u64 = bars.iter().map(|b| b.1).sum();
        assert_eq!(
            merge_bars(&bars, 16, 5000),
            (bars.clone(), 16),
            "few enough"
        );
        let (merged, width) = merge_bars(&bars, 16, 1000);
        assert_eq!(width, 128);
        assert!(merged.len() <= 1000, "{}", merged.len());
        assert_eq!(merged.iter().map(|b| b.1).sum::<u64>(), total);
        assert!(merged.iter().all(|b| b.0 % 128 == 0));
        assert_eq!(merged[0], (0, bars[..8].iter().map(|b| b.1).sum()));
        assert_eq!(merged[merged.len() - 2], (1 << 20, 10));
    }

    #[test]
    fn a_histogram_keeps_every_bar() {
        let points: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, (i % 3) as f64)).collect();
        let chart = Chart::histogram(
            "h",
            "h",
            Axis::new("size", Unit::Bytes),
            Axis::new("requests", Unit::Count),
            vec![Line {
                label: "requests".into(),
                points: points.clone(),
                color: palette(0),
                emphasis: Emphasis::Normal,
            }],
        );
        assert_eq!(chart.x.len(), points.len());
        assert!(chart.points && !chart.connect);
    }

    #[test]
    fn lines_are_aligned_on_the_union_of_x() {
        let line = |label: &str, points: Vec<(f64, f64)>| Line {
            label: label.into(),
            points,
            color: palette(0),
            emphasis: Emphasis::Normal,
        };
        let chart = Chart::from_lines(
            "c",
            "c",
            Axis::new("t", Unit::Seconds),
            Axis::new("b", Unit::Bytes),
            vec![
                line("a", vec![(1.0, 10.0), (0.0, 5.0)]),
                line("b", vec![(0.5, 7.0)]),
            ],
        );
        assert_eq!(chart.x, vec![0.0, 0.5, 1.0]);
        assert_eq!(chart.series[0].values, vec![Some(5.0), None, Some(10.0)]);
        assert_eq!(chart.series[1].values, vec![None, Some(7.0), None]);
    }
}
