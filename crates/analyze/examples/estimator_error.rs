//! `estimator_error TRACE BYTES SEEDS`: the error of the per-site estimators of sampled stacks
//! over many samples of one run. TRACE is recorded with `record --stacks=all` (the truth); each
//! seed subsamples it in memory with the recorder's Poisson process of mean BYTES per thread (as
//! `subsample_stacks` does) and estimates every site (stack, per process image) with
//! Horvitz-Thompson and with post-stratification on several strata. For the top sites (>= 1 % of
//! the calls or the bytes; peak-live and leaked bytes only where the site holds >= 1 % of that
//! figure and at least BYTES of it) it prints, per estimator and figure, over sites: the median
//! absolute bias and the median and largest root-mean-square error over the seeds (relative to
//! the truth), and the share of estimates within 2 of their standard errors.
use std::collections::HashMap;
use std::process::ExitCode;

use analyze::calibration::{Estimator, SmallStrata, Strata};
use analyze::sampling::{Estimate, Sampling};
use analyze::sites::{SiteAnalyzer, SiteStats};
use trace::{Event, Record, TraceReader};

/// splitmix64, seeded: the same seed gives the same sample.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }
}

const FIGURES: [&str; 4] = ["calls", "bytes", "peak-live", "leaked"];

fn truth_of(s: &SiteStats) -> [f64; 4] {
    [
        s.calls as f64,
        s.requested_bytes as f64,
        s.peak_live_bytes as f64,
        s.leaked_bytes as f64,
    ]
}

fn estimates_of(s: &SiteStats) -> [Estimate; 4] {
    let e = s.estimates.as_ref().expect("sampled");
    [
        e.calls,
        e.requested_bytes,
        e.peak_live_bytes,
        e.leaked_bytes,
    ]
}

fn estimators() -> Vec<(String, Estimator)> {
    let mut out = vec![("HT".to_string(), Estimator::HorvitzThompson)];
    for (name, strata, k, small) in [
        ("16B merge", Strata::SizeClass16, 20, SmallStrata::Merge),
        ("16B coarsen", Strata::SizeClass16, 5, SmallStrata::Coarsen),
        ("16B coarsen", Strata::SizeClass16, 20, SmallStrata::Coarsen),
        ("image", Strata::Image, 1, SmallStrata::Merge),
    ] {
        out.push((
            format!("{name} k={k}"),
            Estimator::PostStratified {
                strata,
                min_samples: k,
                small,
            },
        ));
    }
    out
}

