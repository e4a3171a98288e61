//! The answer of a search: the recommended candidate, its gain and costs as ratios with their
//! spread against the baseline and the best default allocator, the Pareto front of memory against
//! time, the baseline's drift, and the lines that deploy it.
use allocators::Variant;

use crate::objective::Metric;
use crate::search::{Outcome, Status};
use crate::space::Origin;
use crate::stats::{ratio, Estimate};
pub use runner::tune_record::{Answer, Deployment, Drift, Figure, ParetoPoint};

/// The figures of `a` against `b` for every metric both have.
pub fn compare(outcome: &Outcome, a: usize, b: usize) -> Vec<Figure> {
    Metric::ALL
        .iter()
        .filter_map(|&metric| {
            let ea = outcome.estimate(a, metric)?;
            let eb = outcome.estimate(b, metric)?;
            Some(Figure {
                metric,
                ratio: ratio(&ea, &eb, outcome.pooled_noise(metric)),
            })
        })
        .collect()
}

/// The figures of `a` against `b` from their fresh confirmation runs only.
pub fn compare_fresh(outcome: &Outcome, a: usize, b: usize) -> Vec<Figure> {
    Metric::ALL
        .iter()
        .filter_map(|&metric| {
            let ea = outcome.fresh_estimate(a, metric)?;
            let eb = outcome.fresh_estimate(b, metric)?;
            Some(Figure {
                metric,
                ratio: ratio(&ea, &eb, outcome.pooled_noise(metric)),
            })
        })
        .collect()
}

/// Builds the answer from what the search measured. A candidate is recommended only when the
/// confirmation's fresh runs beat the baseline's beyond the noise; its figures are then the fresh
/// runs', never the race's (the best of many single runs is the luckiest as much as the best).
pub fn answer(
    outcome: &Outcome,
    objective: crate::Objective,
    constraints: &crate::Constraints,
) -> Option<Answer> {
    const BASELINE: usize = 0;
    let metric = objective.metric();
    let lower = metric.lower_is_better();
    outcome.estimate(BASELINE, metric)?;
    let feasible = |c: usize| {
        constraints.limits().iter().all(|&(m, limit)| {
            match (outcome.estimate(c, m), outcome.estimate(BASELINE, m)) {
                (Some(e), Some(b)) => e.mean / b.mean <= limit,
                _ => true,
            }
        })
    };
    let better = |a: &Estimate, b: &Estimate| {
        if lower {
            a.mean < b.mean
        } else {
            a.mean > b.mean
        }
    };
    let best_of = |pool: &mut dyn Iterator<Item = usize>| -> Option<usize> {
        let mut best: Option<(usize, Estimate)> = None;
        for c in pool {
            let Some(e) = outcome.estimate(c, metric) else {
                continue;
            };
            if best.as_ref().is_none_or(|(_, b)| better(&e, b)) {
                best = Some((c, e));
            }
        }
        best.map(|(c, _)| c)
    };
    let n = outcome.candidates.len();
    // The confirmation names the race's leader; without one (none asked for), the best by mean.
    let best = match &outcome.confirmation {
        Some(c) => c.candidate,
        None => best_of(
            &mut (0..n)
                .filter(|&c| (c == BASELINE || outcome.status[c] == Status::Alive) && feasible(c)),
        )
        .unwrap_or(BASELINE),
    };
    let confirmation = outcome
        .confirmation
        .as_ref()
        .filter(|c| c.candidate == best);
    let beats = best != BASELINE && confirmation.is_some_and(|c| c.confirmed);
    let recommended = if beats { best } else { BASELINE };
    let shown = best;
    let best_default = best_of(&mut (0..n).filter(|&c| {
        matches!(
            outcome.candidates[c].origin,
            Origin::Default | Origin::Baseline
        ) && outcome.status[c] != Status::Failed
    }));
    let fresh = compare_fresh(outcome, shown, BASELINE);
    let race = compare(outcome, shown, BASELINE);
    let against_baseline = if fresh.is_empty() {
        race.clone()
    } else {
        fresh.clone()
    };
    let objective_ratio =
        |figures: &[Figure]| figures.iter().find(|f| f.metric == metric).map(|f| f.ratio);
    let label = |c: usize| outcome.candidates[c].variant.label.clone();
    let race_runs = |c: usize| outcome.figures(c).len();
    let fresh_runs = |c: usize| outcome.fresh_estimate(c, metric).map_or(0, |e| e.n);
    let verdict = match (beats, objective_ratio(&fresh), objective_ratio(&race)) {
        (true, Some(r), _) => format!(
            "use {}: {} {:.2} ± {:.2}× the baseline's (glibc) in {} fresh runs against {}, after a race of {} runs",
            label(best),
            metric.name(),
            r.value,
            r.sd,
            fresh_runs(best),
            fresh_runs(BASELINE),
            outcome.trials.iter().filter(|t| !t.confirmation).count()
        ),
        _ if best == BASELINE => {
            "nothing beats the baseline (glibc) beyond the noise: keep it".to_string()
        }
        (false, Some(r), _) => format!(
            "nothing beats the baseline (glibc) beyond the noise: keep it; the race's leader, {}, has {} {:.2} ± {:.2}× the baseline's in {} fresh runs against {}",
            label(best),
            metric.name(),
            r.value,
            r.sd,
            fresh_runs(best),
            fresh_runs(BASELINE)
        ),
        (_, None, Some(r)) => format!(
            "keep the baseline (glibc): the race's leader, {}, with {} {:.2}× the baseline's on {} of its runs, could not be confirmed ({}); give a longer --budget, or check it with `alloclens run -a glibc,{} -r 5`",
            label(best),
            metric.name(),
            r.value,
            if race_runs(best) == 1 { "one".to_string() } else { race_runs(best).to_string() },
            confirmation
                .and_then(|c| c.why.clone())
                .unwrap_or_else(|| "no fresh runs".into()),
            label(best)
        ),
        _ => "nothing beats the baseline (glibc) beyond the noise: keep it".to_string(),
    };
    Some(Answer {
        recommended,
        recommended_label: label(recommended),
        beats_baseline: beats,
        best_found: (!beats && best != BASELINE).then_some(best),
        verdict,
        against_baseline,
        against_best_default: best_default
            .filter(|&d| d != shown && d != BASELINE)
            .map(|d| compare(outcome, shown, d))
            .unwrap_or_default(),
        best_default,
        pareto: pareto(outcome),
        drift: drift(outcome, metric),
        deployment: (recommended != BASELINE)
            .then(|| deployment(&outcome.candidates[recommended].variant)),
        runs: if beats {
            fresh_runs(recommended)
        } else {
            race_runs(recommended)
        },
        confirmation: confirmation.cloned(),
    })
}

