//! The report of a `run` results directory: how to reproduce it, the summary, memory over time per
//! variant, memory per event, figures against the swept parameters, and the processes of one run.
use std::collections::{BTreeMap, BTreeSet};

use runner::results_dir::{MarkerRow, SampleRow};
use runner::{RunRecord, VariantSummary};

use crate::document::chart::{palette, Axis, Bar, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Document, Reportable, Section, Table};
use crate::format;
use crate::run_data::RunData;
use crate::tables::{run_summary, Output};

/// Lines of at most this many processes in the per-process chart (the largest by peak PSS).
const MAX_PROCESS_LINES: usize = 24;

impl Reportable for RunData {
    fn document(&self) -> Document {
        let r = &self.results;
        let title = format!("alloclens run: {}", r.command.join(" "));
        let mut sections = vec![reproduce(self), summary(self)];
        sections.extend(compared(self));
        sections.extend(super::run_replay::replay(self));
        sections.extend(memory_over_time(self));
        sections.extend(pss_and_rss(self));
        sections.extend(super::run_ksm::ksm(self));
        sections.extend(per_event(self));
        sections.extend(against_params(self));
        sections.extend(per_process(self));
        Document { title, sections }
    }
}

/// Variant label -> colour index, in results.json order.
pub(super) fn colors(data: &RunData) -> BTreeMap<String, String> {
    let mut labels: Vec<&str> = data
        .results
        .variants
        .iter()
        .map(|v| v.label.as_str())
        .collect();
    for run in &data.results.runs {
        if !labels.contains(&run.variant.as_str()) {
            labels.push(&run.variant);
        }
    }
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.to_string(), palette(i)))
        .collect()
}

