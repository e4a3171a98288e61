//! The sampling rate against its statistical error (issue 27, choosing `--stack-sample`'s
//! default): from a trace recorded with `--stacks=all`, for each rate R, the expected number of
//! sampled allocations (stacks taken) and, for the sites (stacks) with at least 1 % of the
//! requested bytes, the relative standard error of their estimated calls and bytes under
//! byte-sampling (an allocation of s bytes sampled with p = 1 - exp(-s/R), weighted 1/p:
//! Var(bytes) = sum s^2 (1-p)/p, Var(calls) = sum (1-p)/p). Exact figures, no simulation.
//!
//! Usage: cargo run --release -p trace --example sampling_error -- TRACE [RATE...]
use std::collections::HashMap;

use trace::{Op, Record, TraceReader};

#[derive(Default, Clone)]
struct Site {
    calls: f64,
    bytes: f64,
    /// Per rate: (expected samples, Var(calls), Var(bytes)).
    per_rate: Vec<(f64, f64, f64)>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: sampling_error TRACE_WITH_STACKS_ALL [RATE_BYTES...]");
        std::process::exit(2);
    };
    let rates: Vec<f64> = if args.len() > 1 {
        args[1..]
            .iter()
            .map(|r| r.parse().expect("rate in bytes"))
            .collect()
    } else {
        vec![4096.0, 16384.0, 65536.0, 524288.0]
    };
    let mut reader = TraceReader::open(path).expect("open");
    let mut sites: HashMap<u32, Site> = HashMap::new();
    let mut total_bytes = 0f64;
    for stream in 0..reader.streams().len() {
        for record in reader.records(stream).expect("records") {
            let Record::Event(e) = record.expect("decode") else {
                continue;
            };
            if matches!(e.op, Op::Free | Op::FreeSized | Op::FreeAlignedSized) || e.stack == 0 {
                continue;
            }
            let s = e.size as f64;
            total_bytes += s;
            let site = sites.entry(e.stack).or_insert_with(|| Site {
                per_rate: vec![(0.0, 0.0, 0.0); rates.len()],
                ..Site::default()
            });
            site.calls += 1.0;
            site.bytes += s;
            for (k, r) in rates.iter().enumerate() {
                let p = -(-s / r).exp_m1();
                let acc = &mut site.per_rate[k];
                acc.0 += p;
                if p > 0.0 {
                    acc.1 += (1.0 - p) / p;
                    acc.2 += s * s * (1.0 - p) / p;
                }
            }
        }
    }
    let big: Vec<&Site> = sites
        .values()
        .filter(|s| s.bytes >= 0.01 * total_bytes)
        .collect();
    println!(
        "{} sites, {:.0} bytes requested; {} sites with >= 1 % of the bytes",
        sites.len(),
        total_bytes,
        big.len()
    );
    println!("    rate    samples   calls rse (median, max)   bytes rse (median, max)");
    for (k, r) in rates.iter().enumerate() {
        let samples: f64 = sites.values().map(|s| s.per_rate[k].0).sum();
        let mut calls: Vec<f64> = big
            .iter()
            .map(|s| s.per_rate[k].1.sqrt() / s.calls)
            .collect();
        let mut bytes: Vec<f64> = big
            .iter()
            .map(|s| s.per_rate[k].2.sqrt() / s.bytes)
            .collect();
        calls.sort_by(f64::total_cmp);
        bytes.sort_by(f64::total_cmp);
        let mid = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(0.0) * 100.0;
        let max = |v: &[f64]| v.last().copied().unwrap_or(0.0) * 100.0;
        println!(
            "{:8.0} {:10.0}   {:8.2} % {:8.2} %      {:8.2} % {:8.2} %",
            r,
            samples,
            mid(&calls),
            max(&calls),
            mid(&bytes),
            max(&bytes)
        );
    }
}
