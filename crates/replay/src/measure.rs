//! The figures of one replay, from its samples: RSS against the live requested bytes of the trace
//! on the call axis.
use serde::{Deserialize, Serialize};

use crate::plan::MarkerAt;

/// One measurement: after `seq` calls in recorded order, `t_s` seconds into the replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seq: u64,
    pub t_s: f64,
    /// When the state measured began in the original run: the time of the call before `seq` on
    /// the trace's clock (seconds since the image started; 0 before the first call).
    #[serde(default)]
    pub original_t_s: f64,
    /// Anonymous resident bytes of the replay process (the driver's own shared mappings excluded).
    pub rss: u64,
    /// Requested bytes live at that point of the trace.
    pub live: u64,
}

/// RSS against live bytes over a range of calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Highest RSS seen, where (recorded position), and the live bytes there.
    pub peak_rss: u64,
    pub peak_rss_seq: u64,
    pub live_at_peak_rss: u64,
    /// Peak of the live requested bytes: what a perfect allocator would need.
    pub ideal_peak: u64,
    /// RSS / live at the RSS peak.
    pub fragmentation_at_peak: Option<f64>,
    /// RSS / live averaged over the calls (each sample weighted by the calls since the previous).
    pub fragmentation_mean: Option<f64>,
    /// Mean RSS weighted by the original run's time: each measured state counts for the time the
    /// original spent in it (from the call that made it to the next point measured, the last one
    /// until the range ended), so a quiet phase of minutes weighs minutes. The mean over calls when
    /// the trace has no clock.
    pub mean_rss: f64,
    /// Call-weighted mean RSS (each sample holds until the next one's position).
    pub mean_rss_over_calls: f64,
    /// The original's seconds `mean_rss` is weighted over (0: the trace has no clock).
    #[serde(default)]
    pub original_seconds: f64,
    /// At the end of the range: RSS, live bytes, and what the allocator holds beyond them.
    pub end_rss: u64,
    pub end_live: u64,
    pub retained: u64,
    /// end RSS / end live (None when nothing is live).
    pub retention_ratio: Option<f64>,
    /// Seconds from the first sample of the range to its last.
    pub seconds: f64,
}

/// A range of recorded calls, `from_seq..=to_seq`, and when it began and ended on the original's
/// clock (seconds since the image started).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub from_seq: u64,
    pub to_seq: u64,
    pub from_s: f64,
    pub to_s: f64,
}

/// Figures over the samples in `span` (they are sorted by seq).
pub fn figures(samples: &[Sample], span: Span) -> Figures {
    let range: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.seq >= span.from_seq && s.seq <= span.to_seq)
        .collect();
    let mut f = Figures::default();
    let (Some(first), Some(last)) = (range.first(), range.last()) else {
        return f;
    };
    for s in &range {
        if s.rss > f.peak_rss {
            f.peak_rss = s.rss;
            f.peak_rss_seq = s.seq;
            f.live_at_peak_rss = s.live;
        }
        f.ideal_peak = f.ideal_peak.max(s.live);
    }
    f.fragmentation_at_peak = ratio(f.peak_rss, f.live_at_peak_rss);
    let (mut weighted, mut weight) = (0.0, 0.0);
    let (mut by_calls, mut calls_total) = (0.0, 0.0);
    for w in range.windows(2) {
        let calls = w[1].seq.saturating_sub(w[0].seq) as f64;
        by_calls += w[1].rss as f64 * calls;
        calls_total += calls;
        if let Some(r) = ratio(w[1].rss, w[1].live) {
            weighted += r * calls;
            weight += calls;
        }
    }
    f.fragmentation_mean = (weight > 0.0).then(|| weighted / weight);
    f.mean_rss_over_calls = if calls_total > 0.0 {
        by_calls / calls_total
    } else {
        last.rss as f64
    };
    let (area, time) = original_time_area(&range, span);
    f.original_seconds = time;
    f.mean_rss = if time > 0.0 {
        area / time
    } else {
        f.mean_rss_over_calls
    };
    f.end_rss = last.rss;
    f.end_live = last.live;
    f.retained = last.rss.saturating_sub(last.live);
    f.retention_ratio = ratio(last.rss, last.live);
    f.seconds = (last.t_s - first.t_s).max(0.0);
    f
}

/// RSS × the original's seconds, summed, and the seconds: each state holds from its
/// `original_t_s` until the next sample's (the last one until the span ends), clipped to the span.
/// The replay's own clock is no weight: it runs the calls back to back, so a phase of few calls
/// and long waits takes no time in it.
fn original_time_area(range: &[&Sample], span: Span) -> (f64, f64) {
    let (mut area, mut time) = (0.0, 0.0);
    for (i, s) in range.iter().enumerate() {
        let begin = s.original_t_s.max(span.from_s);
        let end = range
            .get(i + 1)
            .map_or(span.to_s, |next| next.original_t_s)
            .min(span.to_s);
        let dt = (end - begin).max(0.0);
        area += s.rss as f64 * dt;
        time += dt;
    }
    (area, time)
}

fn ratio(rss: u64, live: u64) -> Option<f64> {
    (live > 0).then(|| rss as f64 / live as f64)
}

