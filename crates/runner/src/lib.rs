//! Runs a command under allocator variants and parameter sweeps, sampling the memory of its whole
//! process tree, its markers and its throughput. The CLI builds a [`RunPlan`]; [`execute`] runs it and
//! reports through an [`Observer`]. Nothing here prints. The results of a run and their directory
//! (results.json, samples.csv, markers.csv) are defined, written and read here ([`results_dir`]).
mod child;
mod host;
mod ksm_savings;
mod observer;
mod output;
mod plan;
mod results;
pub mod results_dir;
mod setup;
mod single;
mod stats;
mod summary;
pub mod tune_record;
mod warnings;
mod watchdog;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use child::{prctl_merge_kept_across_exec, CommandExit};
pub use host::HostInfo;
pub use ksm_savings::{ksm_savings, KsmSaving};
pub use observer::{Observer, OutputStream, Quiet};
pub use plan::{
    materialize, substitute, Assignment, KsmMechanism, Param, RunPlan, RunSpec, KSM_PARAM,
};
pub use results::{
    AllocatorCheck, Ending, KsmSession, KsmSummary, MarkerCounts, MarkerRecord, MarkerStatus,
    MemorySummary, RunRecord, RunResults, SampleKind, SeriesStats, VariantInfo,
};
pub use stats::{
    mean, median, modified_z_scores, outliers, ratio_std_dev, series_stats, std_dev,
    OUTLIER_THRESHOLD,
};
pub use summary::{summarize, Group, Ranking, VariantSummary};
pub use warnings::run_warnings;

/// The outcome of a whole plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Execution {
    pub runs: Vec<RunRecord>,
    /// True when Ctrl-C stopped the plan early: `runs` holds what was gathered until then.
    pub interrupted: bool,
    /// Problems outside the measured runs: a `--cleanup` command that failed, a warmup run that
    /// did not succeed.
    pub warnings: Vec<String>,
}

/// A flag raised by SIGINT/SIGTERM, so a run in progress can stop its tree and keep its results.
/// A second Ctrl-C while the flag is up terminates alloclens at once (the conventional escape hatch).
pub fn install_interrupt_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// Adds `library` to the end of the run's LD_PRELOAD (the variant's allocator, then what alloclens
/// inherited, stay first).
fn preload_also(
    env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>,
    inherited: Option<&std::ffi::OsStr>,
    library: &std::path::Path,
) {
    let current = match env.iter().position(|(k, _)| k == "LD_PRELOAD") {
        Some(i) => Some(env.remove(i).1),
        None => inherited.map(|v| v.to_os_string()),
    };
    let mut preload = current.filter(|v| !v.is_empty()).unwrap_or_default();
    if !preload.is_empty() {
        preload.push(" ");
    }
    preload.push(library.as_os_str());
    env.push(("LD_PRELOAD".into(), preload));
}

/// Runs every run of the plan in its schedule order. Descendants orphaned during a run are reparented
/// to this process (child subreaper) so they stay visible to the sampler and are reaped. The command's
/// tree dies with this process, however it ends (a watchdog process, see `watchdog.rs`, and the
/// command's parent-death signal: each command is started from the thread that calls `execute`, which
/// waits for it).
pub fn execute(plan: &RunPlan, observer: &mut dyn Observer, interrupted: &AtomicBool) -> Execution {
    let Session { mut watchdog } = Session::start();
    let mut runs = Vec::new();
    let mut warnings = Vec::new();
    for spec in plan.schedule() {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        if spec.repeat == 0 {
            for n in 1..=plan.warmup {
                if interrupted.load(Ordering::Relaxed) {
                    break;
                }
                observer.warmup_started(&spec, n);
                // Measured like any run, but reported to no one.
                let record = match run_prepared(plan, &spec, &mut Quiet, interrupted, &mut watchdog)
                {
                    Ok(record) => record,
                    Err(stopped) => {
                        warnings.push(format!("run {} (warmup {n}): {stopped}", spec.index));
                        break;
                    }
                };
                if !record.ending.ok() && !record.ending.interrupted {
                    warnings.push(format!(
                        "variant `{}`{}: warmup run {n} failed ({})",
                        record.variant,
                        point_suffix(&spec),
                        spawn_or_describe(&record.ending)
                    ));
                }
            }
        }
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let record = match run_prepared(plan, &spec, observer, interrupted, &mut watchdog) {
            Ok(record) => record,
            // Not a run: it never started (the summary counts the runs made).
            Err(stopped) => {
                warnings.push(format!("run {}: {stopped}", spec.index));
                break;
            }
        };
        observer.run_finished(&spec, &record);
        runs.push(record);
        if spec.repeat + 1 == plan.repeats {
            if let Some(cleanup) = &plan.cleanup {
                if let Err(setup::ShellError::Failed(e) | setup::ShellError::Interrupted(e)) =
                    setup::run_shell("--cleanup", cleanup, plan, &spec, interrupted)
                {
                    warnings.push(format!(
                        "variant `{}`{}: {e}",
                        plan.variants[spec.variant].label,
                        point_suffix(&spec)
                    ));
                }
            }
        }
    }
    Execution {
        runs,
        interrupted: interrupted.load(Ordering::Relaxed),
        warnings,
    }
}

/// Runs one run at a time, for a caller that chooses each next run from the results so far (`tune`):
/// the same measurement as [`execute`], with the same guarantees for the command's tree.
pub struct Session {
    /// Without it (fork failed) the tree is still stopped on every ending but alloclens's own death.
    watchdog: Option<watchdog::Watchdog>,
}