pub(super) fn point_name(params: &BTreeMap<String, String>, order: &[String]) -> String {
    order
        .iter()
        .filter_map(|n| params.get(n).map(|v| format!("{n}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn param_order(data: &RunData) -> Vec<String> {
    data.results.params.iter().map(|p| p.name.clone()).collect()
}

fn reproduce(data: &RunData) -> Section {
    let r = &data.results;
    let mut s = Section::new("setup", "Command, machine and allocators");
    s.push(Block::Code(shell_words(&r.command)));
    if !data.compared.is_empty() {
        s.push(Block::Paragraph(
            "Two results compared; the machine and options shown are the first's:".into(),
        ));
        for c in &data.compared {
            s.push(Block::Code(c.clone()));
        }
    }
    let mut facts = vec![
        ("results".into(), data.dir.display().to_string()),
        (
            "made".into(),
            format!("{} by {} {}", r.created, r.tool, r.tool_version),
        ),
        (
            "machine".into(),
            format!(
                "{} — {}, {} CPUs, {} memory, Linux {}",
                r.host.hostname,
                r.host.cpu_model,
                r.host.cpus,
                format::bytes(r.host.memory_bytes as f64),
                r.host.kernel
            ),
        ),
        ("repeats".into(), r.repeats.to_string()),
        ("sampling interval".into(), format::seconds(r.interval_s)),
    ];
    for p in &r.params {
        facts.push((format!("parameter {}", p.name), p.values.join(", ")));
    }
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "—".into());
    facts.push(("marker regex".into(), opt(&r.marker)));
    facts.push(("throughput regex".into(), opt(&r.throughput)));
    facts.push(("baseline".into(), opt(&r.baseline)));
    s.push(Block::Facts(facts));
    let pairs = |v: &[(String, String)]| {
        v.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    s.push(Block::Table(Table {
        caption: Some("Variants".into()),
        headers: [
            "variant",
            "allocator",
            "version",
            "library",
            "settings",
            "environment",
        ]
        .map(String::from)
        .to_vec(),
        rows: r
            .variants
            .iter()
            .map(|v| {
                vec![
                    v.label.clone(),
                    v.allocator.clone(),
                    v.version.clone().unwrap_or_default(),
                    v.library
                        .as_ref()
                        .map_or_else(|| "(system)".into(), |l| l.display().to_string()),
                    pairs(&v.settings),
                    pairs(&v.env),
                ]
            })
            .collect(),
    }));
    if r.interrupted {
        s.push(Block::Warning(
            "the session was interrupted (Ctrl-C): only the runs done are shown".into(),
        ));
    }
    for w in &r.warnings {
        s.push(Block::Warning(w.clone()));
    }
    s
}

/// The command as a shell would need it typed: words with special characters single-quoted.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Per point, a time table then a memory table (as the terminal prints them; the columns are
/// `tables::run_summary`'s): one table with every column does not fit 1400 px.
fn summary(data: &RunData) -> Section {
    let mut s = Section::new("summary", "Summary");
    let order = param_order(data);
    let throughput = data.results.summary.iter().any(run_summary::has_throughput);
    let unit = data.results.throughput_unit.as_deref();
    for g in &data.results.summary {
        let point = point_name(&g.params, &order);
        let ranked = run_summary::ranking(g);
        let caption = |what: &str| {
            let mut c = what.to_string();
            if !point.is_empty() {
                c = format!("{point} — {c}");
            }
            if let Some(b) = &g.baseline {
                c.push_str(&format!("; ratios: variant / {b} ± one standard deviation"));
            }
            c
        };
        let [time, memory] = run_summary::HTML
            .map(|layout| run_summary::table(g, layout, Output::Html, unit, throughput));
        s.push(Block::Table(Table {
            caption: Some(caption(&format!("time, {ranked}"))),
            ..time
        }));
        s.push(Block::Table(Table {
            caption: Some(caption("memory of the whole tree (medians of the repeats)")),
            ..memory
        }));
    }
    s
}

/// Runs grouped by parameter point, in results.json order of first appearance.
fn points(data: &RunData) -> Vec<(BTreeMap<String, String>, Vec<&RunRecord>)> {
    let mut out: Vec<(BTreeMap<String, String>, Vec<&RunRecord>)> = Vec::new();
    for run in &data.results.runs {
        match out.iter_mut().find(|(p, _)| *p == run.params) {
            Some((_, runs)) => runs.push(run),
            None => out.push((run.params.clone(), vec![run])),
        }
    }
    out
}

/// Per variant, the repeat drawn bold: the successful run whose peak PSS is the (lower) median.
fn median_runs(runs: &[&RunRecord]) -> BTreeSet<usize> {
    let mut by_variant: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.ending.ok()) {
        by_variant.entry(&r.variant).or_default().push(r);
    }
    by_variant
        .into_values()
        .map(|mut rs| {
            rs.sort_by_key(|r| r.memory.pss.peak);
            rs[(rs.len() - 1) / 2].index
        })
        .collect()
}

/// Repeats counted from 1, as the progress bar and the warnings count them (the `repeat` columns
/// of the data files stay 0-based keys).
pub(super) fn run_label(run: &RunRecord) -> String {
    format!("{} #{}", run.variant, run.repeat + 1)
}

fn emphasis(run: &RunRecord, bold: &BTreeSet<usize>, repeats: usize) -> Emphasis {
    if repeats <= 1 || bold.contains(&run.index) {
        Emphasis::Bold
    } else {
        Emphasis::Faint
    }
}

/// Total rows of samples.csv per run.
pub(super) fn totals(data: &RunData) -> BTreeMap<usize, Vec<&SampleRow>> {
    let mut out: BTreeMap<usize, Vec<&SampleRow>> = BTreeMap::new();
    for s in data.samples.iter().filter(|s| s.pid.is_none()) {
        out.entry(s.run).or_default().push(s);
    }
    out
}

fn chart_suffix(i: usize, n: usize) -> String {
    if n > 1 {
        format!("-{i}")
    } else {
        String::new()
    }
}

/// A stretch of more than this many sampling intervals without a sample breaks the lines (the
/// sampler was held up, or the tree was not readable): a line drawn across would show values never read.
const GAP_INTERVALS: f64 = 5.0;

/// Runs in drawing order: by variant (results.json order), the variant's median repeat first, so it
/// holds the variant's legend entry.
fn in_legend_order<'a>(data: &RunData, runs: &[&'a RunRecord]) -> Vec<&'a RunRecord> {
    let bold = median_runs(runs);
    let variants = &data.results.variants;
    let rank = |v: &str| {
        variants
            .iter()
            .position(|x| x.label == v)
            .unwrap_or_else(|| {
                variants.len()
                    + data
                        .results
                        .runs
                        .iter()
                        .position(|r| r.variant == v)
                        .unwrap_or(0)
            })
    };
    let mut out = runs.to_vec();
    out.sort_by_key(|r| (rank(&r.variant), !bold.contains(&r.index), r.repeat));
    out
}