/// The original's heap (its anonymous memory where smaps was not read) averaged over its time:
/// each reading holds until the next, the last until `end_t_ns`; the figure to hold a replay's
/// `mean_rss` against. None without readings or time.
pub fn original_time_mean(readings: &[trace::MemorySample], end_t_ns: u64) -> Option<f64> {
    let (mut area, mut time) = (0.0, 0.0);
    for (i, r) in readings.iter().enumerate() {
        let end = readings.get(i + 1).map_or(end_t_ns, |n| n.t_ns).max(r.t_ns);
        let dt = (end - r.t_ns) as f64;
        area += r.heap.unwrap_or(r.anon) as f64 * dt;
        time += dt;
    }
    (time > 0.0).then(|| area / time)
}

/// The figures of one phase: the calls from its marker to the next (or the end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    pub label: String,
    pub from_seq: u64,
    pub to_seq: u64,
    pub figures: Figures,
}

/// Phases of the image (`image` spans all of it): `start` before the first marker (when it has
/// calls), then one per marker.
pub fn phases(samples: &[Sample], markers: &[MarkerAt], image: Span) -> Vec<PhaseFigures> {
    if markers.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<(String, u64, f64)> = Vec::new();
    if markers[0].seq > image.from_seq {
        bounds.push((START_PHASE.into(), image.from_seq, image.from_s));
    }
    bounds.extend(markers.iter().map(|m| (m.label.clone(), m.seq, m.t_s)));
    let mut out = Vec::new();
    for (i, (label, from, from_s)) in bounds.iter().enumerate() {
        let next = bounds.get(i + 1);
        let span = Span {
            from_seq: *from,
            to_seq: next.map_or(image.to_seq, |b| b.1).max(*from),
            from_s: *from_s,
            to_s: next.map_or(image.to_s, |b| b.2).max(*from_s),
        };
        out.push(PhaseFigures {
            label: label.clone(),
            from_seq: span.from_seq,
            to_seq: span.to_seq,
            figures: figures(samples, span),
        });
    }
    out
}

/// The name of the calls before the first marker, as `analyze` names them.
pub const START_PHASE: &str = "start";

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seq: u64, rss: u64, live: u64) -> Sample {
        Sample {
            seq,
            t_s: seq as f64,
            original_t_s: seq as f64,
            rss,
            live,
        }
    }

    fn all(to: u64) -> Span {
        Span {
            from_seq: 0,
            to_seq: to,
            from_s: 0.0,
            to_s: to as f64,
        }
    }

    #[test]
    fn fragmentation_and_retention_come_from_rss_against_live() {
        let samples = [
            s(0, 100, 0),
            s(10, 400, 200),
            s(20, 300, 100),
            s(30, 300, 0),
        ];
        let f = figures(&samples, all(30));
        assert_eq!(
            (f.peak_rss, f.peak_rss_seq, f.live_at_peak_rss),
            (400, 10, 200)
        );
        assert_eq!(f.ideal_peak, 200);
        assert_eq!(f.fragmentation_at_peak, Some(2.0));
        // (2.0 * 10 + 3.0 * 10) / 20; the last sample has nothing live.
        assert_eq!(f.fragmentation_mean, Some(2.5));
        assert_eq!((f.end_rss, f.end_live, f.retained), (300, 0, 300));
        assert_eq!(f.retention_ratio, None);
        let p = phases(
            &samples,
            &[MarkerAt {
                label: "b".into(),
                seq: 20,
                t_s: 20.0,
            }],
            all(30),
        );
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].label.as_str(), p[0].figures.end_rss), ("start", 300));
        assert_eq!((p[1].label.as_str(), p[1].figures.peak_rss), ("b", 300));
    }

    /// The original spent 1 s making a wave (RSS 100) and 99 s quiet (RSS 10) in 2 calls: over the
    /// calls the wave dominates, over the original's time the quiet phase does.
    #[test]
    fn the_mean_is_weighted_by_the_originals_time_and_the_mean_over_calls_by_calls() {
        let at = |seq: u64, t: f64, rss: u64| Sample {
            seq,
            t_s: seq as f64 * 1e-6,
            original_t_s: t,
            rss,
            live: rss,
        };
        let samples = [at(0, 0.0, 100), at(1000, 1.0, 10), at(1002, 100.0, 10)];
        let span = Span {
            from_seq: 0,
            to_seq: 1002,
            from_s: 0.0,
            to_s: 100.0,
        };
        let f = figures(&samples, span);
        assert!(
            (f.mean_rss - (100.0 + 99.0 * 10.0) / 100.0).abs() < 1e-9,
            "{f:?}"
        );
        assert!((f.mean_rss_over_calls - 10.0).abs() < 1e-9, "{f:?}");
        assert_eq!(f.original_seconds, 100.0);
        // The last state holds until the image ended, not only until its call.
        let later = figures(
            &samples,
            Span {
                to_s: 200.0,
                ..span
            },
        );
        assert!((later.mean_rss - (100.0 + 199.0 * 10.0) / 200.0).abs() < 1e-9);
        // A trace without a clock: the mean over calls.
        let flat: Vec<Sample> = samples
            .iter()
            .map(|s| Sample {
                original_t_s: 0.0,
                ..*s
            })
            .collect();
        let f = figures(&flat, Span { to_s: 0.0, ..span });
        assert_eq!(f.mean_rss, f.mean_rss_over_calls);
    }
}