impl Session {
    /// Makes this process the subreaper of the commands' orphans and starts the watchdog.
    pub fn start() -> Session {
        let _ = procmem::become_child_subreaper();
        Session {
            watchdog: watchdog::Watchdog::start().ok(),
        }
    }

    /// One run of `plan.variants[spec.variant]` (after `--prepare`, when the plan has one), reported
    /// to `observer` as `execute` reports its runs (`run_finished` is the caller's to call). Err:
    /// alloclens was interrupted while `--prepare` ran (it was stopped; the message says so).
    pub fn run(
        &mut self,
        plan: &RunPlan,
        spec: &RunSpec,
        observer: &mut dyn Observer,
        interrupted: &AtomicBool,
    ) -> Result<RunRecord, String> {
        run_prepared(plan, spec, observer, interrupted, &mut self.watchdog)
    }
}

/// Runs `--prepare` (when given), then the run itself unless it failed. Err: alloclens was
/// interrupted while --prepare ran (it was stopped; the message says so).
fn run_prepared(
    plan: &RunPlan,
    spec: &RunSpec,
    observer: &mut dyn Observer,
    interrupted: &AtomicBool,
    watchdog: &mut Option<watchdog::Watchdog>,
) -> Result<RunRecord, String> {
    let variant = &plan.variants[spec.variant];
    let (command, extra_env) = materialize(plan, spec);
    let inherited = std::env::var_os("LD_PRELOAD");
    let mut env = variant.environment(inherited.as_deref());
    env.extend(extra_env);
    if let (Some(KsmMechanism::Madvise { library }), true) = (&plan.ksm_merge, plan.merges(spec)) {
        preload_also(&mut env, inherited.as_deref(), library);
    }
    let ctx = single::RunContext {
        plan,
        spec,
        variant,
        command,
        env,
        interrupted,
        watchdog: watchdog.as_mut(),
    };
    if let Some(prepare) = &plan.prepare {
        match setup::run_shell("--prepare", prepare, plan, spec, interrupted) {
            Ok(()) => {}
            Err(setup::ShellError::Failed(e)) => {
                return Ok(single::not_run(&ctx, format!("not run: {e}")))
            }
            Err(setup::ShellError::Interrupted(e)) => return Err(e),
        }
    }
    Ok(single::run_one(ctx, observer))
}

/// " at threads=4" for a run of a sweep, "" otherwise.
fn point_suffix(spec: &RunSpec) -> String {
    if spec.assignment.is_empty() {
        return String::new();
    }
    let point: Vec<String> = spec
        .assignment
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(" at {}", point.join(" "))
}

fn spawn_or_describe(ending: &Ending) -> String {
    ending
        .spawn_error
        .clone()
        .unwrap_or_else(|| ending.describe())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{OsStr, OsString};
    use std::path::Path;

    fn preload(env: &[(OsString, OsString)]) -> Vec<&OsStr> {
        env.iter()
            .filter(|(k, _)| k == "LD_PRELOAD")
            .map(|(_, v)| v.as_os_str())
            .collect()
    }

    #[test]
    fn the_ksm_library_is_preloaded_after_the_allocator() {
        let lib = Path::new("/c/libksm.so");
        let mut env = vec![("LD_PRELOAD".into(), "/a/libjemalloc.so /b/own.so".into())];
        preload_also(&mut env, Some(OsStr::new("/b/own.so")), lib);
        assert_eq!(
            preload(&env),
            [OsStr::new("/a/libjemalloc.so /b/own.so /c/libksm.so")]
        );
        // glibc: no LD_PRELOAD of the variant; what alloclens inherited stays first.
        let mut env = Vec::new();
        preload_also(&mut env, Some(OsStr::new("/b/own.so")), lib);
        assert_eq!(preload(&env), [OsStr::new("/b/own.so /c/libksm.so")]);
        let mut env = Vec::new();
        preload_also(&mut env, None, lib);
        assert_eq!(preload(&env), [OsStr::new("/c/libksm.so")]);
    }

    /// The probe agrees with the kernel's own word where it gives one: `ksm_merge_any` in
    /// /proc/PID/ksm_stat (Linux >= 6.7) of a shell started the same way.
    #[test]
    fn the_exec_probe_agrees_with_ksm_stat() {
        use std::os::unix::process::CommandExt;
        // SAFETY: PR_GET_MEMORY_MERGE only reads a flag of this process.
        if unsafe { libc::prctl(libc::PR_GET_MEMORY_MERGE, 0, 0, 0, 0) } < 0 {
            assert!(
                !prctl_merge_kept_across_exec(),
                "no prctl, no prctl mechanism"
            );
            return;
        }
        let mut sh = std::process::Command::new("sh");
        sh.args(["-c", "grep ksm_merge_any /proc/self/ksm_stat"]);
        // SAFETY: prctl touches no memory of the parent.
        unsafe {
            sh.pre_exec(|| {
                libc::prctl(libc::PR_SET_MEMORY_MERGE, 1, 0, 0, 0);
                Ok(())
            });
        }
        let stat = String::from_utf8(sh.output().unwrap().stdout).unwrap();
        if stat.is_empty() {
            eprintln!("skipped: no ksm_merge_any in ksm_stat (Linux < 6.7)");
            return;
        }
        assert_eq!(
            prctl_merge_kept_across_exec(),
            stat.contains("yes"),
            "{stat}"
        );
    }
}