/// A total of samples.csv over time, one line per run (colour per variant, one legend entry per
/// variant), broken where samples are missing.
fn total_chart(
    data: &RunData,
    id: String,
    title: String,
    runs: &[&RunRecord],
    name: &str,
    pick: fn(&SampleRow) -> u64,
) -> Chart {
    let colors = colors(data);
    let totals = totals(data);
    let bold = median_runs(runs);
    let repeats = data.results.repeats.max(1) as usize;
    let lines = in_legend_order(data, runs)
        .iter()
        .map(|run| Line {
            label: run_label(run),
            points: totals
                .get(&run.index)
                .map(|rows| rows.iter().map(|r| (r.t_s, pick(r) as f64)).collect())
                .unwrap_or_default(),
            color: colors
                .get(&run.variant)
                .cloned()
                .unwrap_or_else(|| palette(0)),
            emphasis: emphasis(run, &bold, repeats),
        })
        .collect();
    let mut chart = Chart::from_sampled_lines(
        id,
        title,
        Axis::new("time since start", Unit::Seconds),
        Axis::new(format!("total {name}"), Unit::Bytes),
        lines,
        GAP_INTERVALS * data.results.interval_s,
    );
    let variant_of: BTreeMap<usize, String> =
        runs.iter().map(|r| (r.index, r.variant.clone())).collect();
    let labels: BTreeMap<String, usize> = runs.iter().map(|r| (run_label(r), r.index)).collect();
    chart.group_by(|s| {
        labels
            .get(&s.label)
            .and_then(|i| variant_of.get(i))
            .cloned()
    });
    chart
}

fn memory_over_time(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let points = points(data);
    let repeats = data.results.repeats.max(1);
    let mut s = Section::new("memory", "Memory of the process tree over time");
    s.push(Block::Paragraph(format!(
        "Sum over the command and all its descendants at each sample. One line per run, one colour and \
         one legend entry per variant{}; a line is broken where no sample was taken for more than {} \
         sampling intervals. VSS is the address space reserved, mapped or not.",
        if repeats > 1 {
            format!(
                " (its {repeats} repeats: the one with the median peak PSS bold, the others thin)"
            )
        } else {
            String::new()
        },
        GAP_INTERVALS
    )));
    for (i, (params, runs)) in points.iter().enumerate() {
        let point = point_name(params, &order);
        for (metric, name, pick) in [
            (
                "pss",
                "PSS",
                (|s: &SampleRow| s.pss) as fn(&SampleRow) -> u64,
            ),
            ("rss", "RSS", |s: &SampleRow| s.rss),
            ("vss", "VSS", |s: &SampleRow| s.vss),
        ] {
            let title = if point.is_empty() {
                format!("Total {name} over time")
            } else {
                format!("Total {name} over time, {point}")
            };
            s.push_chart(total_chart(
                data,
                format!("{metric}-over-time{}", chart_suffix(i, points.len())),
                title,
                runs,
                name,
                pick,
            ));
        }
    }
    (s.blocks.len() > 1).then_some(s)
}

