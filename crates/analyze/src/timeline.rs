//! Bounded timelines: a stream of samples reduced to at most N points at regular steps.
//!
//! The step starts at 1 (one point per call, or per nanosecond) and doubles whenever the points would
//! exceed the limit, merging neighbouring points two by two. Each point covers one step of the axis and
//! reports the values after the last sample in the step plus the maximum and minimum of the live figures
//! inside it, so a peak is never lost by downsampling.

use serde::{Deserialize, Serialize};

/// The figures sampled after each allocator call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Calls completed in the process so far (the study's horizontal axis).
    pub calls: u64,
    pub t_ns: u64,
    pub live_bytes: u64,
    pub live_allocations: u64,
    pub cumulated_upper_bytes: u64,
    pub cumulated_lower_bytes: u64,
}

/// One point of a downsampled timeline (see docs/metrics.md, "Timelines").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Calls completed at the last sample of the step.
    pub calls: u64,
    /// Time of the last sample of the step, ns since the process start.
    pub t_ns: u64,
    pub live_bytes: u64,
    pub live_bytes_max: u64,
    pub live_bytes_min: u64,
    pub live_allocations: u64,
    pub live_allocations_max: u64,
    pub live_allocations_min: u64,
    pub cumulated_upper_bytes: u64,
    pub cumulated_lower_bytes: u64,
}

impl TimelinePoint {
    /// A point with no sample yet (extremes empty), filled by `fold`.
    fn empty() -> Self {
        TimelinePoint {
            calls: 0,
            t_ns: 0,
            live_bytes: 0,
            live_bytes_max: 0,
            live_bytes_min: u64::MAX,
            live_allocations: 0,
            live_allocations_max: 0,
            live_allocations_min: u64::MAX,
            cumulated_upper_bytes: 0,
            cumulated_lower_bytes: 0,
        }
    }

    fn fold(&mut self, last: &Sample, seen: &Extremes) {
        self.calls = last.calls;
        self.t_ns = last.t_ns;
        self.live_bytes = last.live_bytes;
        self.live_allocations = last.live_allocations;
        self.cumulated_upper_bytes = last.cumulated_upper_bytes;
        self.cumulated_lower_bytes = last.cumulated_lower_bytes;
        self.live_bytes_max = self.live_bytes_max.max(seen.bytes_max);
        self.live_bytes_min = self.live_bytes_min.min(seen.bytes_min);
        self.live_allocations_max = self.live_allocations_max.max(seen.allocations_max);
        self.live_allocations_min = self.live_allocations_min.min(seen.allocations_min);
    }

    /// Absorb a later point into this one.
    fn absorb(&mut self, later: &TimelinePoint) {
        self.calls = later.calls;
        self.t_ns = later.t_ns;
        self.live_bytes = later.live_bytes;
        self.live_allocations = later.live_allocations;
        self.cumulated_upper_bytes = later.cumulated_upper_bytes;
        self.cumulated_lower_bytes = later.cumulated_lower_bytes;
        self.live_bytes_max = self.live_bytes_max.max(later.live_bytes_max);
        self.live_bytes_min = self.live_bytes_min.min(later.live_bytes_min);
        self.live_allocations_max = self.live_allocations_max.max(later.live_allocations_max);
        self.live_allocations_min = self.live_allocations_min.min(later.live_allocations_min);
    }
}

/// Which coordinate a timeline steps along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Calls,
    Time,
}

/// Extremes of the live figures over the samples seen since the last fold (empty: min > max).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extremes {
    pub bytes_max: u64,
    pub bytes_min: u64,
    pub allocations_max: u64,
    pub allocations_min: u64,
}

impl Extremes {
    pub const EMPTY: Extremes = Extremes {
        bytes_max: 0,
        bytes_min: u64::MAX,
        allocations_max: 0,
        allocations_min: u64::MAX,
    };

    #[inline]
    pub fn observe(&mut self, live_bytes: u64, live_allocations: u64) {
        self.bytes_max = self.bytes_max.max(live_bytes);
        self.bytes_min = self.bytes_min.min(live_bytes);
        self.allocations_max = self.allocations_max.max(live_allocations);
        self.allocations_min = self.allocations_min.min(live_allocations);
    }

