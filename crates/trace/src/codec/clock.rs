//! Event times in the decoder: linear interpolation by seq between the chunk's time anchors.

/// Event times: linear interpolation by seq between the bracketing anchors (see `interpolate`).
/// Seqs only grow within a chunk and most events follow the previous one by 1, so the time of
/// seq + 1 is derived from that of seq by adding the slope's quotient and remainder: no divide
/// per event. A longer step divides once.
pub(super) struct Clock<'a> {
    anchors: &'a [(u64, u64)],
    i: usize,
    /// The seq at which the clock moves to the next anchor pair.
    next_anchor: u64,
    /// The interpolation state of the anchor pair `i`, `i + 1` when it has a slope.
    line: Option<Line>,
    /// False until `line` is set up for anchor `i`: when every event is an anchor (the
    /// writer's `write_records` makes such chunks), it never needs to be.
    line_ready: bool,
    /// The stepping state of `line`, flattened for `at`'s common case (one event after the
    /// other on a line whose step is known: through `Option`s it ran about 22 instructions per
    /// event). `fast_seq` is the seq it serves next, `u64::MAX` when there is none; while it is
    /// not, `line`'s own `seq`, `q` and `r` are stale and `sync_line` brings them up to date.
    fast_seq: u64,
    fast: FastLine,
}

/// `Line`'s state for stepping: `t = t0 + q`, with `ds - step_r` precomputed.
#[derive(Clone, Copy, Default)]
struct FastLine {
    t0: u64,
    q: u64,
    r: u64,
    step_q: u64,
    step_r: u64,
    ds_minus_step_r: u64,
}

/// `t(seq) = t0 + (dt * (seq - s0)) / ds`, kept as quotient `q` and remainder `r` at `seq`.
#[derive(Clone, Copy)]
struct Line {
    s0: u64,
    t0: u64,
    dt: u64,
    ds: u64,
    /// `dt / ds` and `dt % ds`, the step from one seq to the next; computed on first use
    /// (when every event is an anchor, it never is).
    step: Option<(u64, u64)>,
    seq: u64,
    q: u64,
    r: u64,
}

impl Line {
    /// From `seq` to `seq + 1`: adds the step's quotient and remainder.
    #[inline(always)]
    fn step_one(&mut self, (step_q, step_r): (u64, u64)) {
        // r + step_r >= ds, written so that it cannot overflow.
        if self.r >= self.ds - step_r {
            self.r -= self.ds - step_r;
            self.q += step_q + 1;
        } else {
            self.r += step_r;
            self.q += step_q;
        }
        self.seq += 1;
    }

    #[inline]
    fn at(&mut self, seq: u64) -> u64 {
        if seq == self.seq {
            return self.t0 + self.q;
        }
        if seq == self.seq + 1 {
            let (dt, ds) = (self.dt, self.ds);
            let step = *self.step.get_or_insert_with(|| (dt / ds, dt % ds));
            self.step_one(step);
        } else {
            let n = u128::from(self.dt) * u128::from(seq - self.s0);
            let ds = u128::from(self.ds);
            self.q = (n / ds) as u64;
            self.r = (n % ds) as u64;
        }
        self.seq = seq;
        self.t0 + self.q
    }
}

impl<'a> Clock<'a> {
    pub(super) fn new(anchors: &'a [(u64, u64)]) -> Self {
        let mut clock = Clock {
            anchors,
            i: 0,
            next_anchor: u64::MAX,
            line: None,
            line_ready: false,
            fast_seq: u64::MAX,
            fast: FastLine::default(),
        };
        clock.next_anchor = anchors.get(1).map_or(u64::MAX, |a| a.0);
        clock
    }

