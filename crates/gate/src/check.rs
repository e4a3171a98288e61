//! Each limit against the figures: pass, fail, or not measurable (which fails too: a gate that
//! cannot see a figure must not let it through).
use std::collections::BTreeMap;

use crate::baseline::Baseline;
use crate::limits::{Bound, Limits, Rule};
use crate::measure::{key, Measurements, Site};
use crate::metric::{format_value, Class, Metric};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    /// No input measures the figure (no run for peak_rss, no stacks for a site, too few
    /// iterations for the growth).
    NotMeasured,
    /// A "+N%" limit whose figure is not in the baseline.
    NotInBaseline,
}

/// One limit applied to one figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `peak_rss[glibc]`, `site[parse_row].not_freed_bytes`.
    pub key: String,
    pub metric: Metric,
    pub class: Class,
    pub status: Status,
    pub value: Option<f64>,
    /// The bound in bytes or counts (for "+N%", the baseline's value times 1 + N/100).
    pub limit: Option<f64>,
    /// How the limit was written: "≤ 512.0 MiB", "≤ baseline 40.1 MiB + 10 %".
    pub bound_text: String,
    /// A "+N%" limit: its bound says more than the limit's value.
    pub relative: bool,
    /// The sites contributing most to the figure, largest first (with stacks only), by
    /// `top_figure` (a site's share of RSS is told by its peak live bytes, of the growth by its
    /// bytes not freed).
    pub top_sites: Vec<(String, f64)>,
    pub top_figure: Metric,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }

    /// "41.2 MiB" or "not measured".
    pub fn value_text(&self) -> String {
        match (self.status, self.value) {
            (Status::NotMeasured, _) | (_, None) => "not measured".into(),
            (_, Some(v)) => format_value(self.metric.unit(), v),
        }
    }

    /// Why it failed with the bound when it says more: "2.9 KiB > 1.0 KiB", "45.0 MiB > 44.1 MiB
    /// (≤ baseline 40.1 MiB + 10 %)".
    pub fn explained(&self) -> String {
        if self.relative || self.status != Status::Fail {
            format!("{} ({})", self.reason(), self.bound_text)
        } else {
            self.reason()
        }
    }

    /// Why it failed, in one clause; empty when it passed.
    pub fn reason(&self) -> String {
        match self.status {
            Status::Pass => String::new(),
            Status::Fail => format!("{} > {}", self.value_text(), self.limit_text()),
            Status::NotMeasured => format!(
                "not measured by the inputs ({})",
                needs(self.metric, self.key.starts_with("site["))
            ),
            Status::NotInBaseline => "not in the baseline: run with --update-baseline".into(),
        }
    }

    pub fn limit_text(&self) -> String {
        self.limit
            .map_or_else(|| "?".into(), |l| format_value(self.metric.unit(), l))
    }
}

fn needs(metric: Metric, site: bool) -> &'static str {
    if site {
        "a trace recorded with --stacks"
    } else if metric == Metric::RetainedRss {
        "a results directory of `alloclens run --marker` with [retained] marker = its label"
    } else if metric.of_runs() {
        "a results directory of `alloclens run`"
    } else if metric.of_leak_check() {
        "a trace recorded with --leaks whose check was not degraded"
    } else if metric == Metric::LiveGrowthPerIteration {
        "a trace recorded with --marker, 3 iterations or more after the warm-up"
    } else {
        "a trace of `alloclens record`"
    }
}

/// The key of a site figure in the baseline and in messages.
pub fn site_key(function: &str, metric: Metric) -> String {
    format!("site[{function}].{}", metric.name())
}

/// Every figure a baseline keeps: the program's and those of the sites the limits name.
pub fn baseline_figures(limits: &Limits, measured: &Measurements) -> BTreeMap<String, f64> {
    let mut figures: BTreeMap<String, f64> = measured
        .figures
        .iter()
        .map(|f| (f.key(), f.value))
        .collect();
    for rule in &limits.rules {
        if let (Some(function), Some(sites)) = (&rule.site, &measured.sites) {
            figures.insert(
                site_key(function, rule.metric),
                site_sum(sites, function, rule.metric),
            );
        }
    }
    figures
}

