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
    let mut out: Vec<(String, [u64; 4])> = figures(sites)
        .into_iter()
        .map(|(name, (values, _))| (name, values))
        .collect();
    out.sort_by(|a, b| b.1[0].cmp(&a.1[0]).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Per function (as `functions` names them): its figures and, for sampled stacks, their variances
/// (they add: processes and stacks are sampled independently).
fn figures(sites: &CallSites) -> HashMap<String, ([u64; 4], [f64; 4])> {
    let mut by: HashMap<String, ([u64; 4], [f64; 4])> = HashMap::new();
    for p in &sites.processes {
        for f in p.functions.iter().filter(|f| f.figures.calls > 0) {
            let module = f.module.rsplit('/').next().unwrap_or(&f.module);
            let (v, var) = by.entry(format!("{} ({module})", f.function)).or_default();
            let g = &f.figures;
            for (v, x) in v.iter_mut().zip([
                g.calls,
                g.requested_bytes,
                g.peak_live_bytes,
                g.leaked_bytes,
            ]) {
                *v += x;
            }
            if let Some(e) = &g.estimate {
                for (var, se) in var.iter_mut().zip([
                    e.calls_se,
                    e.requested_bytes_se,
                    e.peak_live_bytes_se,
                    e.leaked_bytes_se,
                ]) {
                    *var += se * se;
                }
            }
        }
    }
    by
}

/// The standard errors of a sampled side's rows (None for exact sides and functions it lacks).
fn standard_errors(d: &mut Diff, sites: &CallSites, side_a: bool) {
    if sites.stack_sample_bytes.is_none() {
        return;
    }
    let by = figures(sites);
    for r in &mut d.rows {
        let Some(i) = METRICS.iter().position(|(m, _)| *m == r.metric) else {
            continue;
        };
        let se = by.get(&r.scope).map(|(_, var)| var[i].max(0.0).sqrt());
        if side_a {
            r.a_se = se;
        } else {
            r.b_se = se;
        }
    }
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
    let mut d = diff(
        a_name,
        &headlines(&fa, &keep),
        b_name,
        &headlines(&fb, &keep),
    );
    standard_errors(&mut d, a, true);
    standard_errors(&mut d, b, false);
    for (side, sites) in [("A", a), ("B", b)] {
        if let Some(r) = sites.stack_sample_bytes {
            d.notes.push(format!(
                "{side}'s stacks were sampled (one per {} allocated on average): its figures are estimates, ± one standard error",
                crate::format::format_value(Unit::Bytes, r as f64)
            ));
        }
    }
    d
}
