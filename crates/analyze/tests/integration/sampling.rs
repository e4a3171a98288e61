//! The per-site estimates of sampled stacks (docs/metrics.md, "Sampled stacks"), on a synthetic
//! process whose sites' true figures are known: each allocation keeps its stack with probability
//! 1 - exp(-size/R), as the recorder samples, drawn from fixed seeds (the test cannot flake).
use analyze::calibration::Estimator;
use analyze::sampling::{share_standard_error, Sampling};
use analyze::sites::{SiteAnalyzer, SiteStats};
use trace::{Event, Op, ProcessInfo};

const R: u64 = 4096;

fn info() -> ProcessInfo {
    ProcessInfo {
        pid: 7,
        ppid: 1,
        exec_index: 0,
        cmdline: vec![],
        start_unix_ns: 0,
        truncated: false,
    }
}

/// splitmix64: a reproducible uniform draw in [0, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The program: site 1 makes 21,000 short-lived 64-byte blocks; site 2 500 blocks of 100 KiB (25 R:
/// always sampled), 100 of them leaked; site 3 3,000 blocks of 1-3,000 bytes, kept to the end
/// (leaked), so they are all live at the peak; site 4 allocates 300 blocks of 600 bytes and frees
/// them all before the end, after the peak.
fn program() -> Vec<Event> {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut push = |op: Op, addr: u64, size: u64, stack: u32| {
        events.push(Event {
            seq,
            t_ns: seq,
            tid: 1,
            stack,
            op,
            addr,
            size,
            old_addr: 0,
        });
        seq += 1;
    };
    for i in 0..3000u64 {
        push(Op::Malloc, 0x100_0000 + i * 0x1000, 1 + i, 3);
        if i < 500 {
            push(Op::Malloc, 0x900_0000 + i * 0x20000, 100 << 10, 2);
            if i >= 100 {
                push(Op::Free, 0x900_0000 + i * 0x20000, 0, 0);
            }
        }
        for _ in 0..7 {
            push(Op::Malloc, 0x10, 64, 1);
            push(Op::Free, 0x10, 0, 0);
        }
    }
    for i in 0..300u64 {
        push(Op::Malloc, 0x5000_0000 + i * 0x1000, 600, 4);
    }
    for i in 0..300u64 {
        push(Op::Free, 0x5000_0000 + i * 0x1000, 0, 0);
    }
    events
}

fn by_stack(sites: Vec<SiteStats>) -> Vec<SiteStats> {
    let mut out = vec![SiteStats::default(); 5];
    for s in sites {
        let i = s.stack as usize;
        out[i] = s;
    }
    out
}

/// Each allocation keeps its stack with the recorder's probability; the others get stack 0.
fn sampled(events: &[Event], seed: u64) -> Vec<Event> {
    let sampling = Sampling::new(R).unwrap();
    let mut rng = Rng(seed);
    events
        .iter()
        .map(|e| {
            let mut e = *e;
            if !e.op.is_free() && rng.next() >= sampling.probability(e.size) {
                e.stack = 0;
            }
            e
        })
        .collect()
}

fn run(events: &[Event], sampling: Option<Sampling>) -> Vec<SiteStats> {
    let mut a = SiteAnalyzer::with_sampling(info(), sampling);
    for e in events {
        a.push(e);
    }
    by_stack(a.finish().sites)
}

#[test]
fn estimates_are_within_their_standard_errors_and_exact_where_certain() {
    let events = program();
    let truth = run(&events, None);
    assert_eq!(
        (
            truth[1].calls,
            truth[2].leaked_blocks,
            truth[3].leaked_blocks
        ),
        (21_000, 100, 3000)
    );
    let sampling = Sampling::new(R);
    let (mut within_2se, mut checked) = (0, 0);
    for seed in 0..40 {
        let est = run(&sampled(&events, seed), sampling);
        for stack in 1..=4 {
            let (t, e) = (&truth[stack], est[stack].estimates.as_ref().unwrap());
            let figures = [
                ("calls", t.calls, e.calls),
                ("bytes", t.requested_bytes, e.requested_bytes),
                ("peak", t.peak_live_bytes, e.peak_live_bytes),
                ("leaked", t.leaked_bytes, e.leaked_bytes),
                ("leaked blocks", t.leaked_blocks, e.leaked_blocks),
            ];
            for (name, truth, e) in figures {
                let (error, se) = (e.value - truth as f64, e.standard_error());
                if stack == 2 {
                    // Every block of site 2 is certain to be sampled: exact.
                    assert!(!est[2].estimates.as_ref().unwrap().uncertain);
                    assert_eq!((e.value, se), (truth as f64, 0.0), "site 2 {name}");
                    continue;
                }
                assert!(
                    error.abs() <= 4.0 * se + 1e-6,
                    "seed {seed} site {stack} {name}: {} estimated for {truth} (se {se})",
                    e.value
                );
                checked += 1;
                within_2se += usize::from(error.abs() <= 2.0 * se + 1e-6);
            }
        }
    }
    // About 95 % of normal errors are within 2 se; a wrong variance would miss this either way
    // (too small: far fewer within; the 4 se bound above catches too small ones too).
    let share = within_2se as f64 / checked as f64;
    assert!(share > 0.85, "{within_2se} of {checked} within 2 se");
}

