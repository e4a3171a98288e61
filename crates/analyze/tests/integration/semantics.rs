//! The definitions of docs/metrics.md checked on small crafted sequences, values computed by hand.

use analyze::{analyze_process, Config, ProcessReport};
use testkit::{process_info, Calls};

fn run(s: &Calls) -> ProcessReport {
    analyze_process(
        process_info(42, "test"),
        s.records.clone(),
        &Config::default(),
    )
}

fn run_phase(s: &Calls, phase: &str) -> ProcessReport {
    let config = Config {
        phase: Some(phase.to_string()),
        ..Config::default()
    };
    analyze_process(process_info(42, "test"), s.records.clone(), &config)
}

fn lifetimes(r: &ProcessReport) -> (u64, Option<u64>, u64) {
    let l = &r.stats.lifetimes;
    (l.count, l.median_calls, l.max_calls)
}

// The three examples of the git-cinnabar study.
#[test]
fn study_example_malloc_then_free_has_lifetime_0() {
    let mut s = Calls::new();
    s.malloc(0x10, 42);
    s.free(0x10);
    let r = run(&s);
    assert_eq!(lifetimes(&r), (1, Some(0), 0));
    assert_eq!(r.stats.lifetimes.share_zero, 1.0);
}

#[test]
fn study_example_other_malloc_in_between_has_lifetime_1() {
    let mut s = Calls::new();
    s.malloc(0x10, 42);
    s.malloc(0x20, 42);
    s.free(0x10);
    let r = run(&s);
    assert_eq!(lifetimes(&r), (1, Some(1), 1));
    assert_eq!(r.stats.leaks.count, 1, "other is never freed");
}

#[test]
fn study_example_realloc_continues_the_allocation_lifetime_1() {
    let mut s = Calls::new();
    s.malloc(0x10, 42);
    s.realloc(0x10, 0x30, 84);
    s.free(0x30);
    let r = run(&s);
    // One allocation with lifetime 1, not two malloc/free pairs.
    assert_eq!(lifetimes(&r), (1, Some(1), 1));
    assert_eq!(r.stats.allocations, 1);
    assert_eq!(r.stats.leaks.count, 0);
}

#[test]
fn lifetime_in_ns_and_share_of_life() {
    let mut s = Calls::new();
    s.malloc(0x10, 8); // call 0
    for i in 0..8 {
        s.free(0); // calls 1..8: free(NULL) counts as a call
        let _ = i;
    }
    s.free(0x10); // call 9
    let r = run(&s);
    assert_eq!(r.life_calls, 10);
    let p50 = r
        .stats
        .lifetimes
        .percentiles
        .iter()
        .find(|p| p.q == 0.5)
        .unwrap();
    assert_eq!(p50.calls, 8);
    assert_eq!(p50.ns, Calls::t_of(9) - Calls::t_of(0));
    assert!((p50.share_of_life - 0.8).abs() < 1e-12);
    assert_eq!(r.stats.null_frees, 8);
    assert_eq!(r.stats.calls["free"], 9);
    assert_eq!(r.stats.calls_total, 10);
}

#[test]
fn cumulated_bounds_with_realloc_chains() {
    let mut s = Calls::new();
    s.malloc(0x10, 100);
    s.realloc(0x10, 0x20, 200); // moves
    s.realloc(0x20, 0x20, 50); // shrinks in place
    s.calloc(0x30, 10);
    s.realloc(0, 0x40, 7); // realloc(NULL, 7) starts a chain
    s.free(0x20);
    let r = run(&s);
    // Upper: every size requested: 100 + 200 + 50 + 10 + 7.
    assert_eq!(r.stats.requested_bytes, 367);
    // Lower: final size of each chain: 50 + 10 + 7.
    assert_eq!(r.stats.cumulated_lower_bytes, 67);
    assert_eq!(r.stats.requests, 5);
    assert_eq!(r.stats.allocations, 3);
    let last = r.timeline_by_calls.last().unwrap();
    assert_eq!(
        (last.cumulated_upper_bytes, last.cumulated_lower_bytes),
        (367, 67)
    );
    assert_eq!(last.calls, 6);
    // Live after the free: 10 + 7.
    assert_eq!(last.live_bytes, 17);
    assert_eq!(r.stats.leaks.bytes, 17);
    // Peak live: 200 after call 1 (the first realloc), 2 allocations after call 3.
    assert_eq!(
        (r.stats.peak_live_bytes.value, r.stats.peak_live_bytes.call),
        (200, 1)
    );
    assert_eq!(r.stats.peak_live_bytes.t_ns, Calls::t_of(1));
    assert_eq!(
        (
            r.stats.peak_live_allocations.value,
            r.stats.peak_live_allocations.call
        ),
        (3, 4)
    );
    // The chain's lifetime runs from the malloc (call 0) to the free (call 5).
    assert_eq!(lifetimes(&r), (1, Some(4), 4));
}