/// Per variant (and point), the PSS and RSS of its median run on one plot: RSS counts shared pages
/// in full in every process, PSS shares them out, so the gap between them is the sharing.
fn pss_and_rss(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let points = points(data);
    let colors = colors(data);
    let totals = totals(data);
    let mut s = Section::new("pss-rss", "PSS and RSS per variant");
    s.push(Block::Paragraph(
        "The median run of each variant (by peak PSS): PSS (bold, the variant's colour) and RSS (grey) \
         of the whole tree. RSS counts pages shared between processes once per process, PSS shares \
         them out: the distance between the lines is the sharing."
            .into(),
    ));
    for (i, (params, runs)) in points.iter().enumerate() {
        let point = point_name(params, &order);
        let bold = median_runs(runs);
        for run in in_legend_order(data, runs)
            .into_iter()
            .filter(|r| bold.contains(&r.index))
        {
            let rows = totals.get(&run.index).cloned().unwrap_or_default();
            let line = |label: &str, color: String, emphasis, pick: fn(&SampleRow) -> u64| Line {
                label: label.into(),
                points: rows.iter().map(|r| (r.t_s, pick(r) as f64)).collect(),
                color,
                emphasis,
            };
            let color = colors
                .get(&run.variant)
                .cloned()
                .unwrap_or_else(|| palette(0));
            s.push_chart(Chart::from_sampled_lines(
                format!(
                    "pss-rss-{}{}",
                    slug(&run.variant),
                    chart_suffix(i, points.len())
                ),
                format!(
                    "PSS and RSS of {}{}",
                    run_label(run),
                    if point.is_empty() {
                        String::new()
                    } else {
                        format!(", {point}")
                    }
                ),
                Axis::new("time since start", Unit::Seconds),
                Axis::new("total", Unit::Bytes),
                vec![
                    line("PSS", color, Emphasis::Bold, |r| r.pss),
                    line("RSS", "#7f7f7f".into(), Emphasis::Normal, |r| r.rss),
                ],
                GAP_INTERVALS * data.results.interval_s,
            ));
        }
    }
    (s.blocks.len() > 1).then_some(s)
}

/// A figure of the variants compared: its name, unit, whether more is better, its median (from
/// results.json's summary) and its value in one run (for the spread).
struct Compared {
    id: &'static str,
    title: &'static str,
    unit: Unit,
    higher_is_better: bool,
    median: fn(&VariantSummary) -> Option<f64>,
    of_run: fn(&RunRecord) -> Option<f64>,
}

const COMPARED: &[Compared] = &[
    Compared {
        id: "throughput",
        title: "Throughput",
        unit: Unit::Rate,
        higher_is_better: true,
        median: |v| v.throughput_median,
        of_run: |r| r.throughput,
    },
    Compared {
        id: "wall",
        title: "Wall time",
        unit: Unit::Seconds,
        higher_is_better: false,
        median: |v| v.wall_median,
        of_run: |r| Some(r.wall),
    },
    Compared {
        id: "peak-pss",
        title: "Peak PSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.peak_pss_median,
        of_run: |r| Some(r.memory.pss.peak as f64),
    },
    Compared {
        id: "mean-pss",
        title: "Mean PSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.mean_pss_median,
        of_run: |r| Some(r.memory.pss.mean),
    },
    Compared {
        id: "peak-rss",
        title: "Peak RSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.peak_rss_median,
        of_run: |r| Some(r.memory.rss.peak as f64),
    },
    Compared {
        id: "mean-rss",
        title: "Mean RSS",
        unit: Unit::Bytes,
        higher_is_better: false,
        median: |v| v.mean_rss_median,
        of_run: |r| Some(r.memory.rss.mean),
    },
];

/// The smallest and largest value of a figure over the successful runs of a variant at a point,
/// when there are at least two.
fn spread(
    data: &RunData,
    variant: &str,
    params: &BTreeMap<String, String>,
    of_run: fn(&RunRecord) -> Option<f64>,
) -> Option<(f64, f64)> {
    let values: Vec<f64> = data
        .results
        .runs
        .iter()
        .filter(|r| r.variant == variant && r.params == *params && r.ending.ok())
        .filter_map(of_run)
        .collect();
    (values.len() > 1).then(|| {
        values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |a, x| {
                (a.0.min(*x), a.1.max(*x))
            })
    })
}

