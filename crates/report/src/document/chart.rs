//! The chart model shared by every renderer: the HTML page draws it with uPlot, the figures module with
//! plotters. A section describes *what* to plot once; each renderer decides *how*.
use serde::Serialize;

use super::ticks::{self, Scale};

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
    /// One value per entry of `Chart::x`; None where this line has no point (the line goes on to
    /// its next point, unless a break lies between).
    pub values: Vec<Option<f64>>,
    /// CSS colour, "#rrggbb".
    pub color: String,
    pub emphasis: Emphasis,
    /// Indices of `Chart::x` where the line is broken: a stretch without samples (`from_sampled_lines`).
    pub breaks: Vec<usize>,
    /// Lines of one group (the repeats of a variant) share one legend entry, named after the group
    /// and held by the group's first series; hiding it hides them all.
    pub group: Option<String>,
    /// The spread around each value (min and max of the repeats), drawn as a whisker.
    pub low: Option<Vec<Option<f64>>>,
    pub high: Option<Vec<Option<f64>>>,
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
    /// A histogram: each value is a bar from its x to this right edge (the bucket's high end + 1).
    pub bar_to: Option<Vec<f64>>,
    /// Bars on a category axis (`x_labels`), one per x, with the spread as whiskers.
    pub bars: bool,
}

/// A bar of a category chart: its name (on the x axis), value, spread (min, max) and colour.
#[derive(Debug, Clone)]
pub struct Bar {
    pub name: String,
    pub value: f64,
    pub spread: Option<(f64, f64)>,
    pub color: String,
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
    /// and each series is None where it has no point (the renderers join the points around it; `from_sampled_lines` marks real gaps).
    pub fn from_lines(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
    ) -> Chart {
        Chart::aligned(id, title, x_axis, y_axis, lines, MAX_POINTS_PER_LINE)
    }

