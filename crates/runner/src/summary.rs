//! Per parameter point, each variant's figures over its repeats, and ratios to a baseline variant.
use serde::{Deserialize, Serialize};

use crate::plan::Assignment;
use crate::results::{AllocatorCheck, RunRecord};
use crate::stats::median;

/// One variant at one parameter point, over its repeats. Medians are over successful runs only.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct VariantSummary {
    pub variant: String,
    pub runs: u32,
    pub failed: u32,
    /// Failure descriptions ("exit 1", "signal 11", "timeout", ...) of the failed runs.
    pub failures: Vec<String>,
    pub wall_median: Option<f64>,
    pub wall_min: Option<f64>,
    pub wall_max: Option<f64>,
    pub throughput_median: Option<f64>,
    pub peak_pss_median: Option<f64>,
    pub mean_pss_median: Option<f64>,
    pub peak_rss_median: Option<f64>,
    pub mean_rss_median: Option<f64>,
    /// This variant's median over the baseline's: < 1 is faster / smaller.
    pub wall_ratio: Option<f64>,
    pub peak_pss_ratio: Option<f64>,
    pub mean_pss_ratio: Option<f64>,
    /// Throughput over the baseline's: > 1 is better.
    pub throughput_ratio: Option<f64>,
    /// The worst allocator check over the runs (not_loaded beats unverified beats loaded).
    pub allocator_check: AllocatorCheck,
}

/// All variants at one parameter point, best (shortest median wall time) first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Group {
    pub params: Assignment,
    pub baseline: Option<String>,
    pub variants: Vec<VariantSummary>,
}

/// Groups runs by parameter point (in first-seen order) and variant (in `variant_order`).
/// `baseline` names the variant ratios are taken against; if absent from a group, there are no ratios.
pub fn summarize(
    runs: &[RunRecord],
    variant_order: &[String],
    baseline: Option<&str>,
) -> Vec<Group> {
    let mut points: Vec<Assignment> = Vec::new();
    for run in runs {
        if !points.contains(&run.params) {
            points.push(run.params.clone());
        }
    }
    points
        .into_iter()
        .map(|params| {
            let mut variants: Vec<VariantSummary> = variant_order
                .iter()
                .filter_map(|name| {
                    let of_variant: Vec<&RunRecord> = runs
                        .iter()
                        .filter(|r| r.params == params && &r.variant == name)
                        .collect();
                    (!of_variant.is_empty()).then(|| summarize_variant(name, &of_variant))
                })
                .collect();
            let base = baseline
                .and_then(|b| variants.iter().find(|v| v.variant == b))
                .cloned();
            if let Some(base) = &base {
                for v in &mut variants {
                    v.wall_ratio = ratio(v.wall_median, base.wall_median);
                    v.peak_pss_ratio = ratio(v.peak_pss_median, base.peak_pss_median);
                    v.mean_pss_ratio = ratio(v.mean_pss_median, base.mean_pss_median);
                    v.throughput_ratio = ratio(v.throughput_median, base.throughput_median);
                }
            }
            variants.sort_by(|a, b| {
                let key = |v: &VariantSummary| v.wall_median.unwrap_or(f64::INFINITY);
                key(a).total_cmp(&key(b))
            });
            Group {
                params,
                baseline: base.map(|b| b.variant),
                variants,
            }
        })
        .collect()
}

fn summarize_variant(name: &str, runs: &[&RunRecord]) -> VariantSummary {
    let ok: Vec<&&RunRecord> = runs.iter().filter(|r| r.ending.ok()).collect();
    let of =
        |f: fn(&RunRecord) -> Option<f64>| -> Vec<f64> { ok.iter().filter_map(|r| f(r)).collect() };
    let walls = of(|r| Some(r.wall));
    let with_samples =
        |f: fn(&RunRecord) -> f64| move |r: &RunRecord| (r.memory.samples > 0).then(|| f(r));
    let check_rank = |c: &AllocatorCheck| match c {
        AllocatorCheck::NotLoaded => 3,
        AllocatorCheck::Unverified => 2,
        AllocatorCheck::Loaded => 1,
        AllocatorCheck::NotApplicable => 0,
    };
    let allocator_check = runs
        .iter()
        .map(|r| r.allocator_check.clone())
        .max_by_key(check_rank)
        .unwrap_or(AllocatorCheck::Unverified);
    VariantSummary {
        variant: name.to_string(),
        runs: runs.len() as u32,
        failed: (runs.len() - ok.len()) as u32,
        failures: runs
            .iter()
            .filter(|r| !r.ending.ok())
            .map(|r| r.ending.describe())
            .collect(),
        wall_median: median(&walls),
        wall_min: walls.iter().copied().reduce(f64::min),
        wall_max: walls.iter().copied().reduce(f64::max),
        throughput_median: median(&of(|r| r.throughput)),
        peak_pss_median: median(
            &ok.iter()
                .filter_map(|r| with_samples(|r| r.memory.pss.peak as f64)(r))
                .collect::<Vec<_>>(),
        ),
        mean_pss_median: median(
            &ok.iter()
                .filter_map(|r| with_samples(|r| r.memory.pss.mean)(r))
                .collect::<Vec<_>>(),
        ),
        peak_rss_median: median(
            &ok.iter()
                .filter_map(|r| with_samples(|r| r.memory.rss.peak as f64)(r))
                .collect::<Vec<_>>(),
        ),
        mean_rss_median: median(
            &ok.iter()
                .filter_map(|r| with_samples(|r| r.memory.rss.mean)(r))
                .collect::<Vec<_>>(),
        ),
        wall_ratio: None,
        peak_pss_ratio: None,
        mean_pss_ratio: None,
        throughput_ratio: None,
        allocator_check,
    }
}

fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    }
}
