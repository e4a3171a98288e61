//! The terminal summary of a search.
use std::fmt::Write;

use runner::tune_record::{CandidateRecord, Figure, Metric, Status, TuneRecord};

/// How many candidates the summary lists (candidates.csv has them all).
const LISTED: usize = 12;

/// "0.58 ± 0.03× (0.52–0.64; 10 and 25 runs)": the ratio ± σ, its interval (± 2σ), and the runs of
/// both sides.
pub(crate) fn figure_line(f: &Figure) -> String {
    let r = &f.ratio;
    format!(
        "{:.2} ± {:.2}× ({:.2}–{:.2}; {} and {} runs{})",
        r.value,
        r.sd,
        r.low,
        r.high,
        r.runs[0],
        r.runs[1],
        if r.pooled_noise { ", pooled noise" } else { "" }
    )
}

pub(crate) fn status_word(s: &Status) -> &'static str {
    match s {
        Status::Alive => "kept",
        Status::Dropped => "dropped",
        Status::Failed => "failed",
    }
}

/// "1 run", "3 runs".
fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

use crate::format::duration;

/// The summary of `tune` on the terminal: the answer first, then how to deploy it, the Pareto front, the best candidates.
pub fn render_summary(record: &TuneRecord) -> String {
    let mut out = String::new();
    let metric = record.objective.metric();
    let _ = writeln!(
        out,
        "tune: objective {} ({}), {} evaluations ({}s) of {} candidates in {} of a {} budget: {}",
        record.objective.name(),
        metric.name(),
        record.trials.len(),
        record.evaluator,
        record.candidates.len(),
        duration(record.elapsed_s),
        duration(record.budget_s),
        record.stop_reason
    );
    if let Some(s) = &record.screening {
        let _ = writeln!(
            out,
            "screening: {} replays of {} candidates in {} ({}); the best {} confirmed with real runs; replay and real runs order {} of {} pairs the same way{}",
            s.evaluations,
            s.candidates,
            duration(s.elapsed_s),
            s.stop_reason,
            s.confirmed.len(),
            s.agreeing_pairs,
            s.pairs,
            match s.same_best {
                Some(true) => ", and agree on the best",
                Some(false) => ", but not on the best",
                None => "",
            }
        );
    } else if record.evaluator == "replay" {
        let _ = writeln!(
            out,
            "figures from replays of the trace: memory is the replay process's RSS over the recorded calls, time the replay's; confirm with `alloclens tune TRACE -- CMD`"
        );
    }
    let Some(answer) = &record.answer else {
        let _ = writeln!(
            out,
            "no answer: the baseline gave no figures before the search ended"
        );
        return out;
    };
    if let Some(d) = &answer.drift {
        let _ = writeln!(
            out,
            "baseline drift: {:+.1} % from the first to the last third of its {} runs{}",
            100.0 * d.change,
            d.runs,
            if d.notable {
                " — beyond the noise: the machine changed under the search, intervals are wider than they look"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out);
    let shown = answer.best_found.unwrap_or(answer.recommended);
    if answer.beats_baseline {
        let _ = writeln!(out, "Recommended: {}", answer.recommended_label);
        let _ = writeln!(
            out,
            "  confirmed by fresh runs after the race, alternated with fresh runs of the baseline: the figures below are theirs"
        );
    } else {
        let _ = writeln!(
            out,
            "Recommended: keep glibc's default — {}",
            answer.verdict
        );
    }
    if shown != 0 {
        let _ = writeln!(
            out,
            "  {} against the baseline ({}):",
            record.candidates[shown].label, record.baseline
        );
        for f in &answer.against_baseline {
            let _ = writeln!(out, "    {:<10} {}", f.metric.name(), figure_line(f));
        }
        if let Some(d) = answer
            .best_default
            .filter(|_| !answer.against_best_default.is_empty())
        {
            let _ = writeln!(
                out,
                "  against the best default allocator ({}):",
                record.candidates[d].label
            );
            for f in &answer.against_best_default {
                let _ = writeln!(out, "    {:<10} {}", f.metric.name(), figure_line(f));
            }
        }
    }
    if let Some(d) = &answer.deployment {
        let _ = writeln!(out, "\nDeploy it:");
        let _ = writeln!(out, "  {} ./your-program", d.shell);
        let _ = writeln!(out, "  systemd:    {}", d.systemd);
        let _ = writeln!(out, "  Dockerfile: {}", d.dockerfile);
    }
    if !answer.pareto.is_empty() {
        let _ = writeln!(
            out,
            "\nPareto front, mean PSS against time (ratios to the baseline), fastest first:"
        );
        for p in &answer.pareto {
            let _ = writeln!(
                out,
                "  time {:.2}×  mean PSS {:.2}×  {} ({})",
                p.time_ratio,
                p.memory_ratio,
                p.label,
                runs(p.runs)
            );
        }
    }
    let mut ranked: Vec<&CandidateRecord> = record
        .candidates
        .iter()
        .filter(|c| c.vs_baseline.iter().any(|f| f.metric == metric))
        .collect();
    let key = |c: &CandidateRecord| {
        let v = c
            .vs_baseline
            .iter()
            .find(|f| f.metric == metric)
            .map_or(f64::NAN, |f| f.ratio.value);
        if metric.lower_is_better() {
            v
        } else {
            -v
        }
    };
    ranked.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let _ = writeln!(
        out,
        "\nCandidates, best {} first ({} of {}; every one in candidates.csv):",
        metric.name(),
        ranked.len().min(LISTED),
        record.candidates.len()
    );
    let width = ranked
        .iter()
        .take(LISTED)
        .map(|c| c.label.len())
        .max()
        .unwrap_or(10)
        .max(10);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>4}  {:>14}  {:>14}  status",
        "candidate",
        "runs",
        metric.name(),
        if metric == Metric::Wall {
            "mean PSS"
        } else {
            "time"
        }
    );
    for c in ranked.iter().take(LISTED) {
        let ratio = |m: Metric| {
            c.vs_baseline
                .iter()
                .find(|f| f.metric == m)
                .map(|f| format!("{:.2} ± {:.2}×", f.ratio.value, f.ratio.sd))
                .unwrap_or_default()
        };
        let other = if metric == Metric::Wall {
            Metric::MeanPss
        } else {
            Metric::Wall
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {:>4}  {:>14}  {:>14}  {}",
            c.label,
            c.runs,
            ratio(metric),
            ratio(other),
            status_word(&c.status)
        );
    }
    let failed: Vec<&CandidateRecord> = record
        .candidates
        .iter()
        .filter(|c| c.status == Status::Failed)
        .collect();
    for c in failed {
        let _ = writeln!(
            out,
            "  {}: failed: {}",
            c.label,
            c.why.clone().unwrap_or_default()
        );
    }
    out
}
