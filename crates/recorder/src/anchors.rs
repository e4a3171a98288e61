//! Which time anchors go into the trace.
//!
//! The drain reads an image's counter and the clock every round: under load tens of thousands of
//! anchors a second, 18 % of a python3 trace (0.027 of 0.151 B/event). Where the allocation rate
//! is steady, most of them lie on the line between their neighbours and say nothing that
//! interpolation would not.
//! `Anchors` keeps an anchor only where leaving it out would move an interpolated time by more
//! than `TOLERANCE_NS`, with the swing-door test used for sensor series: from the last kept
//! anchor, the candidate line to each new anchor must pass within the tolerance of every anchor
//! skipped since, which two running slope bounds decide in O(1).
//!
//! Interpolation between the kept anchors is piecewise linear, like the one between all of them,
//! and the two differ most at the skipped anchors: by at most `TOLERANCE_NS`, for every event.
//! Anchors where the counter stood still (idle stretches) are kept: they bound a gap in time.
/// Where kept anchors go: the image's chunk being built (or a list, in tests).
pub trait AnchorSink {
    /// With the encoder's rules (`trace::codec::append_anchor`).
    fn push_anchor(&mut self, seq: u64, t_ns: u64);
}

impl AnchorSink for Vec<(u64, u64)> {
    fn push_anchor(&mut self, seq: u64, t_ns: u64) {
        trace::codec::append_anchor(self, seq, t_ns);
    }
}

/// How far thinning may move an interpolated time: a fiftieth of an idle round's interval (about
/// 1 ms); under load, rounds are 10-50 µs apart.
pub const TOLERANCE_NS: u64 = 20_000;

#[derive(Default)]
pub struct Anchors {
    /// The last anchor kept.
    kept: Option<(u64, u64)>,
    /// The newest anchor, not kept yet: kept when the next one does not extend its line.
    pending: Option<(u64, u64)>,
    /// Slopes (ns per seq) from `kept` that pass within the tolerance of every anchor since.
    low: f64,
    high: f64,
}

impl Anchors {
    /// A new round's anchor: the counter was `seq` at `t_ns`.
    pub fn offer(&mut self, seq: u64, t_ns: u64, sink: &mut impl AnchorSink) {
        if let (Some((s0, t0)), Some((ps, _))) = (self.kept, self.pending) {
            if seq > ps {
                let slope = t_ns.wrapping_sub(t0) as i64 as f64 / (seq - s0) as f64;
                if self.low <= slope && slope <= self.high {
                    self.pending = Some((seq, t_ns));
                    self.narrow(seq, t_ns);
                    return;
                }
            }
            // The line breaks here, or the counter stood still: the pending anchor ends it.
            self.flush(sink);
        }
        match self.kept {
            Some((s0, _)) if seq > s0 => {
                self.pending = Some((seq, t_ns));
                self.low = f64::NEG_INFINITY;
                self.high = f64::INFINITY;
                self.narrow(seq, t_ns);
            }
            // The first anchor, or no event since the last kept one: an idle stretch, kept as
            // it is (the sink keeps the first and last anchor of a run with one seq).
            _ => self.keep(seq, t_ns, sink),
        }
    }

    /// Puts the pending anchor in `sink` (before a chunk is sealed: a chunk needs the anchor
    /// after its last event).
    pub fn flush(&mut self, sink: &mut impl AnchorSink) {
        if let Some((s, t)) = self.pending.take() {
            self.keep(s, t, sink);
        }
    }

    fn keep(&mut self, seq: u64, t_ns: u64, sink: &mut impl AnchorSink) {
        sink.push_anchor(seq, t_ns);
        self.kept = Some((seq, t_ns));
    }