    /// `observe` of a sample that did not go below the previous one, already observed since
    /// the last fold: only the maxima can move.
    #[inline]
    pub fn observe_rise(&mut self, live_bytes: u64, live_allocations: u64) {
        self.bytes_max = self.bytes_max.max(live_bytes);
        self.allocations_max = self.allocations_max.max(live_allocations);
    }

    /// `observe` of a sample that did not go above the previous one, already observed since
    /// the last fold: only the minima can move.
    #[inline]
    pub fn observe_fall(&mut self, live_bytes: u64, live_allocations: u64) {
        self.bytes_min = self.bytes_min.min(live_bytes);
        self.allocations_min = self.allocations_min.min(live_allocations);
    }

    pub fn is_empty(&self) -> bool {
        self.bytes_min > self.bytes_max
    }
}

#[derive(Debug, Clone)]
pub struct Downsampler {
    axis: Axis,
    max_points: usize,
    started: bool,
    origin: u64,
    /// The step is 2^shift axis units.
    shift: u32,
    /// The point of the current step, kept out of `closed`; it is brought up to date by `fold`,
    /// so the per-call path only compares with `open_end`, where the current step ends
    /// (exclusive; 0 before the first sample).
    open: Option<(u64, TimelinePoint)>,
    open_end: u64,
    /// (step index, point) of finished steps, step indices increasing.
    closed: Vec<(u64, TimelinePoint)>,
}

impl Downsampler {
    pub fn new(axis: Axis, max_points: usize) -> Self {
        Downsampler {
            axis,
            max_points: max_points.max(2),
            started: false,
            origin: 0,
            shift: 0,
            open: None,
            open_end: 0,
            closed: Vec::new(),
        }
    }

    /// One sample at a time: `enter` when it starts a step, then `fold` it alone.
    pub fn push(&mut self, s: &Sample) {
        let x = self.x(s);
        if x >= self.open_end {
            self.enter(x);
        }
        let mut e = Extremes::EMPTY;
        e.observe(s.live_bytes, s.live_allocations);
        self.fold(s, &e);
    }

    fn x(&self, s: &Sample) -> u64 {
        match self.axis {
            Axis::Calls => s.calls,
            Axis::Time => s.t_ns,
        }
    }

    /// Where the current step ends (exclusive): a sample at or beyond it must `enter` first.
    /// Timestamps interpolated per buffer may step back slightly across threads; such a sample
    /// stays in the current step, which keeps the axis monotone.
    #[inline]
    pub fn open_end(&self) -> u64 {
        self.open_end
    }

    /// A sample at `x >= open_end()` is coming: finish the current step and open the one of `x`.
    /// Fold the samples of the current step before calling this.
    pub fn enter(&mut self, x: u64) {
        if !self.started {
            self.started = true;
            self.origin = x;
        }
        if let Some(done) = self.open.take() {
            self.closed.push(done);
        }
        let offset = x - self.origin;
        // Keep room for the open point: closed + open <= max_points.
        while offset >> self.shift >= self.max_points as u64 {
            self.halve();
        }
        let step = offset >> self.shift;
        let point = match self.closed.last() {
            // After halving, the sample may fall in the step of the last finished point.
            Some((last_step, _)) if *last_step == step => {
                self.closed.pop().expect("checked above").1
            }
            _ => TimelinePoint::empty(),
        };
        self.open = Some((step, point));
        self.open_end = self.origin.saturating_add((step + 1) << self.shift);
    }

    /// Bring the current step's point up to date: `last` is the latest sample, `seen` the
    /// extremes of the samples since the previous fold (all of them in the current step).
    pub fn fold(&mut self, last: &Sample, seen: &Extremes) {
        if let Some((_, p)) = &mut self.open {
            p.fold(last, seen);
        }
    }