/// The candidates no other beats on both mean PSS and wall time, fastest first.
pub fn pareto(outcome: &Outcome) -> Vec<ParetoPoint> {
    let (Some(bm), Some(bt)) = (
        outcome.estimate(0, Metric::MeanPss),
        outcome.estimate(0, Metric::Wall),
    ) else {
        return Vec::new();
    };
    let points: Vec<ParetoPoint> = (0..outcome.candidates.len())
        .filter(|&c| outcome.status[c] != Status::Failed)
        .filter_map(|c| {
            let m = outcome.estimate(c, Metric::MeanPss)?;
            let t = outcome.estimate(c, Metric::Wall)?;
            Some(ParetoPoint {
                candidate: c,
                label: outcome.candidates[c].variant.label.clone(),
                time_ratio: t.mean / bt.mean,
                memory_ratio: m.mean / bm.mean,
                runs: m.n,
            })
        })
        .collect();
    let dominated = |p: &ParetoPoint| {
        points.iter().any(|q| {
            q.time_ratio <= p.time_ratio
                && q.memory_ratio <= p.memory_ratio
                && (q.time_ratio < p.time_ratio || q.memory_ratio < p.memory_ratio)
        })
    };
    let mut front: Vec<ParetoPoint> = points.iter().filter(|p| !dominated(p)).cloned().collect();
    front.sort_by(|a, b| a.time_ratio.total_cmp(&b.time_ratio));
    front
}

fn drift(outcome: &Outcome, metric: Metric) -> Option<Drift> {
    let values: Vec<f64> = outcome
        .figures(0)
        .iter()
        .filter_map(|f| f.get(metric))
        .collect();
    if values.len() < 3 {
        return None;
    }
    let third = values.len() / 3;
    let first = Estimate::of(&values[..third])?;
    let last = Estimate::of(&values[values.len() - third..])?;
    let change = last.mean / first.mean - 1.0;
    let noise = outcome.pooled_noise(metric);
    Some(Drift {
        change,
        runs: values.len(),
        notable: change.abs() > 2.0 * noise,
    })
}

