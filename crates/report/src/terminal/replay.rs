//! `alloclens replay`'s tables after `run`'s: the replay's own figures per variant, the calls left
//! out, the original run beside them, and RSS against live bytes per phase.
use std::fmt::Write as _;

use replay::{Replay, VariantReplay};

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / (1u64 << 20) as f64)
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The replay's own figures per variant (means over the repeats that ended well), the calls left
/// out, the original run beside them, and per phase RSS against live bytes.
pub fn render_replay_tables(runs: &[VariantReplay], labels: &[String], replay: &Replay) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\nReplay of {} ({} calls, {} process image{}): RSS against the live requested bytes",
        replay.path().display(),
        trace::human_count(replay.calls()),
        replay.images(),
        if replay.images() == 1 { "" } else { "s" }
    );
    let headers = [
        "variant",
        "mean RSS",
        "over calls",
        "peak RSS",
        "ideal peak",
        "frag@peak",
        "frag mean",
        "end RSS",
        "end live",
        "calls/s",
    ];
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    for label in labels {
        let ok: Vec<&VariantReplay> = runs
            .iter()
            .filter(|r| &r.variant == label && r.ok)
            .collect();
        if ok.is_empty() {
            let ending = runs
                .iter()
                .find(|r| &r.variant == label)
                .map_or("not run".to_string(), |r| r.ending.clone());
            rows.push(vec![label.clone()]);
            notes.push(vec![ending]);
            continue;
        }
        let f = |g: fn(&VariantReplay) -> f64| mean(ok.iter().map(|r| g(r)));
        let opt = |g: fn(&VariantReplay) -> Option<f64>| {
            let v: Vec<f64> = ok.iter().filter_map(|r| g(r)).collect();
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}x", mean(v.into_iter()))
            }
        };
        rows.push(vec![
            label.clone(),
            mib(f(|r| r.figures.mean_rss)),
            mib(f(|r| r.figures.mean_rss_over_calls)),
            mib(f(|r| r.figures.peak_rss as f64)),
            mib(f(|r| r.figures.ideal_peak as f64)),
            opt(|r| r.figures.fragmentation_at_peak),
            opt(|r| r.figures.fragmentation_mean),
            mib(f(|r| r.figures.end_rss as f64)),
            mib(f(|r| r.figures.end_live as f64)),
            trace::human_count(f(|r| r.calls_per_s) as u64),
        ]);
        notes.push(Vec::new());
    }
    t.push_str(&crate::render_terminal_table(
        headers.iter().map(|h| h.to_string()).collect(),
        rows,
        &notes,
    ));
    t.push_str("  mean RSS: weighted by the original run's time (a quiet phase weighs its duration); over calls: by the calls\n");
    let s = replay.skipped();
    if s.total() > 0 || s.unknown_reallocs_as_malloc > 0 {
        let _ = writeln!(
            t,
            "Left out: {} frees of unknown blocks, {} double frees, {} calls that failed in the trace; {} reallocs of unknown blocks replayed as malloc",
            s.unknown_frees, s.double_frees, s.failed_in_trace, s.unknown_reallocs_as_malloc
        );
    }
    // The replay's row shows the image that held the most, so the original beside it is the image
    // that held the most too, not the first one read (a wrapper shell's, for a traced script). Its
    // count of readings says how far to trust it: a short program may have two.
    let originals: Vec<&replay::ImageReplay> = runs
        .first()
        .map(|r| {
            r.images
                .iter()
                .filter(|i| i.original_summary.is_some())
                .collect()
        })
        .unwrap_or_default();
    if let Some((image, o)) = originals
        .iter()
        .filter_map(|i| Some((*i, i.original_summary.as_ref()?)))
        .max_by_key(|(_, o)| o.rss.peak)
    {
        let of = if replay.images() > 1 {
            format!(" (process {}, the image that held the most)", image.pid)
        } else {
            String::new()
        };
        let heap = o.heap.map_or("not read".to_string(), |h| {
            format!("peak {}", mib(h.peak as f64))
        });
        let mean = image.original_mean.map_or(String::new(), |m| {
            format!(", mean over its time {}", mib(m))
        });
        let _ = writeln!(
            t,
            "Original run (recorded with the trace, {} readings){of}: RSS peak {}, anonymous peak {}, heap {heap}{mean}: compare with the replay's peak and mean RSS (the replay's RSS is its anonymous memory)",
            o.rss.samples,
            mib(o.rss.peak as f64),
            mib(o.anon.peak as f64),
        );
    }
    if let Some(first) = runs.iter().find(|r| r.ok) {
        let phases: Vec<&replay::PhaseFigures> =
            first.images.iter().flat_map(|i| &i.phases).collect();
        if !phases.is_empty() {
            let _ = writeln!(
                t,
                "\nPer phase: RSS / live bytes at the phase's end (retained MiB)"
            );
            let headers = std::iter::once("variant".to_string())
                .chain(phases.iter().map(|p| p.label.clone()))
                .collect();
            let rows = labels
                .iter()
                .filter_map(|label| runs.iter().find(|r| &r.variant == label && r.ok))
                .map(|r| {
                    std::iter::once(r.variant.clone())
                        .chain(r.images.iter().flat_map(|i| &i.phases).map(|p| {
                            format!(
                                "{} ({:.1})",
                                p.figures
                                    .retention_ratio
                                    .map_or("-".into(), |x| format!("{x:.2}x")),
                                p.figures.retained as f64 / (1u64 << 20) as f64
                            )
                        }))
                        .collect()
                })
                .collect();
            t.push_str(&crate::render_terminal_table(headers, rows, &[]));
        }
    }
    t
}
