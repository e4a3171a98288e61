//! Property: on any valid sequence, the live figures follow an independent model after every call
//! (so they never go negative), and at the end equal the sum of the sizes never freed (the leaks).

use std::collections::HashMap;

use analyze::{Config, ProcessAnalyzer};
use proptest::prelude::*;
use testkit::{process_info, Calls};

#[derive(Debug, Clone)]
enum Step {
    Malloc(u64),
    Realloc(usize, u64),
    ReallocToZero(usize),
    Free(usize),
    FreeNull,
    Marker,
    Thread(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..5000).prop_map(Step::Malloc),
        2 => (any::<usize>(), 0u64..70_000).prop_map(|(i, s)| Step::Realloc(i, s)),
        1 => any::<usize>().prop_map(Step::ReallocToZero),
        4 => any::<usize>().prop_map(Step::Free),
        1 => Just(Step::FreeNull),
        1 => Just(Step::Marker),
        1 => (1u32..4).prop_map(Step::Thread),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn live_bytes_follow_the_model(steps in prop::collection::vec(step(), 0..400)) {
        let mut s = Calls::new();
        // Model: live address -> size; addresses are fresh or reused like an allocator would.
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut live: Vec<u64> = Vec::new();
        let mut next = 0x1000u64;
        let mut expected_after: Vec<(u64, u64)> = Vec::new();
        let mut phases = 0;
        for st in &steps {
            match st {
                Step::Malloc(size) => {
                    next += 16;
                    s.malloc(next, *size);
                    model.insert(next, *size);
                    live.push(next);
                }
                Step::Realloc(i, size) if !live.is_empty() => {
                    let k = i % live.len();
                    let old = live[k];
                    next += 16;
                    s.realloc(old, next, *size);
                    model.remove(&old);
                    model.insert(next, *size);
                    live[k] = next;
                }
                Step::ReallocToZero(i) if !live.is_empty() => {
                    let old = live.swap_remove(i % live.len());
                    s.realloc(old, 0, 0);
                    model.remove(&old);
                }
                Step::Free(i) if !live.is_empty() => {
                    let old = live.swap_remove(i % live.len());
                    s.free(old);
                    model.remove(&old);
                }
                Step::Marker => {
                    phases += 1;
                    s.mark(&format!("phase {phases}"));
                    continue;
                }
                Step::Thread(t) => {
                    s.on_thread(*t);
                    continue;
                }
                _ => {
                    s.free(0);
                }
            }
            expected_after.push((model.values().sum(), model.len() as u64));
        }
        let mut a = ProcessAnalyzer::new(process_info(7, "test"), &Config::default());
        let mut k = 0;
        for r in &s.records {
            a.feed(r);
            if matches!(r, trace::Record::Event(_)) {
                let (bytes, count) = a.live();
                prop_assert!(bytes < 1 << 62, "live bytes wrapped below zero: {bytes}");
                prop_assert_eq!((bytes, count), expected_after[k], "after call {}", k);
                k += 1;
            }
        }
        let r = a.finish();
        let leaked: u64 = model.values().sum();
        prop_assert_eq!(r.stats.leaks.bytes, leaked);
        prop_assert_eq!(r.stats.leaks.count, model.len() as u64);
        // Per-thread and per-phase leaks partition the process's.
        prop_assert_eq!(r.threads.iter().map(|t| t.stats.leaks.bytes).sum::<u64>(), leaked);
        prop_assert_eq!(r.phases.iter().map(|p| p.stats.leaks.bytes).sum::<u64>(), leaked);
        // Lower bound never exceeds the upper bound; both are the sums the definitions say.
        prop_assert!(r.stats.cumulated_lower_bytes <= r.stats.requested_bytes);
        if let Some(last) = r.timeline_by_calls.last() {
            prop_assert_eq!(last.live_bytes, leaked);
            prop_assert!(last.live_bytes_min <= last.live_bytes && last.live_bytes <= last.live_bytes_max);
        }
        prop_assert!(r.timeline_by_calls.len() <= 2000);
    }
}