/// The environment of `variant` (as `run` sets it, without what this process inherited), and the
/// lines that set it for a shell, a systemd service and a Docker image.
pub fn deployment(variant: &Variant) -> Deployment {
    let env: Vec<(String, String)> = variant
        .environment_from(|_| None)
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let shell = env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect::<Vec<_>>()
        .join(" ");
    let systemd = format!(
        "Environment={}",
        env.iter()
            .map(|(k, v)| format!("\"{k}={}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let dockerfile = format!(
        "ENV {}",
        env.iter()
            .map(|(k, v)| if v.contains([' ', '"', '\\', '$']) {
                format!(
                    "{k}=\"{}\"",
                    v.replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('$', "\\$")
                )
            } else {
                format!("{k}={v}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    Deployment {
        env,
        shell,
        systemd,
        dockerfile,
    }
}

/// A value as a POSIX shell word.
fn shell_quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:,=+-@%".contains(c))
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

/// The `k` best candidates but the baseline by their mean objective, among those that ran and are
/// not clearly outside a constraint: what replay screening hands to real runs.
///
/// "Clearly" (beyond `DROP_Z` standard errors), not by the point estimate: a replay's time is the
/// allocator's alone, its calls back to back, so its ratios are noisier and wider than the program's
/// (a program that waits or computes between calls pays a smaller share); the real runs that
/// follow judge the constraints.
pub fn best_candidates(
    outcome: &Outcome,
    objective: crate::Objective,
    constraints: &crate::Constraints,
    k: usize,
) -> Vec<usize> {
    let metric = objective.metric();
    let feasible = |c: usize| {
        constraints.limits().iter().all(|&(m, limit)| {
            outcome
                .excess_over_limit(c, m, limit)
                .is_none_or(|excess| excess <= crate::search::DROP_Z)
        })
    };
    let mut ranked: Vec<(usize, f64)> = (1..outcome.candidates.len())
        .filter(|&c| outcome.status[c] != Status::Failed && feasible(c))
        .filter_map(|c| {
            let mean = outcome.estimate(c, metric)?.mean;
            Some((
                c,
                if metric.lower_is_better() {
                    mean
                } else {
                    -mean
                },
            ))
        })
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    ranked.into_iter().take(k).map(|(c, _)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objective::Figures;
    use crate::search::Trial;
    use crate::{Candidate, Constraints, Objective};

    /// An outcome of three candidates (the baseline first), each with its runs' (mean PSS, wall).
    fn outcome(runs: &[&[(f64, f64)]]) -> Outcome {
        let candidates = ["glibc", "glibc:arena_max=1", "jemalloc:narenas=1"]
            .iter()
            .enumerate()
            .map(|(id, spec)| Candidate {
                id,
                variant: allocators::parse_variant(spec).unwrap(),
                origin: if id == 0 {
                    Origin::Baseline
                } else {
                    Origin::Spread
                },
            })
            .collect();
        let trials = runs
            .iter()
            .enumerate()
            .flat_map(|(candidate, runs)| {
                runs.iter().map(move |&(mean_pss, wall)| Trial {
                    candidate,
                    pass: 0,
                    at_s: 0.0,
                    took_s: wall,
                    figures: Some(Figures {
                        mean_pss,
                        peak_pss: mean_pss,
                        wall,
                        throughput: None,
                    }),
                    failure: None,
                    run: None,
                    confirmation: false,
                })
            })
            .collect();
        Outcome {
            candidates,
            status: vec![Status::Alive; runs.len()],
            trials,
            runs: Vec::new(),
            events: Vec::new(),
            interrupted: false,
            elapsed_s: 0.0,
            stop_reason: String::new(),
            evaluator: "replay",
            confirmation: None,
        }
    }

    #[test]
    fn screening_keeps_a_candidate_whose_time_is_only_noisily_above_the_limit() {
        // The cache workload's screening: glibc:arena_max=1 had the least memory, and a replay time
        // of 1.39 ± 0.53× against a limit of 1.10; by its point estimate it was left out and real
        // runs never saw it. Noisy replay times: 0.6 to 2.2 s around the baseline's 1 s.
        let baseline: &[(f64, f64)] = &[(100.0, 0.6), (100.0, 1.4), (100.0, 1.0)];
        let noisy_slow: &[(f64, f64)] = &[(53.0, 0.7), (53.0, 2.2), (53.0, 1.3)];
        let fine: &[(f64, f64)] = &[(80.0, 1.0), (80.0, 1.0), (80.0, 1.0)];
        let out = outcome(&[baseline, noisy_slow, fine]);
        let limit = Constraints {
            max_time_ratio: Some(1.10),
            max_memory_ratio: None,
        };
        assert_eq!(
            best_candidates(&out, Objective::Memory, &limit, 2),
            vec![1, 2]
        );
        // Clearly slower (every run 3× the baseline's): left out.
        let clearly_slow: &[(f64, f64)] = &[(53.0, 3.0), (53.0, 3.1), (53.0, 2.9)];
        let out = outcome(&[baseline, clearly_slow, fine]);
        assert_eq!(best_candidates(&out, Objective::Memory, &limit, 2), vec![2]);
    }

    #[test]
    fn deployment_lines_carry_the_variant_environment() {
        let v = allocators::parse_variant("glibc:arena_max=2,trim_threshold=1M").unwrap();
        let d = deployment(&v);
        assert_eq!(
            d.env,
            vec![(
                "GLIBC_TUNABLES".to_string(),
                "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1048576".to_string()
            )]
        );
        assert_eq!(
            d.shell,
            "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1048576"
        );
        assert_eq!(
            d.systemd,
            "Environment=\"GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1048576\""
        );
        assert!(d
            .dockerfile
            .starts_with("ENV GLIBC_TUNABLES=glibc.malloc.arena_max=2"));
        assert_eq!(shell_quote("a b"), "'a b'");
    }
}
