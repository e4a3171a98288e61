//! Per parameter point, each variant's figures over its repeats, and ratios to a baseline variant.
use serde::{Deserialize, Serialize};

use crate::plan::Assignment;
use crate::results::{AllocatorCheck, RunRecord};
use crate::stats::{mean, median, outliers, ratio_std_dev, std_dev};

/// One variant at one parameter point, over its repeats. Every figure is over successful runs only;
/// standard deviations are sample ones (n − 1) and absent with fewer than two runs.
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_stddev: Option<f64>,
    /// CPU seconds of the whole tree, mean over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sys_mean: Option<f64>,
    /// Runs whose wall time is an outlier by hyperfine's rule (modified Z-score above 14.826).
    #[serde(skip_serializing_if = "is_zero")]
    pub wall_outliers: u32,
    /// The first run (repeat 1) is one of those outliers: typically cold caches.
    #[serde(skip_serializing_if = "is_false")]
    pub first_run_outlier: bool,
    pub throughput_median: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_stddev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_max: Option<f64>,
    pub peak_pss_median: Option<f64>,
    pub mean_pss_median: Option<f64>,
    /// Median over the runs of each run's peak RSS: its samples' tree peak, or the kernel's peak of
    /// its largest process when that is higher or the run has no sample
    /// ([`crate::MemorySummary::peak_rss`]).
    pub peak_rss_median: Option<f64>,
    /// Runs whose peak RSS is the kernel's (`peak_rss_median`): the samples missed the peak, or
    /// the command ended before the first sample.
    #[serde(skip_serializing_if = "is_zero")]
    pub peak_rss_kernel_runs: u32,
    pub mean_rss_median: Option<f64>,
    /// This variant's median over the baseline's: < 1 is faster / smaller.
    pub wall_ratio: Option<f64>,
    pub peak_pss_ratio: Option<f64>,
    pub mean_pss_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_ratio: Option<f64>,
    /// Throughput over the baseline's: > 1 is better.
    pub throughput_ratio: Option<f64>,
    /// Standard deviations of the ratios ([`crate::stats::ratio_std_dev`]); absent for the baseline
    /// itself and when either side has fewer than two runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_ratio_stddev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_ratio_stddev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_pss_ratio_stddev: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_ratio_stddev: Option<f64>,
    /// Whether the wall-time (throughput) ratio's ± interval includes 1: the difference from the
    /// baseline is within the noise of the repeats. Absent when there is no uncertainty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_within_noise: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_within_noise: Option<bool>,
    /// The worst allocator check over the runs (not_loaded beats unverified beats loaded).
    pub allocator_check: AllocatorCheck,
}

/// Mean and standard deviation of each figure whose ratio gets an uncertainty.
#[derive(Debug, Clone, Copy, Default)]
struct Spreads {
    wall: Spread,
    throughput: Spread,
    peak_pss: Spread,
    peak_rss: Spread,
}

/// Mean and standard deviation of one figure over the repeats.
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    mean: Option<f64>,
    stddev: Option<f64>,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        Spread {
            mean: mean(values),
            stddev: std_dev(values),
        }
    }
}

/// How the variants of a point are ordered, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// Highest median throughput first (with `--throughput`: programs that run for a fixed time).
    Throughput,
    /// Shortest median wall time first (also what an unknown value reads as).
    #[default]
    #[serde(other)]
    Wall,
}

impl Ranking {
    fn is_wall(&self) -> bool {
        *self == Ranking::Wall
    }
}

// Fields added after results.json's first version are left out when empty, so a file of that
// version reads and writes back unchanged (and a missing field reads as the empty value).
fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// All variants at one parameter point, best first (by `ranked_by`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Group {
    pub params: Assignment,
    pub baseline: Option<String>,
    #[serde(skip_serializing_if = "Ranking::is_wall")]
    pub ranked_by: Ranking,
    pub variants: Vec<VariantSummary>,
}

/// Groups runs by parameter point (in first-seen order) and variant (in `variant_order`).
/// `baseline` names the variant ratios are taken against; if absent from a group, there are no ratios.
pub fn summarize(
    runs: &[RunRecord],
    variant_order: &[String],
    baseline: Option<&str>,
    ranking: Ranking,
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
            let mut summaries: Vec<(VariantSummary, Spreads)> = variant_order
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
                .and_then(|b| summaries.iter().find(|(v, _)| v.variant == b))
                .cloned();
            if let Some(base) = &base {
                for v in &mut summaries {
                    add_ratios(v, base);
                }
            }
            let mut variants: Vec<VariantSummary> = summaries.into_iter().map(|(v, _)| v).collect();
            variants.sort_by(|a, b| match ranking {
                Ranking::Wall => {
                    let key = |v: &VariantSummary| v.wall_median.unwrap_or(f64::INFINITY);
                    key(a).total_cmp(&key(b))
                }
                Ranking::Throughput => {
                    let key = |v: &VariantSummary| v.throughput_median.unwrap_or(f64::NEG_INFINITY);
                    key(b).total_cmp(&key(a))
                }
            });
            Group {
                params,
                baseline: base.map(|(b, _)| b.variant),
                ranked_by: ranking,
                variants,
            }
        })
        .collect()
}

