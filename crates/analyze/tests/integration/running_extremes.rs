//! Property: the peaks (per phase and per process) and the timelines the pass keeps with
//! one-sided updates (a free only checks the minima, an allocation only the maxima) equal those of
//! an independent model that observes both sides after every call, with and without a phase
//! filter, through markers, timeline steps, replaced entries and live sums that wrap.

use std::collections::HashMap;

use analyze::timeline::{Axis, Downsampler, Sample};
use analyze::{Config, ProcessAnalyzer};
use proptest::prelude::*;
use testkit::{process_info, Calls};

#[derive(Debug, Clone)]
enum Step {
    Malloc(u64),
    /// A size so large that two of them wrap the live sum.
    HugeMalloc,
    /// malloc returning an address the pass believes live (its free was not traced).
    MallocOverLive(usize, u64),
    FailedMalloc(u64),
    Realloc(usize, u64),
    ReallocUnknown(u64),
    ReallocToZero(usize),
    Free(usize),
    FreeUnknown,
    FreeNull,
    Marker(bool),
    Thread(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..5000).prop_map(Step::Malloc),
        1 => Just(Step::HugeMalloc),
        1 => (any::<usize>(), 0u64..5000).prop_map(|(i, s)| Step::MallocOverLive(i, s)),
        1 => (0u64..5000).prop_map(Step::FailedMalloc),
        2 => (any::<usize>(), 0u64..70_000).prop_map(|(i, s)| Step::Realloc(i, s)),
        1 => (0u64..5000).prop_map(Step::ReallocUnknown),
        1 => any::<usize>().prop_map(Step::ReallocToZero),
        6 => any::<usize>().prop_map(Step::Free),
        1 => Just(Step::FreeUnknown),
        1 => Just(Step::FreeNull),
        1 => any::<bool>().prop_map(Step::Marker),
        1 => (1u32..4).prop_map(Step::Thread),
    ]
}

/// Strict maximum with the first call and time that reached it, as docs/metrics.md defines peaks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Max {
    value: u64,
    call: u64,
    t_ns: u64,
}

impl Max {
    fn observe(&mut self, value: u64, call: u64, t_ns: u64) {
        if value > self.value {
            *self = Max { value, call, t_ns };
        }
    }
}

/// The live figures after every call, by the definitions, with wrapping sums like the pass.
#[derive(Default)]
struct Model {
    live: HashMap<u64, u64>,
    bytes: u64,
    upper: u64,
    lower: u64,
}

impl Model {
    fn start(&mut self, addr: u64, size: u64) {
        if let Some(old) = self.live.insert(addr, size) {
            self.bytes = self.bytes.wrapping_sub(old);
        }
        self.bytes = self.bytes.wrapping_add(size);
        self.upper = self.upper.wrapping_add(size);
        self.lower = self.lower.wrapping_add(size);
    }

    fn end(&mut self, addr: u64) {
        let size = self.live.remove(&addr).expect("a live address");
        self.bytes = self.bytes.wrapping_sub(size);
    }

    fn moved(&mut self, old: u64, addr: u64, size: u64) {
        let before = self.live.remove(&old).expect("a live address");
        self.live.insert(addr, size);
        self.bytes = self.bytes.wrapping_sub(before).wrapping_add(size);
        self.upper = self.upper.wrapping_add(size);
        self.lower = self.lower.wrapping_sub(before).wrapping_add(size);
    }
}