#[test]
fn big_sites_are_within_a_few_percent_at_this_rate() {
    let events = program();
    let truth = run(&events, None);
    let est = run(&sampled(&events, 1), Sampling::new(R));
    // Site 3 requests 4.5 MB in 3,000 blocks of up to 3,000 bytes: about 1,100 samples.
    let e = est[3].estimates.as_ref().unwrap();
    for (name, t, e) in [
        ("bytes", truth[3].requested_bytes, e.requested_bytes),
        ("peak", truth[3].peak_live_bytes, e.peak_live_bytes),
        ("leaked", truth[3].leaked_bytes, e.leaked_bytes),
    ] {
        let rel = (e.value - t as f64).abs() / t as f64;
        assert!(rel < 0.05, "{name}: {} for {t}", e.value);
        assert!(e.standard_error() / (t as f64) < 0.03, "{name}");
    }
}

/// One site making, each round, a 64 KiB block kept for 21 calls and 10 blocks of 256 bytes freed
/// at once: by count the median lifetime is 0 and the median size 256, but at R = 4 KiB the large
/// blocks (16 R) are all but certainly sampled and the small ones 6 % of the time, so most sampled
/// allocations are large.
fn mixed_lifetimes() -> Vec<Event> {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut push = |op: Op, addr: u64, size: u64| {
        events.push(Event {
            seq,
            t_ns: seq * 10,
            tid: 1,
            stack: if op.is_free() { 0 } else { 1 },
            op,
            addr,
            size,
            old_addr: 0,
        });
        seq += 1;
    };
    for round in 0..1000u64 {
        let large = 0x1000_0000 + (round % 2) * 0x10_0000;
        push(Op::Malloc, large, 64 << 10);
        if round > 0 {
            push(Op::Free, 0x1000_0000 + ((round - 1) % 2) * 0x10_0000, 0);
        }
        for _ in 0..10 {
            push(Op::Malloc, 0x10, 256);
            push(Op::Free, 0x10, 0);
        }
    }
    events
}

#[test]
fn distributions_are_weighted_like_the_totals() {
    let events = mixed_lifetimes();
    let mut a = SiteAnalyzer::new(info());
    for e in &events {
        a.push(e);
    }
    let truth = a.finish().sites.remove(0);
    assert_eq!((truth.ended, truth.lifetime_zero), (10_999, 10_000));
    assert_eq!(truth.lifetime_calls.quantile(0.5), Some(0));
    assert_eq!(truth.sizes.quantile(0.5), Some(256));
    let true_share = truth.lifetime_zero_share();
    let (mut within_2se, seeds) = (0, 40);
    for seed in 0..seeds {
        let est = run(&sampled(&events, 100 + seed), Sampling::new(R));
        let (s, e) = (&est[1], est[1].estimates.as_ref().unwrap());
        // The sampled allocations alone, unweighted, say "long-lived, 64 KiB"...
        assert!(s.lifetime_calls.quantile(0.5) > Some(0), "seed {seed}");
        assert_eq!(s.sizes.quantile(0.5), Some(64 << 10), "seed {seed}");
        // ...weighted by 1/p, what every allocation says.
        assert_eq!(e.lifetime_calls.quantile(0.5), Some(0), "seed {seed}");
        assert_eq!(e.sizes.quantile(0.5), Some(256), "seed {seed}");
        let share = e.lifetime_zero.value / e.lifetimes.value;
        let se = share_standard_error(&e.lifetime_zero, &e.lifetimes);
        let error = (share - true_share).abs();
        assert!(
            error <= 4.0 * se,
            "seed {seed}: share of lifetime 0 {share} ± {se}, {true_share} true"
        );
        within_2se += usize::from(error <= 2.0 * se);
    }
    // About 95 % of normal errors are within 2 standard errors: the share's is right.
    assert!(within_2se >= 34, "{within_2se} of {seeds} within 2 se");
}