    /// Double the step, merging points that now share a step.
    fn halve(&mut self) {
        self.shift += 1;
        let mut merged: Vec<(u64, TimelinePoint)> = Vec::with_capacity(self.closed.len() / 2 + 1);
        for (step, p) in self.closed.drain(..) {
            let step = step >> 1;
            match merged.last_mut() {
                Some((s, q)) if *s == step => q.absorb(&p),
                _ => merged.push((step, p)),
            }
        }
        self.closed = merged;
    }

    /// Lower the limit to `max_points` (at least 2): the same points as if it had been the limit
    /// from the start (the step doubles until the last point's step index is below the limit;
    /// merging is the same whenever it happens).
    pub fn shrink_to(&mut self, max_points: usize) {
        let max_points = max_points.max(2);
        if max_points >= self.max_points {
            return;
        }
        self.max_points = max_points;
        if let Some(open) = self.open.take() {
            self.closed.push(open);
        }
        while self
            .closed
            .last()
            .is_some_and(|(step, _)| *step >= max_points as u64)
        {
            self.halve();
        }
        if let Some((step, point)) = self.closed.pop() {
            self.open_end = self.origin.saturating_add((step + 1) << self.shift);
            self.open = Some((step, point));
        }
    }

    /// Width of one step in axis units (calls or ns).
    pub fn step(&self) -> u64 {
        1u64 << self.shift
    }

    pub fn points(&self) -> Vec<TimelinePoint> {
        self.closed
            .iter()
            .chain(&self.open)
            .map(|(_, p)| *p)
            .collect()
    }
}

/// The two timelines of a process (by calls and by time), fed with batched extremes: per call,
/// two compares and four min/max; the points are updated only when a step ends (`fold`).
#[derive(Debug, Clone)]
pub struct Timelines {
    pub by_calls: Downsampler,
    pub by_time: Downsampler,
    seen: Extremes,
}

impl Timelines {
    pub fn new(max_points: usize) -> Self {
        Timelines {
            by_calls: Downsampler::new(Axis::Calls, max_points),
            by_time: Downsampler::new(Axis::Time, max_points),
            seen: Extremes::EMPTY,
        }
    }

    /// See `Downsampler::shrink_to`.
    pub fn shrink_to(&mut self, max_points: usize) {
        self.by_calls.shrink_to(max_points);
        self.by_time.shrink_to(max_points);
    }

    /// Whether a sample at (`calls`, `t_ns`) starts a step: then call `fold` with the previous
    /// sample and `enter` before observing it.
    #[inline]
    pub fn starts_step(&self, calls: u64, t_ns: u64) -> bool {
        calls >= self.by_calls.open_end || t_ns >= self.by_time.open_end
    }

    /// Open the steps of a sample for which `starts_step` said yes (after `fold`).
    pub fn enter(&mut self, calls: u64, t_ns: u64) {
        if calls >= self.by_calls.open_end {
            self.by_calls.enter(calls);
        }
        if t_ns >= self.by_time.open_end {
            self.by_time.enter(t_ns);
        }
    }

    /// The live figures after a sampled call.
    #[inline]
    pub fn observe(&mut self, live_bytes: u64, live_allocations: u64) {
        self.seen.observe(live_bytes, live_allocations);
    }

    /// `observe` when both figures are at or above the previous sample's (see
    /// `Extremes::observe_rise`). The first sample after a fold needs `observe`.
    #[inline]
    pub fn observe_rise(&mut self, live_bytes: u64, live_allocations: u64) {
        self.seen.observe_rise(live_bytes, live_allocations);
    }

    /// `observe` when both figures are at or below the previous sample's. The first sample after
    /// a fold needs `observe`.
    #[inline]
    pub fn observe_fall(&mut self, live_bytes: u64, live_allocations: u64) {
        self.seen.observe_fall(live_bytes, live_allocations);
    }