fn check(steps: &[Step], filter: Option<&str>) -> Result<(), TestCaseError> {
    let mut s = Calls::new();
    let mut m = Model::default();
    let mut addrs: Vec<u64> = Vec::new();
    let mut next = 0x1000u64;
    // Per call: (phase index, sample).
    let mut samples: Vec<(usize, Sample)> = Vec::new();
    let mut names = vec!["start".to_string()];
    for st in steps {
        let seq = match st {
            Step::Malloc(size) => {
                next += 16;
                addrs.push(next);
                m.start(next, *size);
                s.malloc(next, *size)
            }
            Step::HugeMalloc => {
                next += 16;
                addrs.push(next);
                m.start(next, 1 << 63);
                s.malloc(next, 1 << 63)
            }
            Step::MallocOverLive(i, size) if !addrs.is_empty() => {
                let addr = addrs[i % addrs.len()];
                m.start(addr, *size);
                s.malloc(addr, *size)
            }
            Step::FailedMalloc(size) => s.malloc(0, *size),
            Step::Realloc(i, size) if !addrs.is_empty() => {
                let k = i % addrs.len();
                next += 16;
                m.moved(addrs[k], next, *size);
                let seq = s.realloc(addrs[k], next, *size);
                addrs[k] = next;
                seq
            }
            Step::ReallocUnknown(size) => {
                next += 16;
                addrs.push(next);
                m.start(next, *size);
                s.realloc(0xdead_0000, next, *size)
            }
            Step::ReallocToZero(i) if !addrs.is_empty() => {
                let old = addrs.swap_remove(i % addrs.len());
                m.end(old);
                s.realloc(old, 0, 0)
            }
            Step::Free(i) if !addrs.is_empty() => {
                let old = addrs.swap_remove(i % addrs.len());
                m.end(old);
                s.free(old)
            }
            Step::FreeUnknown => s.free(0xbeef_0000),
            Step::Marker(a) => {
                let name = if *a { "a" } else { "b" };
                names.push(name.to_string());
                s.mark(name);
                continue;
            }
            Step::Thread(t) => {
                s.on_thread(*t);
                continue;
            }
            _ => s.free(0),
        };
        let sample = Sample {
            calls: seq + 1,
            t_ns: Calls::t_of(seq),
            live_bytes: m.bytes,
            live_allocations: m.live.len() as u64,
            cumulated_upper_bytes: m.upper,
            cumulated_lower_bytes: m.lower,
        };
        samples.push((names.len() - 1, sample));
    }

    let points = 8;
    let config = Config {
        phase: filter.map(str::to_string),
        timeline_points: points,
        ..Config::default()
    };
    let mut a = ProcessAnalyzer::new(process_info(7, "test"), &config);
    a.feed_chunk(&s.records);
    let r = a.finish();

    // Observe both sides after every call.
    let selected = |phase: usize| filter.is_none_or(|f| f == names[phase]);
    let mut phase_bytes = vec![Max::default(); names.len()];
    let mut phase_allocations = vec![Max::default(); names.len()];
    let (mut bytes, mut allocations) = (Max::default(), Max::default());
    let mut by_calls = Downsampler::new(Axis::Calls, points);
    let mut by_time = Downsampler::new(Axis::Time, points);
    for (phase, x) in &samples {
        let call = x.calls - 1;
        phase_bytes[*phase].observe(x.live_bytes, call, x.t_ns);
        phase_allocations[*phase].observe(x.live_allocations, call, x.t_ns);
        if selected(*phase) {
            bytes.observe(x.live_bytes, call, x.t_ns);
            allocations.observe(x.live_allocations, call, x.t_ns);
            by_calls.push(x);
            by_time.push(x);
        }
    }

    let max = |p: analyze::analysis::Peak| Max {
        value: p.value,
        call: p.call,
        t_ns: p.t_ns,
    };
    prop_assert_eq!(max(r.stats.peak_live_bytes), bytes);
    prop_assert_eq!(max(r.stats.peak_live_allocations), allocations);
    for p in &r.phases {
        let i = p.index as usize;
        prop_assert_eq!(max(p.stats.peak_live_bytes), phase_bytes[i], "phase {}", i);
        prop_assert_eq!(
            max(p.stats.peak_live_allocations),
            phase_allocations[i],
            "phase {}",
            i
        );
    }
    prop_assert_eq!(&r.timeline_by_calls, &by_calls.points());
    prop_assert_eq!(&r.timeline_by_time, &by_time.points());
    prop_assert_eq!(r.timeline_calls_step, by_calls.step());
    prop_assert_eq!(r.timeline_time_step_ns, by_time.step());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn one_sided_updates_equal_observing_both_sides(
        steps in prop::collection::vec(step(), 0..300)
    ) {
        check(&steps, None)?;
        check(&steps, Some("a"))?;
        check(&steps, Some("start"))?;
    }
}

#[test]
fn a_free_that_wraps_the_live_sum_is_observed_on_both_sides() {
    // 2^63 + 2^63 wraps the live bytes to 0 (an allocation that lowers them); after 10 more,
    // freeing 2^63 wraps below zero (a free that raises them).
    use Step::*;
    let steps = [HugeMalloc, HugeMalloc, Malloc(10), Free(0), Malloc(5)];
    check(&steps, None).unwrap();
}