#[test]
fn without_sampling_there_are_no_estimates() {
    let truth = run(&program(), None);
    assert!(truth.iter().all(|s| s.estimates.is_none()));
}

/// Sites that share sizes and sites alone at theirs: site 1 makes 20,000 blocks of 64 bytes freed
/// at once, site 2 5,000 of 64 bytes too (a fifth of that size), half of them kept to the end;
/// site 3 one block of each size from 1 to 3,000 bytes, kept; site 4 2,000 blocks of 600 bytes,
/// freed after the peak.
fn shared_sizes() -> Vec<Event> {
    let mut events = Vec::new();
    let mut seq = 0;
    let mut push = |op: Op, addr: u64, size: u64, stack: u32| {
        events.push(Event {
            seq,
            t_ns: seq,
            tid: 1,
            stack,
            op,
            addr,
            size,
            old_addr: 0,
        });
        seq += 1;
    };
    for i in 0..20_000u64 {
        push(Op::Malloc, 0x10, 64, 1);
        push(Op::Free, 0x10, 0, 0);
        if i % 4 == 0 {
            let addr = 0x1_0000_0000 + i * 0x100;
            push(Op::Malloc, addr, 64, 2);
            if i % 8 == 0 {
                push(Op::Free, addr, 0, 0);
            }
        }
        if i % 10 == 0 {
            push(Op::Malloc, 0x2_0000_0000 + i * 0x100, 600, 4);
        }
        if i < 3000 {
            push(Op::Malloc, 0x3_0000_0000 + i * 0x1000, 1 + i, 3);
        }
    }
    for i in (0..20_000u64).step_by(10) {
        push(Op::Free, 0x2_0000_0000 + i * 0x100, 0, 0);
    }
    events
}

/// The estimates of both estimators from one pass.
fn run_both(events: &[Event]) -> [Vec<SiteStats>; 2] {
    let mut a = SiteAnalyzer::with_sampling(info(), Sampling::new(R));
    for e in events {
        a.push(e);
    }
    let ht = a.clone().with_estimator(Estimator::HorvitzThompson);
    [by_stack(a.finish().sites), by_stack(ht.finish().sites)]
}

/// Over 50 samples: the post-stratified estimates are unbiased within their noise (the ratio's
/// bias, of order 1/n, is far below it with hundreds of samples per site), about 95 % of them are
/// within 2 of their standard errors, and the sites alone at their sizes are several times more
/// precise than with Horvitz-Thompson (a site sharing its size with another, about twice).
#[test]
fn post_stratified_estimates_are_unbiased_covered_and_more_precise() {
    let events = shared_sizes();
    let truth = run(&events, None);
    assert_eq!(
        (truth[1].calls, truth[2].calls, truth[2].leaked_blocks),
        (20_000, 5000, 2500)
    );
    assert_eq!(truth[4].peak_live_bytes, 2000 * 600);
    let true_figures = |s: &SiteStats| {
        [
            s.calls,
            s.requested_bytes,
            s.peak_live_bytes,
            s.leaked_bytes,
        ]
        .map(|v| v as f64)
    };
    let estimates = |s: &SiteStats| {
        let e = s.estimates.as_ref().unwrap();
        [
            e.calls,
            e.requested_bytes,
            e.peak_live_bytes,
            e.leaked_bytes,
        ]
    };
    let seeds = 50;
    // Per site and figure: the sums of relative errors and of their squares, per estimator.
    let mut errors = [[[(0.0f64, 0.0f64); 4]; 5]; 2];
    let (mut within_2se, mut checked) = (0, 0);
    for seed in 0..seeds {
        let sample = sampled(&events, 1000 + seed);
        for (n, est) in run_both(&sample).into_iter().enumerate() {
            for site in 1..=4 {
                let (t, e) = (true_figures(&truth[site]), estimates(&est[site]));
                for f in 0..4 {
                    // A figure of less than R bytes rests on about one sample, or none.
                    let truth = t[f];
                    if truth == 0.0 || (f >= 2 && truth < R as f64) {
                        continue;
                    }
                    let error = e[f].value - truth;
                    errors[n][site][f].0 += error / truth;
                    errors[n][site][f].1 += (error / truth).powi(2);
                    if n == 0 {
                        checked += 1;
                        within_2se += usize::from(error.abs() <= 2.0 * e[f].standard_error());
                    }
                }
            }
        }
    }
    let m = seeds as f64;
    let rmse = |n: usize, site: usize, f: usize| (errors[n][site][f].1 / m).sqrt();
    for (site, figures) in errors[0].iter().enumerate().skip(1) {
        for (f, &(sum, _)) in figures.iter().enumerate() {
            if sum == 0.0 && rmse(0, site, f) == 0.0 {
                continue;
            }
            let bias = sum / m;
            assert!(
                bias.abs() <= 3.0 * rmse(0, site, f) / m.sqrt() + 0.002,
                "site {site} figure {f}: mean relative error {bias}, rmse {}",
                rmse(0, site, f)
            );
        }
    }
    let share = within_2se as f64 / checked as f64;
    assert!(share >= 0.88, "{within_2se} of {checked} within 2 se");
    // Sites alone at their sizes: calls and bytes of site 4 (600 bytes), peak and leaked bytes of
    // site 3; site 1 shares 64 bytes with site 2.
    for (site, f, ratio) in [
        (4, 0, 0.3),
        (4, 1, 0.3),
        (3, 2, 0.5),
        (3, 3, 0.5),
        (1, 0, 0.7),
    ] {
        assert!(
            rmse(0, site, f) < ratio * rmse(1, site, f),
            "site {site} figure {f}: rmse {} post-stratified, {} Horvitz-Thompson",
            rmse(0, site, f),
            rmse(1, site, f)
        );
    }
}

