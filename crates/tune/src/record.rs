//! What results.json keeps of a search (its `tune` member, typed in `runner::tune_record`) and
//! candidates.csv, built from what the search measured.
use std::io::Write;

pub use runner::tune_record::{CandidateRecord, Screening, TuneRecord};

use crate::answer::compare;
use crate::objective::{Constraints, Metric, Objective};
use crate::search::{Outcome, Status};
use crate::space::Origin;

/// Compares the replay screening with the real runs of the candidates it handed on.
pub fn screening(trace: &str, screen: &Outcome, real: &Outcome, objective: Objective) -> Screening {
    let metric = objective.metric();
    let sign = if metric.lower_is_better() { 1.0 } else { -1.0 };
    let label = |o: &Outcome, c: usize| o.candidates[c].variant.label.clone();
    let mean_by_label = |o: &Outcome, l: &str| {
        (0..o.candidates.len())
            .find(|&c| label(o, c) == l)
            .and_then(|c| o.estimate(c, metric))
            .map(|e| sign * e.mean)
    };
    let both: Vec<(String, f64, f64)> = (0..real.candidates.len())
        .filter_map(|c| {
            let l = label(real, c);
            Some((
                l.clone(),
                mean_by_label(screen, &l)?,
                mean_by_label(real, &l)?,
            ))
        })
        .collect();
    let (mut agreeing, mut pairs) = (0, 0);
    for i in 0..both.len() {
        for j in i + 1..both.len() {
            pairs += 1;
            let by_replay = both[i].1 < both[j].1;
            let by_runs = both[i].2 < both[j].2;
            if by_replay == by_runs {
                agreeing += 1;
            }
        }
    }
    let best = |key: fn(&(String, f64, f64)) -> f64| {
        both.iter()
            .min_by(|a, b| key(a).total_cmp(&key(b)))
            .map(|b| b.0.clone())
    };
    let same_best = match (best(|b| b.1), best(|b| b.2)) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    let base = screen.estimate(0, metric);
    Screening {
        trace: trace.to_string(),
        candidates: screen.candidates.len(),
        evaluations: screen.trials.len(),
        elapsed_s: screen.elapsed_s,
        stop_reason: screen.stop_reason.clone(),
        confirmed: (1..real.candidates.len())
            .map(|c| {
                let l = label(real, c);
                let ratio = (0..screen.candidates.len())
                    .find(|&s| label(screen, s) == l)
                    .and_then(|s| Some(screen.estimate(s, metric)?.mean / base?.mean))
                    .unwrap_or(f64::NAN);
                (l, ratio)
            })
            .collect(),
        agreeing_pairs: agreeing,
        pairs,
        same_best,
    }
}

/// The record of a search.
pub fn build(
    outcome: &Outcome,
    objective: Objective,
    constraints: Constraints,
    throughput: Option<String>,
    budget_s: f64,
    notes: Vec<String>,
) -> TuneRecord {
    let candidates = outcome
        .candidates
        .iter()
        .map(|c| {
            let event = outcome
                .events
                .iter()
                .find(|e| e.candidate == Some(c.id) && (e.kind == "dropped" || e.kind == "failed"));
            // The race's runs: the fresh runs of the confirmation are the answer's.
            let trials = outcome
                .trials
                .iter()
                .filter(|t| t.candidate == c.id && !t.confirmation);
            CandidateRecord {
                id: c.id,
                label: c.variant.label.clone(),
                allocator: c.variant.allocator.clone(),
                settings: c.variant.settings.clone(),
                origin: c.origin.clone(),
                status: outcome.status[c.id].clone(),
                runs: trials.clone().filter(|t| t.figures.is_some()).count(),
                failed_runs: trials.filter(|t| t.failure.is_some()).count(),
                mean_pss: outcome.estimate(c.id, Metric::MeanPss),
                peak_pss: outcome.estimate(c.id, Metric::PeakPss),
                wall: outcome.estimate(c.id, Metric::Wall),
                throughput: outcome.estimate(c.id, Metric::Throughput),
                vs_baseline: if c.id == 0 {
                    Vec::new()
                } else {
                    compare(outcome, c.id, 0)
                },
                dropped_at_s: event.map(|e| e.at_s),
                why: event.map(|e| e.why.clone()),
            }
        })
        .collect();
    TuneRecord {
        objective,
        constraints,
        throughput,
        budget_s,
        elapsed_s: outcome.elapsed_s,
        evaluator: outcome.evaluator.to_string(),
        stop_reason: outcome.stop_reason.clone(),
        interrupted: outcome.interrupted,
        baseline: outcome.candidates[0].variant.label.clone(),
        noise: Metric::ALL
            .iter()
            .map(|&m| (m, outcome.pooled_noise(m)))
            .collect(),
        candidates,
        trials: outcome.trials.clone(),
        events: outcome.events.clone(),
        answer: crate::answer::answer(outcome, objective, &constraints),
        notes,
        screening: None,
    }
}

/// candidates.csv: one row per candidate, raw numbers (bytes, seconds).
pub fn write_csv(record: &TuneRecord, out: impl Write) -> csv::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "id",
        "label",
        "allocator",
        "settings",
        "origin",
        "status",
        "runs",
        "failed_runs",
        "mean_pss",
        "mean_pss_sd",
        "peak_pss",
        "peak_pss_sd",
        "wall_s",
        "wall_sd",
        "throughput",
        "throughput_sd",
        "mean_pss_ratio",
        "mean_pss_ratio_sd",
        "wall_ratio",
        "wall_ratio_sd",
        "pareto",
        "recommended",
        "dropped_at_s",
        "why",
    ])?;
    let num = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    for c in &record.candidates {
        let ratio = |m: Metric| {
            c.vs_baseline
                .iter()
                .find(|f| f.metric == m)
                .map(|f| f.ratio)
        };
        let in_front = record
            .answer
            .as_ref()
            .is_some_and(|a| a.pareto.iter().any(|p| p.candidate == c.id));
        let recommended = record
            .answer
            .as_ref()
            .is_some_and(|a| a.recommended == c.id);
        let origin = match &c.origin {
            Origin::Baseline => "baseline",
            Origin::Default => "default",
            Origin::Spread => "spread",
            Origin::Combined { .. } => "combined",
            Origin::Given => "given",
        };
        let status = match c.status {
            Status::Alive => "alive",
            Status::Dropped => "dropped",
            Status::Failed => "failed",
        };
        let settings: Vec<String> = c.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        w.write_record([
            c.id.to_string(),
            c.label.clone(),
            c.allocator.clone(),
            settings.join(","),
            origin.to_string(),
            status.to_string(),
            c.runs.to_string(),
            c.failed_runs.to_string(),
            num(c.mean_pss.map(|e| e.mean)),
            num(c.mean_pss.and_then(|e| e.sd)),
            num(c.peak_pss.map(|e| e.mean)),
            num(c.peak_pss.and_then(|e| e.sd)),
            num(c.wall.map(|e| e.mean)),
            num(c.wall.and_then(|e| e.sd)),
            num(c.throughput.map(|e| e.mean)),
            num(c.throughput.and_then(|e| e.sd)),
            num(ratio(Metric::MeanPss).map(|r| r.value)),
            num(ratio(Metric::MeanPss).map(|r| r.sd)),
            num(ratio(Metric::Wall).map(|r| r.value)),
            num(ratio(Metric::Wall).map(|r| r.sd)),
            in_front.to_string(),
            recommended.to_string(),
            num(c.dropped_at_s),
            c.why.clone().unwrap_or_default(),
        ])?;
    }
    w.flush()?;
    Ok(())
}
