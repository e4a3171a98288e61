//! The figures of one replay, from its samples: RSS against the live requested bytes of the trace
//! on the call axis.
use serde::{Deserialize, Serialize};

use crate::plan::MarkerAt;

/// One measurement: after `seq` calls in recorded order, `t_s` seconds into the replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seq: u64,
    pub t_s: f64,
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
    /// Time-weighted mean RSS.
    pub mean_rss: f64,
    /// Call-weighted mean RSS (each sample holds until the next one's position): comparable with
    /// the original run's mean on the same axis, whatever the speeds.
    pub mean_rss_over_calls: f64,
    /// At the end of the range: RSS, live bytes, and what the allocator holds beyond them.
    pub end_rss: u64,
    pub end_live: u64,
    pub retained: u64,
    /// end RSS / end live (None when nothing is live).
    pub retention_ratio: Option<f64>,
    /// Seconds from the first sample of the range to its last.
    pub seconds: f64,
}

/// Figures over the samples with `from <= seq <= to` (they are sorted by seq).
pub fn figures(samples: &[Sample], from: u64, to: u64) -> Figures {
    let range: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.seq >= from && s.seq <= to)
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
    let (mut area, mut span) = (0.0, 0.0);
    let (mut by_calls, mut calls_total) = (0.0, 0.0);
    for w in range.windows(2) {
        let calls = w[1].seq.saturating_sub(w[0].seq) as f64;
        by_calls += w[1].rss as f64 * calls;
        calls_total += calls;
        if let Some(r) = ratio(w[1].rss, w[1].live) {
            weighted += r * calls;
            weight += calls;
        }
        let dt = (w[1].t_s - w[0].t_s).max(0.0);
        area += w[1].rss as f64 * dt;
        span += dt;
    }
    f.fragmentation_mean = (weight > 0.0).then(|| weighted / weight);
    f.mean_rss = if span > 0.0 {
        area / span
    } else {
        last.rss as f64
    };
    f.mean_rss_over_calls = if calls_total > 0.0 {
        by_calls / calls_total
    } else {
        last.rss as f64
    };
    f.end_rss = last.rss;
    f.end_live = last.live;
    f.retained = last.rss.saturating_sub(last.live);
    f.retention_ratio = ratio(last.rss, last.live);
    f.seconds = (last.t_s - first.t_s).max(0.0);
    f
}

fn ratio(rss: u64, live: u64) -> Option<f64> {
    (live > 0).then(|| rss as f64 / live as f64)
}

/// The figures of one phase: the calls from its marker to the next (or the end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    pub label: String,
    pub from_seq: u64,
    pub to_seq: u64,
    pub figures: Figures,
}

/// Phases of the trace: `start` before the first marker (when it has calls), then one per marker.
pub fn phases(samples: &[Sample], markers: &[MarkerAt], start: u64, end: u64) -> Vec<PhaseFigures> {
    if markers.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<(String, u64)> = Vec::new();
    if markers[0].seq > start {
        bounds.push(("start".into(), start));
    }
    bounds.extend(markers.iter().map(|m| (m.label.clone(), m.seq)));
    let mut out = Vec::new();
    for (i, (label, from)) in bounds.iter().enumerate() {
        let to = bounds.get(i + 1).map_or(end, |b| b.1).max(*from);
        out.push(PhaseFigures {
            label: label.clone(),
            from_seq: *from,
            to_seq: to,
            figures: figures(samples, *from, to),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(seq: u64, rss: u64, live: u64) -> Sample {
        Sample {
            seq,
            t_s: seq as f64,
            rss,
            live,
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
        let f = figures(&samples, 0, 30);
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
            }],
            0,
            30,
        );
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].label.as_str(), p[0].figures.end_rss), ("start", 300));
        assert_eq!((p[1].label.as_str(), p[1].figures.peak_rss), ("b", 300));
    }
}