/// The variants side by side: per figure, one bar per variant (its median over the repeats), best
/// first, with the spread of the successful repeats (min to max) as a whisker; and a ranking line.
/// With a swept parameter, the same figures are lines against it (`against_params`).
fn compared(data: &RunData) -> Option<Section> {
    // One variant has nothing to be compared with; a sweep has its lines against the parameter.
    if !data.results.params.is_empty()
        || data.results.summary.is_empty()
        || data.results.summary[0].variants.len() < 2
    {
        return None;
    }
    let colors = colors(data);
    let mut s = Section::new("compared", "Variants compared");
    let repeats = data.results.repeats.max(1);
    s.push(Block::Paragraph(format!(
        "Per figure, one bar per variant, best first: the median over its successful runs{}.",
        if repeats > 1 {
            ", the whisker from the smallest to the largest repeat"
        } else {
            ""
        }
    )));
    let group = &data.results.summary[0];
    let mut charts = Vec::new();
    // Ranking table: one column per figure, row i = the i-th best variant.
    let mut headers = vec!["rank".to_string()];
    let mut columns: Vec<Vec<String>> = Vec::new();
    for c in COMPARED {
        let mut bars: Vec<Bar> = group
            .variants
            .iter()
            .filter_map(|v| {
                let median = (c.median)(v)?;
                let spread = spread(data, &v.variant, &group.params, c.of_run);
                let color = colors
                    .get(&v.variant)
                    .cloned()
                    .unwrap_or_else(|| palette(0));
                Some(Bar {
                    name: v.variant.clone(),
                    value: median,
                    spread,
                    color,
                })
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        bars.sort_by(|a, b| {
            if c.higher_is_better {
                b.value.total_cmp(&a.value)
            } else {
                a.value.total_cmp(&b.value)
            }
        });
        headers.push(format!(
            "{} ({} is better)",
            c.title,
            if c.higher_is_better {
                "higher"
            } else {
                "lower"
            }
        ));
        columns.push(
            bars.iter()
                .map(|b| format!("{} {}", b.name, format::format_value(c.unit, b.value)))
                .collect(),
        );
        charts.push(Chart::bars(
            format!("{}-by-variant", c.id),
            format!("{}, best first", c.title),
            Axis::new(c.title.to_lowercase(), c.unit),
            bars,
        ));
    }
    let ranks = columns.iter().map(Vec::len).max().unwrap_or(0);
    s.push(Block::Table(Table {
        caption: Some("Ranking: per figure, the variants from best to worst (medians)".into()),
        headers,
        rows: (0..ranks)
            .map(|i| {
                std::iter::once((i + 1).to_string())
                    .chain(
                        columns
                            .iter()
                            .map(|c| c.get(i).cloned().unwrap_or_default()),
                    )
                    .collect()
            })
            .collect(),
    }));
    for chart in charts {
        s.push_chart(chart);
    }
    (s.blocks.len() > 1).then_some(s)
}

fn per_event(data: &RunData) -> Option<Section> {
    if data.markers.is_empty() {
        return None;
    }
    let colors = colors(data);
    // x = the marker label, in order of first appearance (runs print the same events).
    let mut labels: Vec<String> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &data.markers {
        if !index.contains_key(m.label.as_str()) {
            index.insert(&m.label, labels.len());
            labels.push(m.label.clone());
        }
    }
    let runs: Vec<&RunRecord> = data.results.runs.iter().collect();
    let runs = in_legend_order(data, &runs);
    let bold = median_runs(&runs);
    let repeats = data.results.repeats.max(1) as usize;
    let mut s = Section::new("events", "Memory per event");
    s.push(Block::Paragraph(format!(
        "Tree totals at each output line matching the marker regex {}; x is the marker's label.",
        data.results.marker.clone().unwrap_or_default()
    )));
    for (metric, name, pick) in [
        (
            "pss",
            "PSS",
            (|m: &MarkerRow| m.pss) as fn(&MarkerRow) -> Option<u64>,
        ),
        ("rss", "RSS", |m| m.rss),
        ("vss", "VSS", |m| m.vss),
    ] {
        let lines = runs
            .iter()
            .map(|run| Line {
                label: format!("{}{}", run_label(run), params_suffix(run, data)),
                points: data
                    .markers
                    .iter()
                    .filter(|m| m.run == run.index)
                    .filter_map(|m| Some((index[m.label.as_str()] as f64, pick(m)? as f64)))
                    .collect(),
                color: colors
                    .get(&run.variant)
                    .cloned()
                    .unwrap_or_else(|| palette(0)),
                emphasis: emphasis(run, &bold, repeats),
            })
            .filter(|l| !l.points.is_empty())
            .collect();
        let groups: BTreeMap<String, String> = runs
            .iter()
            .map(|run| {
                let suffix = params_suffix(run, data);
                (
                    format!("{}{suffix}", run_label(run)),
                    format!("{}{suffix}", run.variant),
                )
            })
            .collect();
        let mut chart = Chart::from_lines(
            format!("{metric}-per-event"),
            format!("{name} per event"),
            Axis::new("event (marker label)", Unit::Plain),
            Axis::new(format!("total {name}"), Unit::Bytes),
            lines,
        );
        chart.x_labels = Some(labels.clone());
        chart.group_by(|s| groups.get(&s.label).cloned());
        s.push_chart(chart);
    }
    Some(s)
}

fn params_suffix(run: &RunRecord, data: &RunData) -> String {
    let p = point_name(&run.params, &param_order(data));
    if p.is_empty() {
        p
    } else {
        format!(" {p}")
    }
}

fn against_params(data: &RunData) -> Option<Section> {
    let order = param_order(data);
    let first = order.first()?;
    let colors = colors(data);
    let values: Vec<String> = data.results.params[0].values.clone();
    let numeric = values.iter().all(|v| v.parse::<f64>().is_ok());
    let x_of = |v: &str| -> Option<f64> {
        if numeric {
            v.parse().ok()
        } else {
            values.iter().position(|x| x == v).map(|i| i as f64)
        }
    };
    // One line per variant and per combination of the other parameters: (x, its summary).
    type Point<'a> = (f64, &'a VariantSummary, &'a BTreeMap<String, String>);
    let mut lines: BTreeMap<(String, String), Vec<Point>> = BTreeMap::new();
    for g in &data.results.summary {
        let Some(x) = g.params.get(first).and_then(|v| x_of(v)) else {
            continue;
        };
        let rest = point_name(&g.params, &order[1..]);
        for v in &g.variants {
            lines
                .entry((v.variant.clone(), rest.clone()))
                .or_default()
                .push((x, v, &g.params));
        }
    }
    let mut s = Section::new("parameters", format!("Against {first}"));
    s.push(Block::Paragraph(format!(
        "Medians over the repeats at each value of {first}, one line per variant{}; with repeats, a \
         whisker from the smallest to the largest.",
        if order.len() > 1 {
            " and combination of the other parameters"
        } else {
            ""
        }
    )));
    for c in COMPARED {
        let chart_lines = lines
            .iter()
            .map(|((variant, rest), pts)| Line {
                label: if rest.is_empty() {
                    variant.clone()
                } else {
                    format!("{variant} {rest}")
                },
                points: pts
                    .iter()
                    .filter_map(|(x, v, _)| Some((*x, (c.median)(v)?)))
                    .collect(),
                color: colors.get(variant).cloned().unwrap_or_else(|| palette(0)),
                emphasis: Emphasis::Normal,
            })
            .collect();
        let mut chart = Chart::from_lines(
            format!("{}-vs-{}", c.id, slug(first)),
            format!("{} against {first}", c.title),
            Axis::new(first.clone(), Unit::Plain),
            Axis::new(c.title.to_lowercase(), c.unit),
            chart_lines,
        );
        // The spread of the repeats at each point, as a whisker.
        for (series, ((variant, _), pts)) in chart.series.iter_mut().zip(&lines) {
            let mut low = vec![None; chart.x.len()];
            let mut high = vec![None; chart.x.len()];
            for (x, _, params) in pts {
                let Some((lo, hi)) = spread(data, variant, params, c.of_run) else {
                    continue;
                };
                if let Ok(i) = chart.x.binary_search_by(|v| v.total_cmp(x)) {
                    low[i] = Some(lo);
                    high[i] = Some(hi);
                }
            }
            if low.iter().any(Option::is_some) {
                series.low = Some(low);
                series.high = Some(high);
            }
        }
        chart.points = true;
        if !numeric {
            chart.x_labels = Some(values.clone());
        }
        s.push_chart(chart);
    }
    (s.blocks.len() > 1).then_some(s)
}

pub(super) fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn per_process(data: &RunData) -> Option<Section> {
    // The run with the most processes at once (the first such), as the example of a multi-process run.
    let run = data
        .results
        .runs
        .iter()
        .filter(|r| r.memory.max_processes > 1)
        .max_by(|a, b| {
            a.memory
                .max_processes
                .cmp(&b.memory.max_processes)
                .then(b.index.cmp(&a.index))
        })?;
    let rows: Vec<&SampleRow> = data
        .samples
        .iter()
        .filter(|s| s.run == run.index && s.pid.is_some())
        .collect();
    struct Proc {
        ppid: Option<u32>,
        comm: String,
        peak: u64,
        first: f64,
        last: f64,
        points: Vec<(f64, f64)>,
    }
    let mut procs: BTreeMap<u32, Proc> = BTreeMap::new();
    for r in rows {
        let p = procs.entry(r.pid.unwrap_or(0)).or_insert(Proc {
            ppid: r.ppid,
            comm: r.comm.clone(),
            peak: 0,
            first: r.t_s,
            last: r.t_s,
            points: Vec::new(),
        });
        p.peak = p.peak.max(r.pss);
        p.first = p.first.min(r.t_s);
        p.last = p.last.max(r.t_s);
        p.points.push((r.t_s, r.pss as f64));
    }
    let mut ranked: Vec<(u32, Proc)> = procs.into_iter().collect();
    ranked.sort_by(|a, b| b.1.peak.cmp(&a.1.peak).then(a.0.cmp(&b.0)));
    let mut s = Section::new(
        "processes",
        format!(
            "Processes of run {} ({}, repeat {}{})",
            run.index,
            run.variant,
            run.repeat + 1,
            params_suffix(run, data)
        ),
    );
    s.push(Block::Paragraph(format!(
        "The run with the most processes at once ({}; {} seen in all). PSS shares the pages common to \
         several processes between them, so the lines add up to the tree's total.",
        run.memory.max_processes, run.memory.distinct_processes
    )));
    if ranked.len() > MAX_PROCESS_LINES {
        s.push(Block::Paragraph(format!(
            "The chart shows the {MAX_PROCESS_LINES} largest processes by peak PSS of {}.",
            ranked.len()
        )));
    }
    let lines = ranked
        .iter()
        .take(MAX_PROCESS_LINES)
        .enumerate()
        .map(|(i, (pid, p))| Line {
            label: format!("{pid} {}", p.comm),
            points: p.points.clone(),
            color: palette(i),
            emphasis: Emphasis::Normal,
        })
        .collect();
    s.push_chart(Chart::from_lines(
        "pss-per-process",
        format!("PSS per process, run {}", run.index),
        Axis::new("time since start", Unit::Seconds),
        Axis::new("PSS", Unit::Bytes),
        lines,
    ));
    s.push(Block::Table(Table {
        caption: Some("Processes by peak PSS".into()),
        headers: [
            "pid",
            "ppid",
            "command",
            "peak PSS",
            "first seen",
            "last seen",
        ]
        .map(String::from)
        .to_vec(),
        rows: ranked
            .iter()
            .map(|(pid, p)| {
                vec![
                    pid.to_string(),
                    p.ppid.map(|v| v.to_string()).unwrap_or_default(),
                    p.comm.clone(),
                    format::bytes(p.peak as f64),
                    format!("{:.3} s", p.first),
                    format!("{:.3} s", p.last),
                ]
            })
            .collect(),
    }));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_what_a_shell_would_interpret() {
        let words = ["prog", "--x={n}", "a b", "it's", "<script>"].map(String::from);
        assert_eq!(
            shell_words(&words),
            r#"prog --x={n} 'a b' 'it'\''s' '<script>'"#
        );
    }
}
