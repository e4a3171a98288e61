//! The report page of a search: the recommendation, the Pareto chart, the candidates' intervals
//! and the search's history, drawn with the report crate's charts and tables.
use runner::tune_record::{CandidateRecord, Metric, Ratio, Status, TuneRecord};

use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, IntervalPlot, IntervalRow, Section, Table};
use crate::format::duration;
use crate::terminal::tune::{figure_line, status_word};

/// The sections a search adds before its runs' own.
pub(crate) fn sections(record: &TuneRecord) -> Vec<Section> {
    vec![
        recommendation(record),
        pareto(record),
        intervals(record),
        history(record),
    ]
}

fn recommendation(record: &TuneRecord) -> Section {
    let mut s = Section::new("tune-answer", "Tune: the answer");
    let Some(answer) = &record.answer else {
        s.push(Block::Warning(
            "no answer: the baseline gave no figures before the search ended".into(),
        ));
        return s;
    };
    s.push(Block::Paragraph(answer.verdict.clone()));
    if record.interrupted {
        s.push(Block::Warning(format!(
            "the search was interrupted after {:.0}s: the answer rests on what was measured until then",
            record.elapsed_s
        )));
    }
    let mut facts: Vec<(String, String)> = vec![
        ("objective".into(), record.objective.name().into()),
        (
            "budget".into(),
            format!(
                "{} ({} used: {})",
                duration(record.budget_s),
                duration(record.elapsed_s),
                record.stop_reason
            ),
        ),
        (
            "evaluations".into(),
            format!("{} ({})", record.trials.len(), record.evaluator),
        ),
    ];
    if let Some(c) = &answer.confirmation {
        let said = match (&c.why, c.confirmed) {
            (_, true) => "its fresh runs beat the baseline's beyond the noise".to_string(),
            (Some(why), false) => format!("not confirmed: {why}"),
            (None, false) => "not confirmed".to_string(),
        };
        facts.push((
            format!("confirmation of {}", record.candidates[c.candidate].label),
            said,
        ));
    }
    for f in &answer.against_baseline {
        facts.push((format!("{} vs baseline", f.metric.name()), figure_line(f)));
    }
    if let Some(d) = answer.best_default {
        for f in &answer.against_best_default {
            facts.push((
                format!("{} vs {}", f.metric.name(), record.candidates[d].label),
                figure_line(f),
            ));
        }
    }
    if let Some(drift) = &answer.drift {
        facts.push((
            "baseline drift".into(),
            format!(
                "{:+.1} % from the first to the last third of its {} runs{}",
                100.0 * drift.change,
                drift.runs,
                if drift.notable {
                    " (beyond the noise: the machine changed)"
                } else {
                    ""
                }
            ),
        ));
    }
    s.push(Block::Facts(facts));
    match &answer.deployment {
        Some(d) => {
            s.push(Block::Paragraph("Deploy it:".into()));
            s.push(Block::Code(format!(
                "{} ./your-program\n\n# systemd unit, [Service] section\n{}\n\n# Dockerfile\n{}",
                d.shell, d.systemd, d.dockerfile
            )));
        }
        None => {
            s.push(Block::Paragraph(
                "Nothing to deploy: glibc's default is the answer.".into(),
            ));
        }
    }
    s
}

fn pareto(record: &TuneRecord) -> Section {
    let mut s = Section::new("tune-pareto", "Tune: memory against time");
    let Some(answer) = &record.answer else {
        return s;
    };
    s.push(Block::Paragraph(
        "Each candidate's mean PSS and wall time as ratios to the baseline (glibc's default); the Pareto front (no other candidate is better on both) is drawn bold.".into(),
    ));
    let ratio = |c: &CandidateRecord, m: Metric| {
        c.vs_baseline
            .iter()
            .find(|f| f.metric == m)
            .map(|f| f.ratio.value)
    };
    let others: Vec<(f64, f64)> = record
        .candidates
        .iter()
        .filter(|c| {
            c.status != Status::Failed && !answer.pareto.iter().any(|p| p.candidate == c.id)
        })
        .filter_map(|c| Some((ratio(c, Metric::Wall)?, ratio(c, Metric::MeanPss)?)))
        .collect();
    let front: Vec<(f64, f64)> = answer
        .pareto
        .iter()
        .map(|p| (p.time_ratio, p.memory_ratio))
        .collect();
    let mut chart = Chart::from_lines(
        "tune-pareto",
        "Mean PSS against wall time (ratios to the baseline)",
        Axis::new("wall time ratio", Unit::Plain),
        Axis::new("mean PSS ratio", Unit::Plain),
        vec![
            Line {
                label: "Pareto front".into(),
                points: front,
                color: palette(1),
                emphasis: Emphasis::Bold,
            },
            Line {
                label: "other candidates".into(),
                points: others,
                color: palette(0),
                emphasis: Emphasis::Faint,
            },
            Line {
                label: "baseline".into(),
                points: vec![(1.0, 1.0)],
                color: palette(8),
                emphasis: Emphasis::Normal,
            },
        ],
    );
    chart.points = true;
    chart.connect = false;
    s.push_chart(chart);
    s.push(Block::Table(Table {
        caption: Some("The Pareto front, fastest first".into()),
        headers: vec![
            "candidate".into(),
            "time ratio".into(),
            "mean PSS ratio".into(),
            "runs".into(),
        ],
        rows: answer
            .pareto
            .iter()
            .map(|p| {
                vec![
                    p.label.clone(),
                    format!("{:.2}×", p.time_ratio),
                    format!("{:.2}×", p.memory_ratio),
                    p.runs.to_string(),
                ]
            })
            .collect(),
    }));
    s
}