    /// Put what was observed since the last fold into the open points; `last` must be the last
    /// observed sample. Does nothing when nothing was observed.
    pub fn fold(&mut self, last: &Sample) {
        if self.seen.is_empty() {
            return;
        }
        self.by_calls.fold(last, &self.seen);
        self.by_time.fold(last, &self.seen);
        self.seen = Extremes::EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(calls: u64, live: u64) -> Sample {
        Sample {
            calls,
            t_ns: calls * 10,
            live_bytes: live,
            live_allocations: live,
            cumulated_upper_bytes: calls,
            cumulated_lower_bytes: calls,
        }
    }

    #[test]
    fn keeps_every_sample_below_the_limit() {
        let mut d = Downsampler::new(Axis::Calls, 8);
        for c in 1..=8 {
            d.push(&sample(c, c));
        }
        assert_eq!(d.points().len(), 8);
        assert_eq!(d.step(), 1);
    }

    #[test]
    fn downsampling_bounds_points_and_keeps_the_peak() {
        let mut d = Downsampler::new(Axis::Calls, 10);
        for c in 1..=1000 {
            let live = if c == 537 { 1_000_000 } else { c % 7 };
            d.push(&sample(c, live));
        }
        let pts = d.points();
        assert!(pts.len() <= 10, "{} points", pts.len());
        assert_eq!(pts.iter().map(|p| p.live_bytes_max).max(), Some(1_000_000));
        assert_eq!(pts.last().unwrap().calls, 1000);
        assert_eq!(pts.iter().map(|p| p.live_bytes_min).min(), Some(0));
        // Steps are regular: every point but the last ends at a multiple of the step from the origin.
        let step = d.step();
        for p in &pts[..pts.len() - 1] {
            assert_eq!(p.calls % step, 0, "point at {} with step {step}", p.calls);
        }
    }

    /// Lowering the limit at the end gives the points of that limit from the start, on both
    /// axes, whatever the limits.
    #[test]
    fn shrinking_at_the_end_equals_the_smaller_limit_from_the_start() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for (big, small) in [(2000, 16), (2000, 23), (64, 2), (40, 39), (16, 16)] {
            for axis in [Axis::Calls, Axis::Time] {
                let (mut shrunk, mut direct) =
                    (Downsampler::new(axis, big), Downsampler::new(axis, small));
                let mut t = 0;
                for c in 1..=700u64 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    t += rng % 1000;
                    let s = Sample {
                        calls: c,
                        t_ns: t,
                        live_bytes: rng >> 40,
                        live_allocations: rng % 97,
                        ..Default::default()
                    };
                    shrunk.push(&s);
                    direct.push(&s);
                }
                shrunk.shrink_to(small);
                assert_eq!(
                    shrunk.points(),
                    direct.points(),
                    "{big} -> {small}, {axis:?}"
                );
                assert_eq!(shrunk.step(), direct.step());
                assert_eq!(shrunk.open_end(), direct.open_end());
            }
        }
    }

    #[test]
    fn time_axis_tolerates_small_steps_back() {
        let mut d = Downsampler::new(Axis::Time, 4);
        for (i, t) in [100, 90, 300, 1000, 5000].into_iter().enumerate() {
            d.push(&Sample {
                calls: i as u64 + 1,
                t_ns: t,
                ..Default::default()
            });
        }
        let pts = d.points();
        assert!(pts.len() <= 4);
        assert_eq!(pts.last().unwrap().calls, 5);
    }

    #[test]
    fn batched_timelines_equal_sample_by_sample_downsampling() {
        let (mut by_calls, mut by_time) = (
            Downsampler::new(Axis::Calls, 16),
            Downsampler::new(Axis::Time, 16),
        );
        let mut batched = Timelines::new(16);
        let mut last: Option<Sample> = None;
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut live = 1000u64;
        for c in 1..=5000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            live = (live + rng % 64).saturating_sub(31);
            // Time mostly advances, sometimes steps back a little, sometimes jumps.
            let t = c * 10 + (rng >> 20) % 25 + if c > 3000 { 100_000 } else { 0 };
            let s = Sample {
                calls: c,
                t_ns: t,
                live_bytes: live,
                live_allocations: live / 3,
                cumulated_upper_bytes: c * 7,
                cumulated_lower_bytes: c * 5,
            };
            by_calls.push(&s);
            by_time.push(&s);
            if batched.starts_step(s.calls, s.t_ns) {
                if let Some(l) = &last {
                    batched.fold(l);
                }
                batched.enter(s.calls, s.t_ns);
            }
            batched.observe(s.live_bytes, s.live_allocations);
            last = Some(s);
        }
        batched.fold(&last.unwrap());
        assert!(by_time.step() > 1 && by_calls.step() > 1);
        assert_eq!(batched.by_calls.points(), by_calls.points());
        assert_eq!(batched.by_time.points(), by_time.points());
        assert_eq!(batched.by_time.step(), by_time.step());
    }
}