/// Per estimator, site and figure: the relative errors and whether each was within 2 se.
type Errors = HashMap<(usize, (usize, u32), usize), Vec<(f64, bool)>>;

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, bytes, seeds] = args.as_slice() else {
        return Err("usage: estimator_error TRACE BYTES SEEDS".into());
    };
    let mean: u64 = bytes.parse().map_err(|_| "BYTES: a number")?;
    let seeds: u64 = seeds.parse().map_err(|_| "SEEDS: a number")?;
    let sampling = Sampling::new(mean).ok_or("BYTES: positive")?;
    let mut reader = TraceReader::open(path).map_err(|e| e.to_string())?;
    let estimators = estimators();
    let mut images = Vec::new();
    for s in 0..reader.streams().len() {
        let info = reader.streams()[s].info.clone();
        let mut events: Vec<Event> = Vec::new();
        for r in reader.records(s).map_err(|e| e.to_string())? {
            if let Record::Event(e) = r.map_err(|e| e.to_string())? {
                events.push(e);
            }
        }
        images.push((info, events));
    }
    // The truth per site, and the trace's totals.
    let mut truth: HashMap<(usize, u32), [f64; 4]> = HashMap::new();
    let mut totals = [0.0; 4];
    for (i, (info, events)) in images.iter().enumerate() {
        let mut a = SiteAnalyzer::new(info.clone());
        for e in events {
            a.push(e);
        }
        for s in a.finish().sites {
            let t = truth_of(&s);
            for f in 0..4 {
                totals[f] += t[f];
            }
            if s.stack != 0 {
                truth.insert((i, s.stack), t);
            }
        }
    }
    let counted = |t: &[f64; 4], f: usize| {
        t[f] >= 0.01 * totals[f] && totals[f] > 0.0 && (f < 2 || t[f] >= mean as f64)
    };
    let top: Vec<(usize, u32)> = truth
        .iter()
        .filter(|(_, t)| t[0] >= 0.01 * totals[0] || t[1] >= 0.01 * totals[1])
        .map(|(k, _)| *k)
        .collect();
    let mut errors: Errors = HashMap::new();
    for seed in 0..seeds {
        let mut rng = Rng(seed * 7919 + 1);
        for (i, (info, events)) in images.iter().enumerate() {
            let mut a = SiteAnalyzer::with_sampling(info.clone(), Some(sampling));
            let mut countdown: HashMap<u32, f64> = HashMap::new();
            for e in events {
                let mut e = *e;
                if !e.op.is_free() {
                    let left = countdown
                        .entry(e.tid)
                        .or_insert_with(|| rng.exponential(mean as f64));
                    *left -= e.size as f64;
                    if *left <= 0.0 {
                        *left = rng.exponential(mean as f64);
                    } else {
                        e.stack = 0;
                    }
                }
                a.push(&e);
            }
            for (n, (_, estimator)) in estimators.iter().enumerate() {
                let sites: HashMap<u32, SiteStats> = a
                    .clone()
                    .with_estimator(*estimator)
                    .finish()
                    .sites
                    .into_iter()
                    .map(|s| (s.stack, s))
                    .collect();
                for key in top.iter().filter(|k| k.0 == i) {
                    let t = truth[key];
                    let est = sites.get(&key.1).map(estimates_of).unwrap_or_default();
                    for f in 0..4 {
                        if !counted(&t, f) {
                            continue;
                        }
                        let error = est[f].value - t[f];
                        let within = error.abs() <= 2.0 * est[f].standard_error() + 1e-6;
                        errors
                            .entry((n, *key, f))
                            .or_default()
                            .push((error / t[f], within));
                    }
                }
            }
        }
    }
    println!(
        "{path}: {} top sites, R = {mean}, {seeds} seeds; per figure: sites, median |bias|, median and max RMSE, share within 2 se",
        top.len()
    );
    for (n, (name, _)) in estimators.iter().enumerate() {
        let mut line = format!("{name:<12}");
        for (f, figure) in FIGURES.iter().enumerate() {
            let (mut bias, mut rmse, mut within, mut all) = (vec![], vec![], 0usize, 0usize);
            for key in &top {
                if let Some(v) = errors.get(&(n, *key, f)) {
                    let m = v.len() as f64;
                    bias.push((v.iter().map(|e| e.0).sum::<f64>() / m).abs());
                    rmse.push((v.iter().map(|e| e.0 * e.0).sum::<f64>() / m).sqrt());
                    within += v.iter().filter(|e| e.1).count();
                    all += v.len();
                }
            }
            if bias.is_empty() {
                line += &format!(" {figure:>9}: -");
                continue;
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let largest = rmse.iter().cloned().fold(0.0, f64::max);
            line += &format!(
                " {figure:>9}: {:2} {:5.1}% {:5.1}% {:5.1}% {:3.0}%",
                bias.len(),
                100.0 * median(&mut bias),
                100.0 * median(&mut rmse),
                100.0 * largest,
                100.0 * within as f64 / all as f64
            );
        }
        println!("{line}");
    }
    if std::env::var_os("VERBOSE").is_some() {
        for key in &top {
            let t = truth[key];
            println!("site {key:?}: truth {t:?}");
            for (n, (name, _)) in estimators.iter().enumerate() {
                let mut line = format!("  {name:<12}");
                for (f, figure) in FIGURES.iter().enumerate() {
                    if let Some(v) = errors.get(&(n, *key, f)) {
                        let m = v.len() as f64;
                        let bias = v.iter().map(|e| e.0).sum::<f64>() / m;
                        let rmse = (v.iter().map(|e| e.0 * e.0).sum::<f64>() / m).sqrt();
                        let within = v.iter().filter(|e| e.1).count() as f64 / m;
                        line += &format!(
                            " {figure}: {:+6.1}% {:5.1}% {:3.0}%",
                            100.0 * bias,
                            100.0 * rmse,
                            100.0 * within
                        );
                    }
                }
                println!("{line}");
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("estimator_error: error: {e}");
            ExitCode::FAILURE
        }
    }
}
