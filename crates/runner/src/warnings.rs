//! The warnings of a `run` session, for results.json and the terminal: runs that failed, outliers,
//! allocators not loaded, markers late, --throughput without a figure, KSM settings not applied or
//! given back only after unmerging, an interrupted session. One list, in that order.
use crate::results_dir::{failure_warnings, marker_warnings};
use crate::{Execution, Group, RunPlan, RunRecord};

/// Every warning of a session of `total` runs. `ksm_problems`: settings that could not be set
/// before a run; `ksm_restore`: how giving the KSM settings back went (true: only after unmerging).
pub fn run_warnings(
    plan: &RunPlan,
    execution: &Execution,
    summary: &[Group],
    total: u64,
    ksm_problems: Vec<String>,
    ksm_restore: Option<&Result<bool, procmem::ksm_control::KsmError>>,
) -> Vec<String> {
    let names: Vec<String> = plan.params.iter().map(|p| p.name.clone()).collect();
    let mut warnings = failure_warnings(execution);
    warnings.extend(execution.warnings.iter().cloned());
    warnings.extend(outlier_warnings(summary, &names));
    warnings.extend(verification_warnings(&execution.runs));
    warnings.extend(marker_warnings(execution));
    warnings.extend(throughput_warning(plan, &execution.runs));
    warnings.extend(ksm_problems);
    match ksm_restore {
        Some(Err(e)) => warnings.push(e.to_string()),
        Some(Ok(true)) => warnings.push(
            "KSM: a setting could only be given back after unmerging every merged page of the machine (run=2; the kernel refuses merge_across_nodes and max_page_sharing changes while pages are merged)".into(),
        ),
        _ => {}
    }
    if execution.interrupted {
        warnings.push(format!(
            "interrupted: {} of {} runs done; results keep what was gathered",
            execution.runs.len(),
            total
        ));
    }
    warnings
}

/// hyperfine's outlier warnings, per variant and point: wall times far from the median, and a
/// first run slower than the rest.
fn outlier_warnings(summary: &[crate::Group], names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for group in summary {
        let point: Vec<String> = names
            .iter()
            .filter_map(|n| group.params.get(n).map(|v| format!("{n}={v}")))
            .collect();
        let at = if point.is_empty() {
            String::new()
        } else {
            format!(" at {}", point.join(" "))
        };
        for v in &group.variants {
            if v.first_run_outlier {
                out.push(format!(
                    "variant `{}`{at}: the first run was much slower than the others (caches filled by it?): use --warmup 1 or more",
                    v.variant
                ));
            } else if v.wall_outliers > 0 {
                out.push(format!(
                    "variant `{}`{at}: {} of {} runs' wall times are statistical outliers (modified Z-score above {:.1}): rerun on a quiet machine; --warmup or --prepare may help",
                    v.variant,
                    v.wall_outliers,
                    v.runs - v.failed,
                    crate::OUTLIER_THRESHOLD
                ));
            }
        }
    }
    out
}

fn verification_warnings(runs: &[RunRecord]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        if r.ksm.as_ref().and_then(|k| k.library.as_ref())
            == Some(&crate::AllocatorCheck::NotLoaded)
        {
            out.push(format!(
                "run {} (ksm=on): the KSM library was NOT mapped in the command (static binary, setuid program, or LD_PRELOAD reset?): its tree was not made mergeable, and the KSM table leaves the run out",
                r.index
            ));
        }
        let w = match r.allocator_check {
            crate::AllocatorCheck::NotLoaded => format!(
                "variant `{}`: its library was NOT mapped in the command (static binary, setuid program, or LD_PRELOAD reset?): its figures are not {}'s",
                r.variant, r.allocator
            ),
            _ if !r.other_allocators.is_empty() => format!(
                "variant `{}`: other allocator libraries are mapped too ({})",
                r.variant,
                r.other_allocators.join(", ")
            ),
            _ => continue,
        };
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// --throughput given, yet runs without its figure (no output line matched with a number in its
/// first group): said, with the runs concerned; None when every run has it.
fn throughput_warning(plan: &RunPlan, runs: &[RunRecord]) -> Option<String> {
    let re = plan.throughput.as_ref()?;
    let without: Vec<String> = runs
        .iter()
        .filter(|r| r.throughput.is_none())
        .map(|r| r.index.to_string())
        .collect();
    if without.is_empty() {
        None
    } else if without.len() == runs.len() {
        Some(format!(
            "--throughput '{}' matched no output line with a number in its first capture group, in any run: no throughput column, the summary is ranked by median wall time (check the regex against the command's output)",
            re.as_str(),
        ))
    } else {
        Some(format!(
            "--throughput '{}' matched no output line with a number in its first capture group in {} of {} runs (run {}): they have no throughput",
            re.as_str(),
            without.len(),
            runs.len(),
            without.join(", ")
        ))
    }
}