fn site_sum(sites: &[Site], function: &str, metric: Metric) -> f64 {
    sites
        .iter()
        .filter(|s| s.passes_through(function))
        .map(|s| s.figure(metric))
        .sum()
}

pub fn check(
    limits: &Limits,
    measured: &Measurements,
    baseline: Option<&Baseline>,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for rule in &limits.rules {
        let targets: Vec<(String, Option<f64>)> = match &rule.site {
            Some(function) => vec![(
                site_key(function, rule.metric),
                measured
                    .sites
                    .as_ref()
                    .map(|s| site_sum(s, function, rule.metric)),
            )],
            None => {
                let figures: Vec<_> = measured
                    .of(rule.metric)
                    .map(|f| (f.key(), Some(f.value)))
                    .collect();
                if figures.is_empty() {
                    vec![(key(rule.metric, ""), None)]
                } else {
                    figures
                }
            }
        };
        for (key, value) in targets {
            outcomes.push(judge(rule, key, value, measured, baseline));
        }
    }
    outcomes
}

fn judge(
    rule: &Rule,
    key: String,
    value: Option<f64>,
    measured: &Measurements,
    baseline: Option<&Baseline>,
) -> Outcome {
    let unit = rule.metric.unit();
    let (limit, bound_text) = match rule.bound {
        Bound::AtMost(limit) => (Some(limit), format!("≤ {}", format_value(unit, limit))),
        Bound::AboveBaseline(percent) => match baseline.and_then(|b| b.figures.get(&key)) {
            Some(&base) => (
                Some(base + base.abs() * percent / 100.0),
                format!("≤ baseline {} + {percent} %", format_value(unit, base)),
            ),
            None => (None, format!("≤ baseline + {percent} %")),
        },
    };
    let status = match (value, limit) {
        (None, _) => Status::NotMeasured,
        (Some(_), None) => Status::NotInBaseline,
        (Some(v), Some(l)) if v <= l => Status::Pass,
        _ => Status::Fail,
    };
    let class = if rule.site.is_some() {
        Class::Site
    } else {
        rule.metric.class()
    };
    let top_figure = site_figure_for(rule.metric);
    let top_sites = if status == Status::Pass {
        Vec::new()
    } else {
        top_sites(measured, rule, top_figure)
    };
    Outcome {
        key,
        metric: rule.metric,
        class,
        status,
        value,
        limit,
        bound_text,
        relative: matches!(rule.bound, Bound::AboveBaseline(_)),
        top_sites,
        top_figure,
    }
}

/// The per-site figure that explains a program figure.
fn site_figure_for(metric: Metric) -> Metric {
    match metric {
        Metric::PeakRss
        | Metric::PeakPss
        | Metric::MeanRss
        | Metric::MeanPss
        | Metric::RetainedRss => Metric::PeakLiveBytes,
        Metric::LiveGrowthPerIteration => Metric::NotFreedBytes,
        m => m,
    }
}

/// The three functions that contribute most to the figure (innermost frames, suppressed sites
/// left out): where to look first.
fn top_sites(measured: &Measurements, rule: &Rule, figure: Metric) -> Vec<(String, f64)> {
    let Some(sites) = &measured.sites else {
        return Vec::new();
    };
    let mut by_function: Vec<(String, f64)> = Vec::new();
    for site in sites.iter().filter(|s| !s.suppressed) {
        if let Some(function) = &rule.site {
            if !site.passes_through(function) {
                continue;
            }
        }
        let value = site.figure(figure);
        match by_function.iter_mut().find(|(name, _)| name == site.name()) {
            Some((_, v)) => *v += value,
            None => by_function.push((site.name().to_string(), value)),
        }
    }
    by_function.retain(|(_, v)| *v > 0.0);
    by_function.sort_by(|a, b| b.1.total_cmp(&a.1));
    by_function.truncate(3);
    by_function
}

/// 0 when every limit passed; else 16 plus one bit per class that failed (docs/gate.md).
pub fn exit_status(outcomes: &[Outcome]) -> i32 {
    let bits = outcomes
        .iter()
        .filter(|o| !o.passed())
        .fold(0, |bits, o| bits | o.class.bit());
    if bits == 0 {
        0
    } else {
        16 | bits
    }
}
