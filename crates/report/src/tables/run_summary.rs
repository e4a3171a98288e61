//! The summary of a run, defined once for every output: per parameter point one row per variant,
//! best first (`runner::summarize`). [`COLUMNS`] holds every column with its header and cell in each
//! output; the layouts below say which columns each output shows, in which order: the terminal and
//! the HTML page split a point into a time and a memory table (one table with every column does not
//! fit a terminal or 1400 px), Markdown has one table per point (hyperfine's layout), CSV one row per
//! point and variant with raw numbers. A new column is one entry in `COLUMNS` and its name in the
//! layouts that show it.
use runner::{Group, Ranking, VariantSummary};

use super::{Output, Table};
use crate::format::{self, TimeScale};
use crate::markdown::{code, text};

/// What a cell is made from: a variant of a point, and how the point's table shows time.
pub(crate) struct Row<'a> {
    pub group: &'a Group,
    pub v: &'a VariantSummary,
    /// The time unit of the point's table (from its shortest mean wall time).
    pub scale: TimeScale,
    /// `--throughput-unit`, e.g. "ops/s".
    pub throughput_unit: Option<&'a str>,
}

/// A column of the summary in every output.
pub(crate) struct Column {
    /// Its name in the layouts, and its header in CSV.
    pub name: &'static str,
    /// Its header in the terminal, HTML and Markdown (`{unit}` is the time unit of the point); ""
    /// where that output does not show it.
    headers: [&'static str; 3],
    /// Shown to a reader only when a variant has a throughput (CSV always has it).
    throughput: bool,
    cell: fn(&Row<'_>, Output) -> String,
}

impl Column {
    fn header(&self, output: Output, scale: TimeScale) -> String {
        match output {
            Output::Terminal => self.headers[0].to_string(),
            Output::Html => self.headers[1].to_string(),
            Output::Markdown => self.headers[2].replace("{unit}", scale.unit),
            Output::Csv => self.name.to_string(),
        }
    }
}

/// The terminal's two tables per point: time, then memory.
pub(crate) const TERMINAL: [&[&str]; 2] = [
    &[
        "variant",
        "wall_mean",
        "wall_median",
        "user_mean",
        "sys_mean",
        "wall_ratio",
        "throughput_median",
        "throughput_ratio",
    ],
    &[
        "variant",
        "peak_pss_median",
        "mean_pss_median",
        "peak_rss_median",
        "mean_rss_median",
        "peak_pss_ratio",
        "peak_rss_ratio",
    ],
];

/// The HTML page's two tables per point: time, then memory.
pub(crate) const HTML: [&[&str]; 2] = [
    &[
        "variant",
        "runs",
        "wall_median",
        "wall_mean",
        "user_mean",
        "throughput_median",
        "wall_ratio",
        "throughput_ratio",
    ],
    &[
        "variant",
        "peak_pss_median",
        "mean_pss_median",
        "peak_rss_median",
        "mean_rss_median",
        "peak_pss_ratio",
        "mean_pss_ratio",
        "peak_rss_ratio",
        "allocator_check",
    ],
];

/// Markdown's table per point.
pub(crate) const MARKDOWN: &[&str] = &[
    "variant",
    "wall_mean",
    "wall_median",
    "wall_min",
    "wall_max",
    "user_mean",
    "sys_mean",
    "peak_pss_median",
    "peak_rss_median",
    "wall_ratio",
    "peak_pss_ratio",
    "peak_rss_ratio",
    "throughput_median",
    "throughput_min",
    "throughput_ratio",
];

/// CSV's columns after the parameters' (one per `--param`, named after it).
pub(crate) const CSV: &[&str] = &[
    "variant",
    "baseline",
    "runs",
    "failed",
    "wall_mean",
    "wall_stddev",
    "wall_median",
    "wall_min",
    "wall_max",
    "user_mean",
    "sys_mean",
    "wall_outliers",
    "throughput_median",
    "throughput_mean",
    "throughput_stddev",
    "throughput_min",
    "throughput_max",
    "peak_pss_median",
    "mean_pss_median",
    "peak_rss_median",
    "mean_rss_median",
    "wall_ratio",
    "wall_ratio_stddev",
    "throughput_ratio",
    "throughput_ratio_stddev",
    "peak_pss_ratio",
    "peak_pss_ratio_stddev",
    "peak_rss_ratio",
    "peak_rss_ratio_stddev",
    "mean_pss_ratio",
    "throughput_unit",
];

/// A column only CSV has: a raw figure.
const fn raw(name: &'static str, cell: fn(&Row<'_>, Output) -> String) -> Column {
    Column {
        name,
        headers: ["", "", ""],
        throughput: false,
        cell,
    }
}

const fn col(
    name: &'static str,
    headers: [&'static str; 3],
    cell: fn(&Row<'_>, Output) -> String,
) -> Column {
    Column {
        name,
        headers,
        throughput: false,
        cell,
    }
}

const fn throughput(
    name: &'static str,
    headers: [&'static str; 3],
    cell: fn(&Row<'_>, Output) -> String,
) -> Column {
    Column {
        throughput: true,
        ..col(name, headers, cell)
    }
}

/// Every column of the summary, in CSV's order.
pub(crate) const COLUMNS: &[Column] = &[
    col("variant", ["variant", "variant", "Variant"], |r, o| {
        let v = &r.v.variant;
        match o {
            Output::Markdown if r.group.baseline.as_deref() == Some(v) => {
                format!("{} (baseline)", code(v))
            }
            Output::Markdown => code(v),
            _ => v.clone(),
        }
    }),
    raw("baseline", |r, _| {
        r.group.baseline.clone().unwrap_or_default()
    }),
    col("runs", ["", "ok runs", ""], |r, o| match o {
        Output::Csv => number(Some(r.v.runs as f64)),
        _ => format!("{}/{}", r.v.runs - r.v.failed.min(r.v.runs), r.v.runs),
    }),
    raw("failed", |r, _| number(Some(r.v.failed as f64))),
    col(
        "wall_mean",
        ["wall mean ± σ", "wall: mean ± σ", "Mean ± σ [{unit}]"],
        |r, o| {
            let (v, s) = (r.v, r.scale);
            match (o, v.wall_mean, v.wall_stddev) {
                (Output::Csv, m, _) => number(m),
                (Output::Terminal, Some(m), Some(sd)) => {
                    format!("{} ± {}", s.number(m), s.with_unit(sd))
                }
                (Output::Html, Some(m), Some(sd)) => {
                    format!("{} ± {}", format::seconds(m), format::seconds(sd))
                }
                (Output::Markdown, Some(m), Some(sd)) => {
                    format!("{} ± {}", s.number(m), s.number(sd))
                }
                (o, m, _) => time(r, o, m),
            }
        },
    ),
    raw("wall_stddev", |r, _| number(r.v.wall_stddev)),
    col(
        "wall_median",
        [
            "median (min…max)",
            "wall: median (min…max)",
            "Median [{unit}]",
        ],
        |r, o| {
            let (v, s) = (r.v, r.scale);
            match (o, v.wall_median, v.wall_min, v.wall_max) {
                (Output::Terminal, Some(m), Some(lo), Some(hi)) if v.runs - v.failed > 1 => {
                    format!("{} ({}…{})", s.number(m), s.number(lo), s.with_unit(hi))
                }
                (Output::Html, Some(m), Some(a), Some(b)) if a != b => {
                    format!("{} ({a:.3}…{b:.3} s)", format::seconds(m))
                }
                (o, m, _, _) => time(r, o, m),
            }
        },
    ),
    col("wall_min", ["", "", "Min [{unit}]"], |r, o| {
        time(r, o, r.v.wall_min)
    }),
    col("wall_max", ["", "", "Max [{unit}]"], |r, o| {
        time(r, o, r.v.wall_max)
    }),
    col(
        "user_mean",
        ["user", "CPU user / sys (mean)", "User [{unit}]"],
        |r, o| match (o, r.v.user_mean, r.v.sys_mean) {
            (Output::Html, Some(u), Some(sy)) => {
                format!("{} / {}", format::seconds(u), format::seconds(sy))
            }
            (Output::Html, _, _) => dash(),
            (o, u, _) => time(r, o, u),
        },
    ),
    col("sys_mean", ["sys", "", "System [{unit}]"], |r, o| {
        time(r, o, r.v.sys_mean)
    }),
    raw("wall_outliers", |r, _| {
        number(Some(r.v.wall_outliers as f64))
    }),
    throughput(
        "throughput_median",
        [
            "throughput median (min…max)",
            "throughput: median (min…max)",
            "Throughput (median)",
        ],
        |r, o| {
            let v = r.v;
            let unit = r.throughput_unit;
            let spread = |m: f64, lo: f64, hi: f64| {
                format!(
                    "{} ({}…{})",
                    format::rate_in(m, unit),
                    format::rate_number(lo),
                    format::rate_number(hi)
                )
            };
            match (o, v.throughput_median, v.throughput_min, v.throughput_max) {
                (Output::Csv, m, _, _) => number(m),
                (Output::Markdown, m, _, _) => markdown_rate(m, unit),
                (Output::Terminal, Some(m), Some(lo), Some(hi)) if lo < hi => spread(m, lo, hi),
                (Output::Html, Some(m), Some(lo), Some(hi)) if lo != hi => spread(m, lo, hi),
                (_, Some(m), _, _) => format::rate_in(m, unit),
                _ => dash(),
            }
        },
    ),
    raw("throughput_mean", |r, _| number(r.v.throughput_mean)),
    raw("throughput_stddev", |r, _| number(r.v.throughput_stddev)),
    throughput(
        "throughput_min",
        ["", "", "Throughput min…max"],
        |r, o| match (o, r.v.throughput_min, r.v.throughput_max) {
            (Output::Csv, lo, _) => number(lo),
            (_, Some(lo), Some(hi)) => format!(
                "{}…{}",
                format::rate_number(lo),
                markdown_rate(Some(hi), r.throughput_unit)
            ),
            _ => dash(),
        },
    ),
    raw("throughput_max", |r, _| number(r.v.throughput_max)),
    col(
        "peak_pss_median",
        ["peak PSS", "peak PSS", "Peak PSS"],
        |r, o| bytes(o, r.v.peak_pss_median),
    ),
    col("mean_pss_median", ["mean PSS", "mean PSS", ""], |r, o| {
        bytes(o, r.v.mean_pss_median)
    }),
    col(
        "peak_rss_median",
        ["peak RSS", "peak RSS", "Peak RSS"],
        |r, o| bytes(o, r.v.peak_rss_median),
    ),
    col("mean_rss_median", ["mean RSS", "mean RSS", ""], |r, o| {
        bytes(o, r.v.mean_rss_median)
    }),
    col(
        "wall_ratio",
        ["time ratio", "time ratio", "Time ratio"],
        |r, o| ratio(o, r.v.wall_ratio, r.v.wall_ratio_stddev),
    ),
    raw("wall_ratio_stddev", |r, _| number(r.v.wall_ratio_stddev)),
    throughput(
        "throughput_ratio",
        ["throughput ratio", "throughput ratio", "Throughput ratio"],
        |r, o| ratio(o, r.v.throughput_ratio, r.v.throughput_ratio_stddev),
    ),
    raw("throughput_ratio_stddev", |r, _| {
        number(r.v.throughput_ratio_stddev)
    }),
    col(
        "peak_pss_ratio",
        ["peak PSS ratio", "peak PSS ratio", "Peak PSS ratio"],
        |r, o| ratio(o, r.v.peak_pss_ratio, r.v.peak_pss_ratio_stddev),
    ),
    raw("peak_pss_ratio_stddev", |r, _| {
        number(r.v.peak_pss_ratio_stddev)
    }),
    col(
        "peak_rss_ratio",
        ["peak RSS ratio", "peak RSS ratio", "Peak RSS ratio"],
        |r, o| ratio(o, r.v.peak_rss_ratio, r.v.peak_rss_ratio_stddev),
    ),
    raw("peak_rss_ratio_stddev", |r, _| {
        number(r.v.peak_rss_ratio_stddev)
    }),
    col("mean_pss_ratio", ["", "mean PSS ratio", ""], |r, o| {
        ratio(o, r.v.mean_pss_ratio, None)
    }),
    raw("throughput_unit", |r, _| {
        r.throughput_unit.unwrap_or_default().to_string()
    }),
    col("allocator_check", ["", "allocator loaded", ""], |r, _| {
        r.v.allocator_check.as_str().replace('_', " ")
    }),
];

fn dash() -> String {
    "—".to_string()
}

/// A raw figure for CSV: empty when absent.
fn number(x: Option<f64>) -> String {
    x.map(|x| x.to_string()).unwrap_or_default()
}

/// A time: with its unit in the terminal, in the table's unit (named in the header) in Markdown.
fn time(r: &Row<'_>, output: Output, x: Option<f64>) -> String {
    match (output, x) {
        (Output::Csv, x) => number(x),
        (_, None) => dash(),
        (Output::Terminal, Some(x)) => r.scale.with_unit(x),
        (Output::Html, Some(x)) => format::seconds(x),
        (Output::Markdown, Some(x)) => r.scale.number(x),
    }
}

fn bytes(output: Output, x: Option<f64>) -> String {
    match output {
        Output::Csv => number(x),
        _ => x.map_or_else(dash, format::bytes),
    }
}

/// A ratio with ± one standard deviation.
fn ratio(output: Output, r: Option<f64>, sd: Option<f64>) -> String {
    match output {
        Output::Csv => number(r),
        _ => r.map_or_else(dash, |r| format::ratio_pm(r, sd)),
    }
}

/// A rate with its unit, the unit (the user's) escaped.
fn markdown_rate(x: Option<f64>, unit: Option<&str>) -> String {
    x.map_or_else(dash, |x| text(&format::rate_in(x, unit)))
}

fn column(name: &str) -> &'static Column {
    COLUMNS
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("the run summary has no column {name}"))
}

/// The time unit of a point's table: from its shortest mean wall time.
pub(crate) fn time_scale(group: &Group) -> TimeScale {
    let shortest = group
        .variants
        .iter()
        .filter_map(|v| v.wall_mean)
        .reduce(f64::min);
    TimeScale::for_shortest(shortest)
}

/// Whether a point has a throughput (its throughput columns are shown).
pub(crate) fn has_throughput(group: &Group) -> bool {
    group.variants.iter().any(|v| v.throughput_median.is_some())
}

/// How a point's variants are ordered, for the terminal heading and the page's captions.
pub(crate) fn ranking(group: &Group) -> &'static str {
    match group.ranked_by {
        Ranking::Throughput => "ranked by throughput, highest first",
        Ranking::Wall => "ranked by median wall time",
    }
}

/// A point's table of `layout`'s columns in `output` (no caption): one row per variant. The
/// throughput columns are left out unless `with_throughput`.
pub(crate) fn table(
    group: &Group,
    layout: &[&str],
    output: Output,
    throughput_unit: Option<&str>,
    with_throughput: bool,
) -> Table {
    let scale = time_scale(group);
    let columns: Vec<&Column> = layout
        .iter()
        .map(|name| column(name))
        .filter(|c| with_throughput || output == Output::Csv || !c.throughput)
        .collect();
    Table {
        caption: None,
        headers: columns.iter().map(|c| c.header(output, scale)).collect(),
        rows: group
            .variants
            .iter()
            .map(|v| {
                let row = Row {
                    group,
                    v,
                    scale,
                    throughput_unit,
                };
                columns.iter().map(|c| (c.cell)(&row, output)).collect()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_names_columns_that_show_in_its_output() {
        let layouts = [
            (Output::Terminal, TERMINAL.concat()),
            (Output::Html, HTML.concat()),
            (Output::Markdown, MARKDOWN.to_vec()),
            (Output::Csv, CSV.to_vec()),
        ];
        for (output, names) in &layouts {
            for name in names {
                let header = column(name).header(*output, TimeScale::for_shortest(None));
                assert!(!header.is_empty(), "{name} has no header in {output:?}");
            }
        }
        for c in COLUMNS {
            assert!(
                layouts.iter().any(|(_, names)| names.contains(&c.name)),
                "{} is in no layout",
                c.name
            );
        }
    }
}