#[test]
fn size_buckets_at_the_edges() {
    let mut s = Calls::new();
    let sizes = [15u64, 16, 511, 512, 32767, 32768];
    for (i, size) in sizes.iter().enumerate() {
        s.malloc(0x1000 * (i as u64 + 1), *size);
    }
    let r = run(&s);
    let z = &r.stats.sizes;
    let b16: Vec<(u64, u64, u64)> = z
        .buckets_16
        .iter()
        .map(|b| (b.low, b.high, b.count))
        .collect();
    assert_eq!(
        b16,
        vec![
            (0, 15, 1),
            (16, 31, 1),
            (496, 511, 1),
            (512, 527, 1),
            (32752, 32767, 1),
            (32768, 32783, 1)
        ]
    );
    let b32: Vec<(u64, u64, u64)> = z
        .buckets_32k
        .iter()
        .map(|b| (b.low, b.high, b.count))
        .collect();
    assert_eq!(b32, vec![(0, 32767, 5), (32768, 65535, 1)]);
    let p2: Vec<(u64, u64)> = z.buckets_pow2.iter().map(|b| (b.low, b.count)).collect();
    assert_eq!(
        p2,
        vec![(8, 1), (16, 1), (256, 1), (512, 1), (16384, 1), (32768, 1)]
    );
    assert_eq!(z.count, 6);
    assert!((z.share_below_512 - 0.5).abs() < 1e-12);
}

#[test]
fn realloc_new_sizes_are_in_the_distribution_but_frees_are_not() {
    let mut s = Calls::new();
    s.malloc(0x10, 100);
    s.realloc(0x10, 0x10, 1000);
    s.realloc(0x10, 0, 0); // realloc(p, 0) returning NULL frees p
    let r = run(&s);
    let sizes: Vec<u64> = r.stats.sizes.buckets_16.iter().map(|b| b.low).collect();
    assert_eq!(sizes, vec![96, 992]);
    assert_eq!(lifetimes(&r), (1, Some(1), 1));
    assert_eq!(r.stats.leaks.count, 0);
    assert_eq!(r.timeline_by_calls.last().unwrap().live_bytes, 0);
}

#[test]
fn unmatched_frees_failures_and_null_frees_are_counted_not_fatal() {
    let mut s = Calls::new();
    s.free(0xdead); // allocated before tracing began
    s.free(0); // free(NULL)
    s.malloc(0, 1 << 40); // failed
    s.memalign(0x40, 64);
    s.realloc(0xbeef, 0x50, 30); // resize of an unknown block: followed from here
    s.realloc(0x40, 0, 1 << 41); // failed realloc: 0x40 stays live
    s.free(0x50);
    let r = run(&s);
    let st = &r.stats;
    assert_eq!(st.unmatched_frees, 1);
    assert_eq!(st.null_frees, 1);
    assert_eq!(st.failed_allocations, 2);
    assert_eq!(st.failed_bytes, (1 << 40) + (1 << 41));
    assert_eq!(st.unmatched_reallocs, 1);
    assert_eq!(st.allocations, 2);
    assert_eq!(st.requested_bytes, 64 + 30);
    assert_eq!(st.calls_total, 7);
    assert_eq!(st.calls["posix_memalign"], 1);
    // 0x40 is still live (the failed realloc did not free it).
    assert_eq!((st.leaks.count, st.leaks.bytes), (1, 64));
    // The followed chain ends at the free: lifetime 1 (the failed realloc in between).
    assert_eq!(lifetimes(&r), (1, Some(1), 1));
}

#[test]
fn leaks_report_count_bytes_and_top_sizes() {
    let mut s = Calls::new();
    for i in 0..3 {
        s.malloc(0x100 + i, 16);
    }
    s.malloc(0x200, 4096);
    s.malloc(0x300, 8);
    s.free(0x300);
    let r = run(&s);
    let l = &r.stats.leaks;
    assert_eq!((l.count, l.bytes), (4, 3 * 16 + 4096));
    let top: Vec<(u64, u64, u64)> = l
        .top_sizes
        .iter()
        .map(|t| (t.size, t.count, t.bytes))
        .collect();
    assert_eq!(top, vec![(4096, 1, 4096), (16, 3, 48)]);
}

