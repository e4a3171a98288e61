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
    fn from_sample(s: &Sample) -> Self {
        TimelinePoint {
            calls: s.calls,
            t_ns: s.t_ns,
            live_bytes: s.live_bytes,
            live_bytes_max: s.live_bytes,
            live_bytes_min: s.live_bytes,
            live_allocations: s.live_allocations,
            live_allocations_max: s.live_allocations,
            live_allocations_min: s.live_allocations,
            cumulated_upper_bytes: s.cumulated_upper_bytes,
            cumulated_lower_bytes: s.cumulated_lower_bytes,
        }
    }

    #[inline]
    fn update(&mut self, s: &Sample) {
        self.calls = s.calls;
        self.t_ns = s.t_ns;
        self.live_bytes = s.live_bytes;
        self.live_allocations = s.live_allocations;
        self.cumulated_upper_bytes = s.cumulated_upper_bytes;
        self.cumulated_lower_bytes = s.cumulated_lower_bytes;
        self.live_bytes_max = self.live_bytes_max.max(s.live_bytes);
        self.live_bytes_min = self.live_bytes_min.min(s.live_bytes);
        self.live_allocations_max = self.live_allocations_max.max(s.live_allocations);
        self.live_allocations_min = self.live_allocations_min.min(s.live_allocations);
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

#[derive(Debug, Clone)]
pub struct Downsampler {
    axis: Axis,
    max_points: usize,
    started: bool,
    origin: u64,
    /// The step is 2^shift axis units.
    shift: u32,
    last_x: u64,
    /// The point of the current step, kept out of `closed` so the per-call path is a compare and
    /// a few stores; `open_end` is where the current step ends (exclusive), 0 before the first sample.
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
            last_x: 0,
            open: None,
            open_end: 0,
            closed: Vec::new(),
        }
    }

    #[inline]
    pub fn push(&mut self, s: &Sample) {
        let raw = match self.axis {
            Axis::Calls => s.calls,
            Axis::Time => s.t_ns,
        };
        // Timestamps interpolated per buffer may step back slightly across threads: keep the axis monotone.
        let x = raw.max(self.last_x);
        self.last_x = x;
        if x < self.open_end {
            if let Some((_, p)) = &mut self.open {
                p.update(s);
                return;
            }
        }
        self.open_step(s, x);
    }

    #[cold]
    fn open_step(&mut self, s: &Sample, x: u64) {
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
                let (_, mut p) = self.closed.pop().expect("checked above");
                p.update(s);
                p
            }
            _ => TimelinePoint::from_sample(s),
        };
        self.open = Some((step, point));
        self.open_end = self.origin.saturating_add((step + 1) << self.shift);
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
}