/// The JSON form of a timeline: one array per column of `metrics::TIMELINE_COLUMNS` (its keys, in
/// its order), point i being the i-th value of each, instead of an object per point that repeats
/// the ten names: a timeline of 36 points took 8.2 KB that way, a quarter of a small image's JSON
/// (issue 35 item 9). Used as `#[serde(with = "crate::timeline::columns")]`.
pub mod columns {
    use serde::de::Error as _;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::TimelinePoint;
    use crate::metrics::TIMELINE_COLUMNS;

    pub fn serialize<S: Serializer>(points: &[TimelinePoint], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(TIMELINE_COLUMNS.len()))?;
        for column in TIMELINE_COLUMNS {
            let values: Vec<u64> = points.iter().map(column.value).collect();
            map.serialize_entry(column.key, &values)?;
        }
        map.end()
    }

    #[derive(Deserialize)]
    struct Columns {
        calls: Vec<u64>,
        t_ns: Vec<u64>,
        live_bytes: Vec<u64>,
        live_bytes_max: Vec<u64>,
        live_bytes_min: Vec<u64>,
        live_allocations: Vec<u64>,
        live_allocations_max: Vec<u64>,
        live_allocations_min: Vec<u64>,
        cumulated_upper_bytes: Vec<u64>,
        cumulated_lower_bytes: Vec<u64>,
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TimelinePoint>, D::Error> {
        let c = Columns::deserialize(d)?;
        let n = c.calls.len();
        let lengths = [
            c.t_ns.len(),
            c.live_bytes.len(),
            c.live_bytes_max.len(),
            c.live_bytes_min.len(),
            c.live_allocations.len(),
            c.live_allocations_max.len(),
            c.live_allocations_min.len(),
            c.cumulated_upper_bytes.len(),
            c.cumulated_lower_bytes.len(),
        ];
        if lengths.iter().any(|&l| l != n) {
            return Err(D::Error::custom("a timeline's columns differ in length"));
        }
        Ok((0..n)
            .map(|i| TimelinePoint {
                calls: c.calls[i],
                t_ns: c.t_ns[i],
                live_bytes: c.live_bytes[i],
                live_bytes_max: c.live_bytes_max[i],
                live_bytes_min: c.live_bytes_min[i],
                live_allocations: c.live_allocations[i],
                live_allocations_max: c.live_allocations_max[i],
                live_allocations_min: c.live_allocations_min[i],
                cumulated_upper_bytes: c.cumulated_upper_bytes[i],
                cumulated_lower_bytes: c.cumulated_lower_bytes[i],
            })
            .collect())
    }

    #[cfg(test)]
    mod tests {
        use crate::metrics::TIMELINE_COLUMNS;
        use crate::timeline::TimelinePoint;

        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Holder(#[serde(with = "super")] Vec<TimelinePoint>);

        #[test]
        fn a_timeline_reads_back_as_written_and_names_every_column() {
            let point = |k: u64| TimelinePoint {
                calls: k,
                t_ns: 10 * k,
                live_bytes: k + 1,
                live_bytes_max: k + 2,
                live_bytes_min: k,
                live_allocations: 3,
                live_allocations_max: 4,
                live_allocations_min: 2,
                cumulated_upper_bytes: 100 * k,
                cumulated_lower_bytes: 90 * k,
            };
            let h = Holder(vec![point(1), point(2), point(5)]);
            let text = serde_json::to_string(&h).unwrap();
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            for c in TIMELINE_COLUMNS {
                let values: Vec<u64> = h.0.iter().map(c.value).collect();
                assert_eq!(json[c.key], serde_json::json!(values), "{}", c.key);
            }
            assert_eq!(serde_json::from_str::<Holder>(&text).unwrap(), h);
        }
    }
}
