//! `alloclens diff A B --sites`: two traces' allocating functions side by side. Functions are matched
//! by name and module file name across every process (pids differ between two recordings), and the
//! rows go through the same matching and table as every diff (`diff`).
use std::collections::HashMap;

use analyze::call_sites::CallSites;

use crate::diff::{diff, Diff};
use crate::document::chart::Unit;
use crate::headlines::Headline;

/// The figures each function gets in a diff by site.
const METRICS: [(&str, Unit); 4] = [
    ("calls", Unit::Count),
    ("requested bytes", Unit::Bytes),
    ("peak live bytes", Unit::Bytes),
    ("leaked bytes", Unit::Bytes),
];

/// Every allocating function of `sites` (its own calls, summed over processes), most calls first:
/// (scope, [calls, requested, peak live, leaked]).
fn functions(sites: &CallSites) -> Vec<(String, [u64; 4])> {
    let mut by: HashMap<String, [u64; 4]> = HashMap::new();
    for p in &sites.processes {
        for f in p.functions.iter().filter(|f| f.figures.calls > 0) {
            let module = f.module.rsplit('/').next().unwrap_or(&f.module);
            let v = by.entry(format!("{} ({module})", f.function)).or_default();
            let g = &f.figures;
            for (v, x) in v.iter_mut().zip([
                g.calls,
                g.requested_bytes,
                g.peak_live_bytes,
                g.leaked_bytes,
            ]) {
                *v += x;
            }
        }
    }
    let mut out: Vec<(String, [u64; 4])> = by.into_iter().collect();
    out.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then_with(|| a.0.cmp(&b.0)));
    out
}

fn headlines(functions: &[(String, [u64; 4])], keep: &[&String]) -> Vec<Headline> {
    functions
        .iter()
        .filter(|(name, _)| keep.contains(&name))
        .flat_map(|(name, values)| {
            METRICS
                .iter()
                .zip(values)
                .map(move |((metric, unit), v)| Headline {
                    scope: name.clone(),
                    metric: (*metric).to_string(),
                    unit: *unit,
                    value: Some(*v as f64),
                })
        })
        .collect()
}

/// The `top` functions by calls of each side (their union), each with its figures in A and B.
pub fn diff_sites(a_name: &str, a: &CallSites, b_name: &str, b: &CallSites, top: usize) -> Diff {
    let (fa, fb) = (functions(a), functions(b));
    let mut keep: Vec<&String> = fa
        .iter()
        .take(top)
        .chain(fb.iter().take(top))
        .map(|(n, _)| n)
        .collect();
    keep.sort();
    keep.dedup();
    // A function that made no call on one side shows a 0 there, not a missing figure.
    let zero =
        |mine: &[(String, [u64; 4])], other: &[(String, [u64; 4])]| -> Vec<(String, [u64; 4])> {
            let mut all = mine.to_vec();
            for (n, _) in other {
                if keep.contains(&n) && !mine.iter().any(|(m, _)| m == n) {
                    all.push((n.clone(), [0; 4]));
                }
            }
            all
        };
    let (fa, fb) = (zero(&fa, &fb), zero(&fb, &fa));
    diff(
        a_name,
        &headlines(&fa, &keep),
        b_name,
        &headlines(&fb, &keep),
    )
}