/// Ratios of `v` to the baseline `base`, with their uncertainty: the median's ratio, and the
/// standard deviation propagated from each side's relative standard deviation.
fn add_ratios((v, s): &mut (VariantSummary, Spreads), (base, bs): &(VariantSummary, Spreads)) {
    let is_base = v.variant == base.variant;
    let spread = |r: Option<f64>, a: Spread, b: Spread| -> Option<f64> {
        if is_base {
            return None;
        }
        ratio_std_dev(r?, (a.mean?, a.stddev), (b.mean?, b.stddev))
    };
    v.wall_ratio = ratio(v.wall_median, base.wall_median);
    v.peak_pss_ratio = ratio(v.peak_pss_median, base.peak_pss_median);
    v.mean_pss_ratio = ratio(v.mean_pss_median, base.mean_pss_median);
    v.peak_rss_ratio = ratio(v.peak_rss_median, base.peak_rss_median);
    v.throughput_ratio = ratio(v.throughput_median, base.throughput_median);
    v.wall_ratio_stddev = spread(v.wall_ratio, s.wall, bs.wall);
    v.throughput_ratio_stddev = spread(v.throughput_ratio, s.throughput, bs.throughput);
    v.peak_pss_ratio_stddev = spread(v.peak_pss_ratio, s.peak_pss, bs.peak_pss);
    v.peak_rss_ratio_stddev = spread(v.peak_rss_ratio, s.peak_rss, bs.peak_rss);
    let within = |r: Option<f64>, sd: Option<f64>| Some((r? - 1.0).abs() <= sd?);
    v.wall_within_noise = within(v.wall_ratio, v.wall_ratio_stddev);
    v.throughput_within_noise = within(v.throughput_ratio, v.throughput_ratio_stddev);
}

fn summarize_variant(name: &str, runs: &[&RunRecord]) -> (VariantSummary, Spreads) {
    let ok: Vec<&&RunRecord> = runs.iter().filter(|r| r.ending.ok()).collect();
    let of =
        |f: fn(&RunRecord) -> Option<f64>| -> Vec<f64> { ok.iter().filter_map(|r| f(r)).collect() };
    let sampled = |f: fn(&RunRecord) -> f64| -> Vec<f64> {
        ok.iter()
            .filter(|r| r.memory.samples > 0)
            .map(|r| f(r))
            .collect()
    };
    let walls = of(|r| Some(r.wall));
    let throughputs = of(|r| r.throughput);
    let peak_pss = sampled(|r| r.memory.pss.peak as f64);
    let peak_rss = of(|r| r.memory.peak_rss().map(|p| p as f64));
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
    let outlying = outliers(&walls);
    let first_repeat = ok.iter().position(|r| r.repeat == 0);
    let spreads = Spreads {
        wall: Spread::of(&walls),
        throughput: Spread::of(&throughputs),
        peak_pss: Spread::of(&peak_pss),
        peak_rss: Spread::of(&peak_rss),
    };
    let summary = VariantSummary {
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
        wall_mean: spreads.wall.mean,
        wall_stddev: spreads.wall.stddev,
        user_mean: mean(&of(|r| Some(r.user))),
        sys_mean: mean(&of(|r| Some(r.sys))),
        wall_outliers: outlying.len() as u32,
        first_run_outlier: first_repeat.is_some_and(|i| outlying.contains(&i)),
        throughput_median: median(&throughputs),
        throughput_mean: spreads.throughput.mean,
        throughput_stddev: spreads.throughput.stddev,
        throughput_min: throughputs.iter().copied().reduce(f64::min),
        throughput_max: throughputs.iter().copied().reduce(f64::max),
        peak_pss_median: median(&peak_pss),
        mean_pss_median: median(&sampled(|r| r.memory.pss.mean)),
        peak_rss_median: median(&peak_rss),
        peak_rss_kernel_runs: ok.iter().filter(|r| r.memory.peak_rss_is_kernel()).count() as u32,
        mean_rss_median: median(&sampled(|r| r.memory.rss.mean)),
        allocator_check,
        ..VariantSummary::default()
    };
    (summary, spreads)
}

fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::child::CommandExit;
    use crate::results::{Ending, MemorySummary, SeriesStats};

    fn run(variant: &str, repeat: u32, wall: f64, throughput: f64, peak_rss: u64) -> RunRecord {
        RunRecord {
            variant: variant.into(),
            repeat,
            wall,
            user: wall / 2.0,
            sys: wall / 4.0,
            throughput: Some(throughput),
            ending: Ending {
                status: Some(CommandExit {
                    code: Some(0),
                    signal: None,
                }),
                ..Ending::default()
            },
            memory: MemorySummary {
                samples: 3,
                rss: SeriesStats {
                    peak: peak_rss,
                    mean: peak_rss as f64 / 2.0,
                    last: 0,
                },
                pss: SeriesStats {
                    peak: peak_rss / 2,
                    mean: 0.0,
                    last: 0,
                },
                ..MemorySummary::default()
            },
            ..RunRecord::default()
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn figures_and_ratios_by_hand() {
        // base: wall 1.0, 1.2, 1.4 (mean 1.2, σ 0.2); fast: 0.5, 0.6, 0.7 (mean 0.6, σ 0.1).
        let runs = vec![
            run("base", 0, 1.0, 100.0, 1000),
            run("fast", 0, 0.5, 300.0, 3000),
            run("base", 1, 1.2, 200.0, 1000),
            run("fast", 1, 0.6, 300.0, 3000),
            run("base", 2, 1.4, 300.0, 1000),
            run("fast", 2, 0.7, 300.0, 3000),
        ];
        let order = ["base".to_string(), "fast".to_string()];
        let g = &summarize(&runs, &order, Some("base"), Ranking::Wall)[0];
        assert_eq!(g.variants[0].variant, "fast");
        let (fast, base) = (&g.variants[0], &g.variants[1]);
        assert!(close(base.wall_mean, 1.2) && close(base.wall_stddev, 0.2));
        assert!(close(base.user_mean, 0.6) && close(base.sys_mean, 0.3));
        assert!(close(fast.wall_ratio, 0.5));
        // 0.5 × √((0.1/0.6)² + (0.2/1.2)²) = 0.5 × √(2/36) = 0.117851...
        assert!(close(fast.wall_ratio_stddev, 0.5 * (2.0f64 / 36.0).sqrt()));
        assert_eq!(fast.wall_within_noise, Some(false));
        assert_eq!(base.wall_ratio_stddev, None);
        assert!(close(fast.peak_rss_ratio, 3.0) && close(fast.peak_pss_ratio, 3.0));
        // Memory that never varies: its ratio has no spread.
        assert!(close(fast.peak_rss_ratio_stddev, 0.0));
        // Throughput 100/200/300 (median 200, σ 100) against 300 ×3 (σ 0): 1.5 ± 1.5 × 0.5.
        assert!(close(fast.throughput_ratio, 1.5));
        assert!(close(fast.throughput_ratio_stddev, 0.75));
        assert_eq!(fast.throughput_within_noise, Some(true));
        assert_eq!(
            (base.throughput_min, base.throughput_max),
            (Some(100.0), Some(300.0))
        );
        assert!(close(base.throughput_stddev, 100.0));
        // Ranked by throughput, the same figures order the other way round when it says so.
        let g = &summarize(&runs, &order, Some("base"), Ranking::Throughput)[0];
        assert_eq!(g.variants[0].variant, "fast");
        let slow_but_busy = vec![run("base", 0, 1.0, 500.0, 1), run("fast", 0, 0.5, 300.0, 1)];
        let g = &summarize(&slow_but_busy, &order, Some("base"), Ranking::Throughput)[0];
        assert_eq!(g.variants[0].variant, "base");
        assert_eq!(g.ranked_by, Ranking::Throughput);
        // One run each: ratios, but no uncertainty and no verdict on the noise.
        assert!(close(g.variants[1].wall_ratio, 0.5));
        assert_eq!(g.variants[1].wall_ratio_stddev, None);
        assert_eq!(g.variants[1].wall_within_noise, None);
    }

    /// A run's peak RSS is the larger of its samples' and the kernel's; a run without samples
    /// counts with the kernel's, and a run with neither is left out.
    #[test]
    fn peak_rss_takes_the_kernels_figure_where_the_samples_missed_it() {
        let with = |samples: u64, sampled: u64, kernel: Option<u64>, repeat: u32| {
            let mut r = run("a", repeat, 1.0, 1.0, sampled);
            r.memory.samples = samples;
            r.memory.kernel_peak_rss = kernel;
            r
        };
        let runs = vec![
            with(3, 500, Some(400), 0), // samples above the kernel's: 500
            with(1, 100, Some(700), 1), // one early sample: the kernel's 700
            with(0, 0, Some(900), 2),   // no sample: the kernel's 900
            with(0, 0, None, 3),        // neither: left out
        ];
        let g = &summarize(&runs, &["a".to_string()], None, Ranking::Wall)[0];
        assert_eq!(g.variants[0].peak_rss_median, Some(700.0));
        assert_eq!(g.variants[0].peak_rss_kernel_runs, 2);
        // PSS has no kernel figure: its median is over the sampled runs only.
        assert_eq!(g.variants[0].peak_pss_median, Some(150.0));
    }

    #[test]
    fn a_slow_first_run_is_an_outlier() {
        let walls = [3.0, 1.0, 1.01, 0.99, 1.0];
        let runs: Vec<RunRecord> = walls
            .iter()
            .enumerate()
            .map(|(i, w)| run("a", i as u32, *w, 1.0, 1))
            .collect();
        let g = &summarize(&runs, &["a".to_string()], None, Ranking::Wall)[0];
        assert_eq!(g.variants[0].wall_outliers, 1);
        assert!(g.variants[0].first_run_outlier);
    }
}