    /// Lines from `kept` must also pass within the tolerance of (`seq`, `t_ns`).
    fn narrow(&mut self, seq: u64, t_ns: u64) {
        let Some((s0, t0)) = self.kept else { return };
        let ds = (seq - s0) as f64;
        let dt = t_ns.wrapping_sub(t0) as i64 as f64;
        let tol = TOLERANCE_NS as f64;
        self.low = self.low.max((dt - tol) / ds);
        self.high = self.high.min((dt + tol) / ds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format's interpolation (docs/trace-format.md, "Time") of the event at `seq`, in
    /// anchors sorted by seq. (The last anchor at or before `seq` found by a binary search: a
    /// linear one made the test below take a minute in a debug build.)
    fn interpolate(anchors: &[(u64, u64)], seq: u64) -> u64 {
        let i = anchors.partition_point(|a| a.0 <= seq).saturating_sub(1);
        let (s0, t0) = anchors[i];
        match anchors.get(i + 1) {
            Some(&(s1, t1)) if s1 > s0 && t1 > t0 && seq >= s0 => {
                t0 + ((t1 - t0) as u128 * (seq - s0) as u128 / (s1 - s0) as u128) as u64
            }
            _ => t0,
        }
    }

    /// Rounds of a drain: steady stretches, bursts, idle stretches (the counter stands still).
    fn rounds(seed: u64) -> Vec<(u64, u64)> {
        let (mut seq, mut t, mut rng) = (0u64, 0u64, seed);
        let mut out = vec![(0, 0)];
        let mut rate = 50.0; // ns per event
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let dt = 5_000 + rng % 40_000;
            match rng % 100 {
                0..=2 => rate = 5.0 + (rng >> 20) as f64 % 500.0, // the program changes pace
                3..=5 => {
                    // idle: several rounds without events
                    for _ in 0..1 + rng % 4 {
                        t += 1_000_000;
                        out.push((seq, t));
                    }
                    continue;
                }
                _ => {}
            }
            // Jitter around the rate: the program does not allocate like a metronome.
            let jitter = 0.8 + (rng >> 40) as f64 % 40.0 / 100.0;
            seq += (dt as f64 / (rate * jitter)) as u64;
            t += dt;
            out.push((seq, t));
        }
        out
    }

    #[test]
    fn interpolated_times_move_by_at_most_the_tolerance() {
        for seed in [1u64, 7, 0x5eed] {
            let all = rounds(seed);
            let mut kept = Vec::new();
            let mut anchors = Anchors::default();
            for &(s, t) in &all {
                anchors.offer(s, t, &mut kept);
            }
            anchors.flush(&mut kept);
            let mut dense = Vec::new();
            for &(s, t) in &all {
                dense.push_anchor(s, t);
            }
            assert!(
                kept.len() * 3 < dense.len(),
                "{} of {}",
                kept.len(),
                dense.len()
            );
            assert_eq!(kept.last(), dense.last(), "the last anchor is kept");
            // Every event between the first and the last anchor, sampled densely.
            let last = dense.last().unwrap().0;
            for seq in (0..last).step_by(37).chain(dense.iter().map(|a| a.0)) {
                let (a, b) = (interpolate(&dense, seq), interpolate(&kept, seq));
                assert!(
                    a.abs_diff(b) <= TOLERANCE_NS + 1,
                    "seed {seed}, seq {seq}: {a} with every anchor, {b} thinned"
                );
            }
        }
    }

    #[test]
    fn a_steady_rate_keeps_few_anchors_and_idle_stretches_stay() {
        let mut kept = Vec::new();
        let mut anchors = Anchors::default();
        for i in 0..1_000u64 {
            anchors.offer(i * 500, i * 20_000, &mut kept);
        }
        // Idle for 3 ms: the counter stands still.
        for k in 1..=3u64 {
            anchors.offer(999 * 500, 999 * 20_000 + k * 1_000_000, &mut kept);
        }
        anchors.offer(999 * 500 + 10, 999 * 20_000 + 3_000_100, &mut kept);
        anchors.flush(&mut kept);
        assert_eq!(
            kept,
            [
                (0, 0),
                (499_500, 19_980_000),
                (499_500, 22_980_000),
                (499_510, 22_980_100)
            ]
        );
    }
}