    /// A histogram: one bar per bucket, from its low end (x) to `bucket_end(x)` (its high end + 1),
    /// every bucket kept. Callers with more than `MAX_HISTOGRAM_BARS` buckets merge them first
    /// (`merge_bars`).
    pub fn histogram(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
        bucket_end: impl Fn(f64) -> f64,
    ) -> Chart {
        let mut chart = Chart::aligned(id, title, x_axis, y_axis, lines, usize::MAX);
        chart.connect = false;
        chart.bar_to = Some(chart.x.iter().map(|x| bucket_end(*x)).collect());
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
                    breaks: Vec::new(),
                    group: None,
                    low: None,
                    high: None,
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
            bar_to: None,
            bars: false,
        }
    }

    /// Bars on a category axis: one bar per [`Bar`], in the order given
    /// (best first makes a ranking), each its own series so that it keeps its variant's colour and
    /// legend entry; `(low, high)` is the spread drawn as a whisker.
    pub fn bars(
        id: impl Into<String>,
        title: impl Into<String>,
        y_axis: Axis,
        bars: Vec<Bar>,
    ) -> Chart {
        let n = bars.len();
        let names: Vec<String> = bars.iter().map(|b| b.name.clone()).collect();
        let series = bars
            .into_iter()
            .enumerate()
            .map(|(i, bar)| {
                let at = |v: Option<f64>| {
                    let mut out = vec![None; n];
                    out[i] = v;
                    out
                };
                Series {
                    label: bar.name,
                    values: at(Some(bar.value)),
                    color: bar.color,
                    emphasis: Emphasis::Normal,
                    breaks: Vec::new(),
                    group: None,
                    low: bar.spread.map(|s| at(Some(s.0))),
                    high: bar.spread.map(|s| at(Some(s.1))),
                }
            })
            .collect();
        Chart {
            id: id.into(),
            title: title.into(),
            x_axis: Axis::new("", Unit::Plain),
            y_axis,
            x: (0..n).map(|i| i as f64).collect(),
            x_labels: Some(names),
            series,
            bands: Vec::new(),
            points: false,
            connect: false,
            bar_to: None,
            bars: true,
        }
    }

    /// Like `from_lines`, for sampled lines: each line is broken where two of its consecutive samples
    /// are more than `max_gap` apart in x (a stretch without samples), so no renderer draws a straight
    /// line across it. The gaps are found in the samples before decimation (decimated points are
    /// farther apart than the samples were).
    pub fn from_sampled_lines(
        id: impl Into<String>,
        title: impl Into<String>,
        x_axis: Axis,
        y_axis: Axis,
        lines: Vec<Line>,
        max_gap: f64,
    ) -> Chart {
        let mut cuts: Vec<(usize, f64)> = Vec::new();
        if max_gap > 0.0 {
            for (i, l) in lines.iter().enumerate() {
                let mut xs: Vec<f64> = l
                    .points
                    .iter()
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .map(|p| p.0)
                    .collect();
                xs.sort_by(f64::total_cmp);
                cuts.extend(
                    xs.windows(2)
                        .filter(|w| w[1] - w[0] > max_gap)
                        .map(|w| (i, (w[0] + w[1]) / 2.0)),
                );
            }
        }
        let mut chart = Chart::from_lines(id, title, x_axis, y_axis, lines);
        chart.insert_breaks(cuts);
        chart
    }

    /// Breaks series `i` at x for each `(i, x)`: x joins the axis (the other series have no point
    /// there) and is listed in the series' `breaks`.
    fn insert_breaks(&mut self, cuts: Vec<(usize, f64)>) {
        if cuts.is_empty() {
            return;
        }
        let mut x = self.x.clone();
        x.extend(cuts.iter().map(|c| c.1));
        x.sort_by(f64::total_cmp);
        x.dedup();
        let index = |v: f64| x.binary_search_by(|p| p.total_cmp(&v)).unwrap_or(0);
        let remap = |values: &[Option<f64>], old_x: &[f64]| {
            let mut out = vec![None; x.len()];
            for (ox, v) in old_x.iter().zip(values) {
                out[index(*ox)] = *v;
            }
            out
        };
        for s in &mut self.series {
            s.values = remap(&s.values, &self.x);
            s.low = s.low.as_ref().map(|l| remap(l, &self.x));
            s.high = s.high.as_ref().map(|h| remap(h, &self.x));
            s.breaks = s.breaks.iter().map(|b| index(self.x[*b])).collect();
        }
        for (si, at) in cuts {
            let i = index(at);
            self.series[si].breaks.push(i);
        }
        for s in &mut self.series {
            s.breaks.sort_unstable();
            s.breaks.dedup();
        }
        self.x = x;
    }

    /// Puts each series in the legend group `group(label)`, e.g. the repeats of a variant.
    pub fn group_by(&mut self, group: impl Fn(&Series) -> Option<String>) {
        for s in &mut self.series {
            s.group = group(s);
        }
    }

    /// The extent, ticks and tick labels of the x axis (`ticks`), as every renderer draws them.
    pub fn x_scale(&self) -> Scale {
        if let Some(names) = &self.x_labels {
            return ticks::categories(names);
        }
        let (lo, hi) = extent(
            self.x
                .iter()
                .copied()
                .chain(self.bar_to.iter().flatten().copied()),
            self.x_axis.log,
        );
        if self.x_axis.log {
            // A histogram's first bucket [0, w) starts at w/2 on a log axis (0 is not on it).
            let lo = match &self.bar_to {
                Some(to) => self
                    .x
                    .iter()
                    .zip(to)
                    .map(|(x, t)| if *x > 0.0 { *x } else { t / 2.0 })
                    .fold(f64::INFINITY, f64::min),
                None => lo,
            };
            let mut scale = ticks::log(self.x_axis.unit, lo, hi, ticks::X_TICKS);
            // No tick inside a bucket that starts at 0: it would read as the bucket's low end.
            if let (Some(to), Some(0.0)) = (&self.bar_to, self.x.first()) {
                let first_end = to[0];
                let keep: Vec<bool> = scale.ticks.iter().map(|t| *t >= first_end).collect();
                let mut k = keep.iter();
                scale.ticks.retain(|_| *k.next().unwrap_or(&true));
                let mut k = keep.iter();
                scale.labels.retain(|_| *k.next().unwrap_or(&true));
            }
            return scale;
        }
        let whole = self.x.len() <= 64 && self.x.iter().all(|v| v.fract() == 0.0);
        // Parameter sweeps are padded by half a step so the first and last points are not on the frame.
        let mut scale = ticks::linear(self.x_axis.unit, lo, hi, ticks::X_TICKS, whole, false);
        if self.points && hi > lo {
            let pad = (hi - lo) * 0.04;
            scale.min = lo - pad;
            scale.max = hi + pad;
        }
        scale
    }

    /// The extent, ticks and labels of the value axis: from 0 (linear), round steps, every value
    /// and whisker inside.
    pub fn y_scale(&self) -> Scale {
        let values = self.series.iter().flat_map(|s| {
            s.values
                .iter()
                .chain(s.low.iter().flatten())
                .chain(s.high.iter().flatten())
                .flatten()
                .copied()
        });
        let (lo, hi) = extent(values, self.y_axis.log);
        if self.y_axis.log {
            let mut scale = ticks::log(self.y_axis.unit, lo, hi, ticks::Y_TICKS);
            // A bar as tall as the axis' lowest value would have no height: start below it.
            if self.bar_to.is_some() && scale.min >= lo {
                scale.min = lo / 2.0;
            }
            scale
        } else {
            ticks::linear(self.y_axis.unit, lo, hi, ticks::Y_TICKS, false, true)
        }
    }

    /// Whether there is anything to draw.
    pub fn has_data(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.values.iter().any(Option::is_some))
    }
}

/// The smallest and largest finite values (positive ones only for a log axis); (inf, -inf) if none.
fn extent(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
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
            |x| x + 1.0,
        );
        assert_eq!(chart.x.len(), points.len());
        assert_eq!(chart.bar_to.as_ref().unwrap()[7], 8.0);
        assert!(!chart.connect);
    }

    #[test]
    fn sampled_lines_break_at_real_gaps_only_even_when_decimated() {
        // 30 000 samples 20 ms apart (decimated to 2000 points), with no sample from 100 s to 101 s.
        let points: Vec<(f64, f64)> = (0..30_000)
            .map(|i| i as f64 * 0.02)
            .filter(|t| !(100.0..101.0).contains(t))
            .map(|t| (t, t.sin()))
            .collect();
        let line = |points| Line {
            label: "run".into(),
            points,
            color: palette(0),
            emphasis: Emphasis::Normal,
        };
        let chart = Chart::from_sampled_lines(
            "c",
            "c",
            Axis::new("t", Unit::Seconds),
            Axis::new("b", Unit::Bytes),
            vec![line(points), line(vec![(0.0, 1.0), (0.05, 2.0)])],
            0.1,
        );
        let breaks: Vec<f64> = chart.series[0].breaks.iter().map(|i| chart.x[*i]).collect();
        assert_eq!(breaks.len(), 1, "{breaks:?}");
        assert!(breaks[0] > 99.98 && breaks[0] < 101.0, "{breaks:?}");
        assert_eq!(chart.series[0].values[chart.series[0].breaks[0]], None);
        assert!(chart.series[1].breaks.is_empty());
        assert!(chart.x.len() <= 2003);
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