/// Issue 35: a function that made every sampled allocation showed its peak as an estimate
/// "± 194.8 %". When every sampled call is of one site, the unsampled ones are too as far as the
/// sample can tell: its figures are the image's exact totals, with no ±, by function and by stack.
#[test]
fn a_site_that_made_every_sampled_allocation_has_exact_figures() {
    // 20,000 blocks of 64 bytes from one site (p = 1.5 %), the first 15,000 kept to the end.
    let mut events = Vec::new();
    for i in 0..20_000u64 {
        events.push(Event {
            seq: i,
            t_ns: i,
            tid: 1,
            stack: 1,
            op: Op::Malloc,
            addr: 0x100_0000 + i * 0x40,
            size: 64,
            old_addr: 0,
        });
    }
    for i in 15_000..20_000u64 {
        let mut free = events[i as usize];
        (free.seq, free.t_ns, free.op, free.size) = (i + 20_000, i + 20_000, Op::Free, 0);
        events.push(free);
    }
    let sites = {
        let mut a = SiteAnalyzer::with_sampling(info(), Sampling::new(R));
        for e in sampled(&events, 7) {
            a.push(&e);
        }
        a.finish().sites
    };
    assert!(sites.iter().any(|s| s.stack == 0 && s.calls > 10_000));
    let mut stacks = trace::StackTable::new();
    assert_eq!(stacks.push(&[0x4000]), 1);
    let infos = [info()];
    let input = analyze::call_sites::FoldInput {
        info: &infos[0],
        sites: &sites,
        space: analyze::call_sites::address_space(&infos[0], &infos, &[]),
        residency: None,
    };
    let folded = analyze::call_sites::fold(
        vec![input],
        &stacks,
        &mut symbols::Symbolizer::new(vec![]),
        analyze::call_sites::SortKey::Calls,
    );
    let p = &folded.processes[0];
    for figures in [&p.functions[0].figures, &p.stacks[0].figures] {
        assert_eq!(figures.calls, 20_000, "{figures:?}");
        assert_eq!(figures.peak_live_bytes, 20_000 * 64, "{figures:?}");
        assert_eq!(figures.leaked_bytes, 15_000 * 64, "{figures:?}");
        let e = figures.estimate.unwrap();
        assert!(e.exact && e.peak_live_bytes_se == 0.0, "{figures:?}");
    }
}

/// Issue 35: the blocks live where a sampled image was cut (damage, a kill, the end of the
/// recording) were counted as leaked by site; a truncated image says they are not leaks.
#[test]
fn blocks_live_at_the_cut_of_a_truncated_image_are_not_leaks() {
    let events = sampled(&program(), 3);
    for truncated in [false, true] {
        let mut a = SiteAnalyzer::with_sampling(
            ProcessInfo {
                truncated,
                ..info()
            },
            Sampling::new(R),
        );
        for e in &events {
            a.push(e);
        }
        let sites = a.finish().sites;
        let leaked: u64 = sites.iter().map(|s| s.leaked_blocks).sum();
        let estimated: f64 = sites
            .iter()
            .filter_map(|s| s.estimates.as_ref())
            .map(|e| e.leaked_blocks.value)
            .sum();
        if truncated {
            assert_eq!((leaked, estimated), (0, 0.0));
        } else {
            assert!(leaked > 0 && estimated > 0.0, "{leaked} {estimated}");
        }
    }
}