#[test]
fn phases_split_at_markers_and_filter() {
    let mut s = Calls::new();
    s.malloc(0x10, 100); // call 0, phase "start"
    s.mark("import");
    s.malloc(0x20, 30); // call 1
    s.free(0x10); // call 2: frees an allocation of "start"
    s.mark("finish");
    s.free(0x20); // call 3
    s.malloc(0x30, 5); // call 4, leaked
    let r = run(&s);
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["start", "import", "finish"]);
    let imp = &r.phases[1];
    assert_eq!((imp.start_call, imp.end_call), (1, 3));
    assert_eq!(imp.stats.calls_total, 2);
    assert_eq!(imp.stats.requested_bytes, 30);
    // Process-wide peak while "import" was current: 130 bytes after call 1.
    assert_eq!(
        (
            imp.stats.peak_live_bytes.value,
            imp.stats.peak_live_bytes.call
        ),
        (130, 1)
    );
    // Lifetimes belong to the phase where the allocation was made.
    assert_eq!(r.phases[0].stats.lifetimes.median_calls, Some(1));
    assert_eq!(imp.stats.lifetimes.median_calls, Some(1));
    assert_eq!(r.phases[2].stats.leaks.count, 1);

    let f = run_phase(&s, "import");
    assert_eq!(f.stats.calls_total, 2);
    assert_eq!(f.stats.requested_bytes, 30);
    assert_eq!(
        f.stats.lifetimes.count, 1,
        "only the allocation made in the phase"
    );
    assert_eq!(f.stats.peak_live_bytes.value, 130);
    assert!(
        f.timeline_by_calls
            .iter()
            .all(|p| (2..=3).contains(&p.calls)),
        "{:?}",
        f.timeline_by_calls
    );
    assert_eq!(f.phases.len(), 3, "all phases are still listed");
    assert_eq!(f.life_calls, 5, "the life is the whole process");
}

#[test]
fn a_marker_before_any_call_leaves_no_empty_start_phase() {
    let mut s = Calls::new();
    s.mark("only");
    s.malloc(0x10, 1);
    let r = run(&s);
    let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["only"]);
}

#[test]
fn threads_are_attributed_to_the_allocating_thread() {
    let mut s = Calls::new();
    s.on_thread(1).malloc(0x10, 100); // call 0
    s.on_thread(2).malloc(0x20, 50); // call 1
    s.on_thread(2).free(0x10); // call 2: thread 2 frees thread 1's block
    s.on_thread(1).malloc(0x30, 10); // call 3
    let r = run(&s);
    assert_eq!(r.threads.len(), 2);
    let t1 = &r.threads.iter().find(|t| t.tid == 1).unwrap().stats;
    let t2 = &r.threads.iter().find(|t| t.tid == 2).unwrap().stats;
    assert_eq!((t1.calls_total, t2.calls_total), (2, 2));
    assert_eq!((t1.requested_bytes, t2.requested_bytes), (110, 50));
    assert_eq!(t1.lifetimes.median_calls, Some(1));
    assert_eq!(t2.lifetimes.count, 0);
    assert_eq!(t2.calls["free"], 1);
    // Thread live = its own allocations still live: t1 peaks at 100 (call 0).
    assert_eq!(
        (t1.peak_live_bytes.value, t1.peak_live_bytes.call),
        (100, 0)
    );
    assert_eq!(t2.peak_live_bytes.value, 50);
    assert_eq!((t1.leaks.bytes, t2.leaks.bytes), (10, 50));
    assert_eq!(r.stats.peak_live_bytes.value, 150);
}

#[test]
fn over_represented_sizes_are_found() {
    let mut s = Calls::new();
    let mut addr = 0x1000;
    // A flat background: 5 of each size 520, 536, ..., 2040; and 100 more of 1104.
    for size in (520..2048).step_by(16) {
        for _ in 0..5 {
            addr += 0x10;
            s.malloc(addr, size);
        }
    }
    for _ in 0..100 {
        addr += 0x10;
        s.malloc(addr, 1104);
    }
    let r = run(&s);
    let over: Vec<(u64, u64)> = r
        .stats
        .sizes
        .over_represented
        .iter()
        .map(|o| (o.low, o.top_size))
        .collect();
    assert_eq!(over, vec![(1104, 1104)]);
}

#[test]
fn cdf_is_monotone_and_starts_with_the_share_of_zero() {
    let mut s = Calls::new();
    // Lifetimes 0, 1, 2, ..., 9.
    for k in 0..10u64 {
        s.malloc(0x1000 + k, 8);
        for j in 0..k {
            s.malloc(0x9000 + k * 100 + j, 1);
        }
        s.free(0x1000 + k);
    }
    let r = run(&s);
    let l = &r.stats.lifetimes;
    assert_eq!(l.count, 10);
    assert!((l.share_zero - 0.1).abs() < 1e-12);
    assert_eq!(l.cdf[0].below_calls, 1);
    assert!((l.cdf[0].fraction - 0.1).abs() < 1e-12);
    let four = l.cdf.iter().find(|c| c.below_calls == 4).unwrap();
    assert!((four.fraction - 0.4).abs() < 1e-12);
    assert!(l
        .cdf
        .windows(2)
        .all(|w| w[0].fraction <= w[1].fraction && w[0].below_calls < w[1].below_calls));
    assert_eq!(l.cdf.last().unwrap().fraction, 1.0);
    let q = |q: f64| l.percentiles.iter().find(|p| p.q == q).unwrap().calls;
    assert_eq!((q(0.1), q(0.5), q(0.9), q(1.0)), (0, 4, 8, 9));
}
