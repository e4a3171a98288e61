//! The report of a `run` results directory: how to reproduce it, the summary, memory over time per
//! variant, memory per event, figures against the swept parameters, and the processes of one run;
//! one file per section, the helpers they share here.
use std::collections::{BTreeMap, BTreeSet};

use runner::results_dir::SampleRow;
use runner::RunRecord;

use crate::document::chart::{palette, Emphasis};
use crate::document::{Document, Reportable};
use crate::run_data::RunData;

mod against_params;
mod compared;
mod memory;
mod per_event;
mod per_process;
mod pss_rss;
mod setup;
mod summary;

use against_params::against_params;
use compared::compared;
use memory::memory_over_time;
use per_event::per_event;
use per_process::per_process;
use pss_rss::pss_and_rss;
use setup::reproduce;
pub(super) use setup::reproduce_replay;
use summary::summary;

impl Reportable for RunData {
    fn document(&self) -> Document {
        // A replay's directory is read as a run's (results.json), but its page is its own.
        if self.compared.is_empty() {
            if let Some(page) = super::run_replay::document(self) {
                return page;
            }
        }
        let r = &self.results;
        // A search of `tune`: its answer, charts and history come before its runs' own sections.
        let (title, mut sections) = match &r.tune {
            Some(record) => (
                format!("alloclens tune: {}", r.command.join(" ")),
                super::tune::sections(record),
            ),
            None => (
                format!("alloclens run: {}", r.command.join(" ")),
                Vec::new(),
            ),
        };
        sections.extend([reproduce(self), summary(self)]);
        sections.extend(compared(self));
        sections.extend(memory_over_time(self));
        sections.extend(pss_and_rss(self));
        sections.extend(super::run_ksm::ksm(self));
        sections.extend(per_event(self));
        sections.extend(against_params(self));
        sections.extend(per_process(self));
        Document { title, sections }
    }
}

/// A replay's times and figures as `run` tables them (its memory is the replay's RSS).
pub(super) fn replay_times(data: &RunData) -> crate::document::Section {
    let mut s = summary(data);
    s.title =
        "Replay times (the tables of `run`: wall time is the replay's, memory its RSS)".into();
    s
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

pub(super) fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// " threads=4" for a run's point, "" without parameters.
fn params_suffix(run: &RunRecord, data: &RunData) -> String {
    let p = point_name(&run.params, &param_order(data));
    if p.is_empty() {
        p
    } else {
        format!(" {p}")
    }
}