fn intervals(record: &TuneRecord) -> Section {
    let metric = record.objective.metric();
    let mut s = Section::new("tune-candidates", "Tune: the candidates");
    s.push(Block::Paragraph(format!(
        "Each candidate's {} as a ratio to the baseline, with its interval (± 2 standard deviations of a single run's ratio), best first.",
        metric.name()
    )));
    let mut ranked: Vec<(&CandidateRecord, Ratio)> = record
        .candidates
        .iter()
        .filter_map(|c| Some((c, c.vs_baseline.iter().find(|f| f.metric == metric)?.ratio)))
        .collect();
    let lower = metric.lower_is_better();
    ranked.sort_by(|a, b| {
        if lower {
            a.1.value.total_cmp(&b.1.value)
        } else {
            b.1.value.total_cmp(&a.1.value)
        }
    });
    let recommended = record.answer.as_ref().map(|a| a.recommended);
    let rows = ranked
        .iter()
        .map(|(c, r)| IntervalRow {
            name: c.label.clone(),
            value: r.value,
            low: r.low,
            high: r.high,
            color: match c.status {
                Status::Alive => palette(0),
                _ => "#9a9a9a".to_string(),
            },
            strong: recommended == Some(c.id),
            note: format!(
                "{} run{}, {}",
                c.runs,
                if c.runs == 1 { "" } else { "s" },
                status_word(&c.status)
            ),
        })
        .collect();
    s.push(Block::Intervals(IntervalPlot {
        id: "tune-intervals".into(),
        title: format!(
            "{} ratio to the baseline, best first (the line at 1: the baseline; grey: dropped)",
            metric.name()
        ),
        axis_label: format!("{} ratio to the baseline", metric.name()),
        reference: Some(1.0),
        rows,
    }));
    let rows = record
        .candidates
        .iter()
        .map(|c| {
            let f = |m: Metric| {
                c.vs_baseline
                    .iter()
                    .find(|f| f.metric == m)
                    .map(figure_line)
                    .unwrap_or_default()
            };
            vec![
                c.label.clone(),
                status_word(&c.status).into(),
                c.runs.to_string(),
                f(Metric::MeanPss),
                f(Metric::PeakPss),
                f(Metric::Wall),
                c.why.clone().unwrap_or_default(),
            ]
        })
        .collect();
    s.push(Block::Table(Table {
        caption: Some("Every candidate against the baseline".into()),
        headers: vec![
            "candidate".into(),
            "status".into(),
            "runs".into(),
            "mean PSS".into(),
            "peak PSS".into(),
            "time".into(),
            "why dropped".into(),
        ],
        rows,
    }));
    s
}

fn history(record: &TuneRecord) -> Section {
    let metric = record.objective.metric();
    let mut s = Section::new("tune-history", "Tune: the search");
    s.push(Block::Paragraph(format!(
        "The baseline's {} at each of its runs, over the search (the machine's drift), and what the search decided when.",
        metric.name()
    )));
    let baseline: Vec<(f64, f64)> = record
        .trials
        .iter()
        .filter(|t| t.candidate == 0)
        .filter_map(|t| Some((t.at_s, t.figures?.get(metric)?)))
        .collect();
    let unit = match metric {
        Metric::MeanPss | Metric::PeakPss => Unit::Bytes,
        Metric::Wall => Unit::Seconds,
        Metric::Throughput => Unit::Rate,
    };
    let mut chart = Chart::from_lines(
        "tune-baseline",
        format!("The baseline's {} over the search", metric.name()),
        Axis::new("search time", Unit::Seconds),
        Axis::new(metric.name(), unit),
        vec![Line {
            label: record.baseline.clone(),
            points: baseline,
            color: palette(0),
            emphasis: Emphasis::Normal,
        }],
    );
    chart.points = true;
    s.push_chart(chart);
    s.push(Block::Table(Table {
        caption: Some(format!("Decisions ({})", record.stop_reason)),
        headers: vec![
            "at".into(),
            "pass".into(),
            "candidate".into(),
            "what".into(),
            "why".into(),
        ],
        rows: record
            .events
            .iter()
            .map(|e| {
                vec![
                    format!("{:.1}s", e.at_s),
                    e.pass.to_string(),
                    e.candidate
                        .map(|c| record.candidates[c].label.clone())
                        .unwrap_or_default(),
                    e.kind.clone(),
                    e.why.clone(),
                ]
            })
            .collect(),
    }));
    s
}
