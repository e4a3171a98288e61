//! The page of an `alloclens replay` results directory: the replay's answer first (which
//! allocator, its mean RSS over the original's time, its peak, against the original run), then RSS
//! and the trace's live bytes on the recorded call axis per variant, fragmentation, the replay
//! times, and how it was made (without the fields of a `run` that a replay does not have). The
//! files are the replay crate's (`replay::files`).
use std::collections::BTreeMap;

use replay::files::{ReplayFiles, ReplayRow};
use replay::VariantReplay;

use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Document, Section, Table};
use crate::format;
use crate::run_data::RunData;

/// The replay's page, or None unless the directory is a replay's.
pub(crate) fn document(data: &RunData) -> Option<Document> {
    let files = ReplayFiles::read(&data.dir)?;
    let trace = data.results.command.get(2).cloned().unwrap_or_default();
    let mut sections = vec![answer(data, &files)];
    sections.extend(charts(&files));
    sections.push(super::run::replay_times(data));
    sections.push(super::run::reproduce_replay(data));
    Some(Document {
        title: format!("alloclens replay: {trace}"),
        sections,
    })
}

/// One variant's figures: means over its repeats that ended well.
struct VariantFigures {
    label: String,
    replays: usize,
    mean_rss: f64,
    mean_over_calls: f64,
    peak_rss: f64,
    ideal_peak: f64,
    fragmentation_at_peak: Option<f64>,
    end_rss: f64,
    calls_per_s: f64,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = v.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn per_variant(data: &RunData, replays: &[VariantReplay]) -> Vec<VariantFigures> {
    let mut labels: Vec<String> = data
        .results
        .variants
        .iter()
        .map(|v| v.label.clone())
        .collect();
    for r in replays {
        if !labels.contains(&r.variant) {
            labels.push(r.variant.clone());
        }
    }
    labels
        .into_iter()
        .filter_map(|label| {
            let ok: Vec<&VariantReplay> = replays
                .iter()
                .filter(|r| r.variant == label && r.ok)
                .collect();
            let m = |f: fn(&VariantReplay) -> f64| mean(ok.iter().map(|r| f(r)));
            Some(VariantFigures {
                replays: ok.len(),
                mean_rss: m(|r| r.figures.mean_rss)?,
                mean_over_calls: m(|r| r.figures.mean_rss_over_calls)?,
                peak_rss: m(|r| r.figures.peak_rss as f64)?,
                ideal_peak: m(|r| r.figures.ideal_peak as f64)?,
                fragmentation_at_peak: mean(
                    ok.iter().filter_map(|r| r.figures.fragmentation_at_peak),
                ),
                end_rss: m(|r| r.figures.end_rss as f64)?,
                calls_per_s: m(|r| r.calls_per_s)?,
                label,
            })
        })
        .collect()
}

/// The original run's heap, as the trace recorded it: (peak, mean over its time), of the image
/// that held the most.
fn original(replays: &[VariantReplay]) -> Option<(f64, Option<f64>)> {
    let image = replays
        .first()?
        .images
        .iter()
        .filter(|i| i.original_summary.is_some())
        .max_by_key(|i| i.original_summary.map_or(0, |o| o.rss.peak))?;
    let o = image.original_summary?;
    let peak = o.heap.map_or(o.anon.peak, |h| h.peak);
    Some((peak as f64, image.original_mean))
}

/// The answer: the variant with the lowest mean RSS over the original's time, each variant's
/// figures against the baseline and the original run, and what must not be missed.
fn answer(data: &RunData, files: &ReplayFiles) -> Section {
    let r = &data.results;
    let trace = r.command.get(2).cloned().unwrap_or_default();
    let mut s = Section::new("answer", format!("Replay of {trace}"));
    if r.interrupted {
        s.push(Block::Warning(
            "the replay was interrupted: only the replays that ended are shown".into(),
        ));
    }
    for w in &r.warnings {
        s.push(Block::Warning(w.clone()));
    }
    for f in &r.incomplete_files {
        s.push(Block::Warning(format!("not in this directory: {f}")));
    }
    let figures = per_variant(data, &files.replays);
    let original = original(&files.replays);
    let Some(best) = figures
        .iter()
        .min_by(|a, b| a.mean_rss.total_cmp(&b.mean_rss))
    else {
        s.push(Block::Paragraph(
            "No replay ended with figures in this directory.".into(),
        ));
        return s;
    };
    let baseline = r
        .baseline
        .as_deref()
        .and_then(|b| figures.iter().find(|f| f.label == b));
    let against = |v: f64, base: f64| {
        if base > 0.0 {
            format::ratio(v / base)
        } else {
            "—".into()
        }
    };
    let mut sentence = format!(
        "Lowest mean RSS over the original's time: {} with {} (peak {})",
        best.label,
        format::bytes(best.mean_rss),
        format::bytes(best.peak_rss)
    );
    if let Some(b) = baseline.filter(|b| b.label != best.label) {
        sentence.push_str(&format!(
            ", {} of {}'s {}",
            against(best.mean_rss, b.mean_rss),
            b.label,
            format::bytes(b.mean_rss)
        ));
    }
    match original {
        Some((peak, Some(mean))) => sentence.push_str(&format!(
            "; the original run's heap: mean {}, peak {}",
            format::bytes(mean),
            format::bytes(peak)
        )),
        Some((peak, None)) => sentence.push_str(&format!(
            "; the original run's heap peaked at {}",
            format::bytes(peak)
        )),
        None => {}
    }
    sentence.push('.');
    s.push(Block::Paragraph(sentence));
    let base_mean = baseline.map_or(0.0, |b| b.mean_rss);
    let mut rows: Vec<Vec<String>> = figures
        .iter()
        .map(|f| {
            vec![
                f.label.clone(),
                format::bytes(f.mean_rss),
                against(f.mean_rss, base_mean),
                format::bytes(f.mean_over_calls),
                format::bytes(f.peak_rss),
                format::bytes(f.ideal_peak),
                f.fragmentation_at_peak
                    .map_or("—".into(), |x| format!("{x:.2}×")),
                format::bytes(f.end_rss),
                format::rate(f.calls_per_s),
                f.replays.to_string(),
            ]
        })
        .collect();
    if let Some((peak, mean)) = original {
        let mut row = vec!["original run (heap)".to_string()];
        row.push(mean.map_or("—".into(), format::bytes));
        row.push(mean.map_or("—".into(), |m| against(m, base_mean)));
        row.extend(["—".into(), format::bytes(peak)]);
        row.extend(std::iter::repeat_n("—".to_string(), 5));
        rows.push(row);
    }
    s.push(Block::Table(Table {
        caption: Some(
            "Per variant (means of the replays that ended): mean RSS weighted by the original run's time, its ratio to the baseline, the mean over the calls, peaks".into(),
        ),
        headers: [
            "variant",
            "mean RSS",
            "mean ratio",
            "mean over calls",
            "peak RSS",
            "ideal peak",
            "RSS / live at peak",
            "end RSS",
            "calls/s",
            "replays",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    }));
    s.push(Block::Paragraph(
        "The replay's RSS is the anonymous resident memory of the replay process (the driver's own mappings excluded), held against the original's heap. Each measured state counts for the time the original spent in it, so a quiet phase of minutes weighs minutes; the mean over calls weighs it by its few calls. The ideal peak is the most the program held live.".into(),
    ));
    s
}

/// RSS and live bytes against the calls, and fragmentation, per variant and repeat.
fn charts(files: &ReplayFiles) -> Option<Section> {
    let rows = &files.rows;
    if rows.is_empty() {
        return None;
    }
    let mut order: Vec<&str> = Vec::new();
    for r in rows {
        if !order.contains(&r.variant.as_str()) {
            order.push(&r.variant);
        }
    }
    let mut by_run: BTreeMap<(usize, u32), Vec<&ReplayRow>> = BTreeMap::new();
    for r in rows {
        let v = order.iter().position(|o| *o == r.variant).unwrap_or(0);
        by_run.entry((v, r.repeat)).or_default().push(r);
    }
    let mut s = Section::new("replay", "RSS against the live bytes of the trace");
    s.push(Block::Paragraph(
        "Each variant performed the trace's calls; its RSS is drawn on the trace's call axis, beside \
         the bytes the program held live at that call (black, the same for every variant) and, when \
         the trace recorded it, the original run's own memory (grey). Fragmentation is RSS / live \
         bytes."
            .into(),
    ));
    let emphasis = |repeat: u32| {
        if repeat == 0 {
            Emphasis::Normal
        } else {
            Emphasis::Faint
        }
    };
    let mut lines = Vec::new();
    let mut ratios = Vec::new();
    for ((v, repeat), points) in &by_run {
        let label = if *repeat == 0 {
            order[*v].to_string()
        } else {
            format!("{} #{}", order[*v], repeat + 1)
        };
        lines.push(Line {
            label: label.clone(),
            points: points
                .iter()
                .map(|r| (r.seq as f64, r.rss as f64))
                .collect(),
            color: palette(*v),
            emphasis: emphasis(*repeat),
        });
        ratios.push(Line {
            label,
            points: points
                .iter()
                .filter(|r| r.live > 0)
                .map(|r| (r.seq as f64, r.rss as f64 / r.live as f64))
                .collect(),
            color: palette(*v),
            emphasis: emphasis(*repeat),
        });
    }
    if let Some(first) = by_run.values().next() {
        lines.push(Line {
            label: "live bytes (trace)".into(),
            points: first
                .iter()
                .map(|r| (r.seq as f64, r.live as f64))
                .collect(),
            color: "#000000".into(),
            emphasis: Emphasis::Bold,
        });
    }
    let original = &files.original;
    if !original.is_empty() {
        let heap = original.iter().all(|o| o.heap.is_some());
        lines.push(Line {
            label: if heap {
                "original run: heap".into()
            } else {
                "original run: anonymous".into()
            },
            points: original
                .iter()
                .map(|o| (o.seq as f64, o.heap.unwrap_or(o.anon) as f64))
                .collect(),
            color: "#888888".into(),
            emphasis: Emphasis::Bold,
        });
    }
    s.push_chart(Chart::from_lines(
        "replay-rss",
        "RSS and live bytes against the calls",
        Axis::new("calls (recorded order)", Unit::Count),
        Axis::new("bytes", Unit::Bytes),
        lines,
    ));
    s.push_chart(Chart::from_lines(
        "replay-fragmentation",
        "Fragmentation: RSS / live bytes against the calls",
        Axis::new("calls (recorded order)", Unit::Count),
        Axis::new("RSS / live", Unit::Plain).log(),
        ratios,
    ));
    Some(s)
}