    /// The line between anchors `i` and `i + 1`, when they are in order (else `interpolate`'s
    /// clamping applies), positioned at s0.
    fn set_line(&mut self) {
        let next = self.anchors.get(self.i + 1).copied();
        self.line_ready = true;
        self.line = match (self.anchors.get(self.i), next) {
            (Some(&(s0, t0)), Some((s1, t1))) if s1 > s0 && t1 >= t0 => Some(Line {
                s0,
                t0,
                dt: t1 - t0,
                ds: s1 - s0,
                step: None,
                seq: s0,
                q: 0,
                r: 0,
            }),
            _ => None,
        };
    }

    #[cold]
    fn advance(&mut self, seq: u64) {
        while self.i + 1 < self.anchors.len() && self.anchors[self.i + 1].0 <= seq {
            self.i += 1;
        }
        self.next_anchor = self.anchors.get(self.i + 1).map_or(u64::MAX, |a| a.0);
        self.line_ready = false;
    }

    #[inline(always)]
    pub(super) fn at(&mut self, seq: u64) -> u64 {
        // The common case: the event after the previous one, between the same two anchors.
        if seq == self.fast_seq && seq < self.next_anchor {
            let f = &mut self.fast;
            // `Line::step_one`, on the flattened state.
            if f.r >= f.ds_minus_step_r {
                f.r -= f.ds_minus_step_r;
                f.q += f.step_q + 1;
            } else {
                f.r += f.step_r;
                f.q += f.step_q;
            }
            self.fast_seq = seq + 1;
            return f.t0 + f.q;
        }
        self.sync_line();
        let t = self.at_general(seq);
        self.start_fast(seq);
        t
    }

    /// Writes the fast path's progress back into `line` and leaves the fast path.
    #[inline(always)]
    fn sync_line(&mut self) {
        if self.fast_seq != u64::MAX {
            if let Some(line) = &mut self.line {
                line.seq = self.fast_seq - 1;
                line.q = self.fast.q;
                line.r = self.fast.r;
            }
            self.fast_seq = u64::MAX;
        }
    }

    /// After `at_general(seq)`: the fast path serves `seq + 1` when the line it used knows its
    /// step and stands at `seq`.
    #[inline(always)]
    fn start_fast(&mut self, seq: u64) {
        if let (true, Some(line)) = (self.line_ready, &self.line) {
            if let (true, Some((step_q, step_r))) = (line.seq == seq, line.step) {
                self.fast = FastLine {
                    t0: line.t0,
                    q: line.q,
                    r: line.r,
                    step_q,
                    step_r,
                    ds_minus_step_r: line.ds - step_r,
                };
                self.fast_seq = seq + 1;
            }
        }
    }

    #[inline(never)]
    fn at_general(&mut self, seq: u64) -> u64 {
        // With no next anchor, next_anchor is u64::MAX: a seq equal to it advances to nothing.
        if seq >= self.next_anchor && self.i + 1 < self.anchors.len() {
            self.advance(seq);
        }
        if !self.line_ready {
            match self.anchors.get(self.i) {
                // At the anchor itself the time is the anchor's (what `interpolate` gives).
                Some(&(s0, t0)) if s0 == seq => return t0,
                _ => self.set_line(),
            }
        }
        match &mut self.line {
            Some(line) if seq >= line.s0 => line.at(seq),
            _ => interpolate(self.anchors, self.i, seq),
        }
    }
}

/// Time of `seq` given `anchors[i]`, the last anchor at or before it (clamped at both ends).
pub(super) fn interpolate(anchors: &[(u64, u64)], i: usize, seq: u64) -> u64 {
    let Some(&(s0, t0)) = anchors.get(i) else {
        return 0;
    };
    if seq < s0 {
        return t0;
    }
    match anchors.get(i + 1) {
        Some(&(s1, t1)) if s1 > s0 && t1 >= t0 => {
            // Same quotient as in 128 bits; the 128-bit divide is a library call.
            let span = match (t1 - t0).checked_mul(seq - s0) {
                Some(p) => p / (s1 - s0),
                None => (u128::from(t1 - t0) * u128::from(seq - s0) / u128::from(s1 - s0)) as u64,
            };
            t0 + span
        }
        _ => t0,
    }
}
