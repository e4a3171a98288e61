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
mod single;
mod stats;
mod summary;
mod watchdog;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use child::CommandExit;
pub use host::HostInfo;
pub use ksm_savings::{ksm_savings, KsmSaving};
pub use observer::{Observer, OutputStream, Quiet};
pub use plan::{materialize, substitute, Assignment, Param, RunPlan, RunSpec, KSM_PARAM};
pub use results::{
    AllocatorCheck, Ending, KsmSession, KsmSummary, MarkerCounts, MarkerRecord, MarkerStatus,
    MemorySummary, RunRecord, RunResults, SampleKind, SeriesStats, VariantInfo,
};
pub use stats::{median, series_stats};
pub use summary::{summarize, Group, VariantSummary};

/// The outcome of a whole plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Execution {
    pub runs: Vec<RunRecord>,
    /// True when Ctrl-C stopped the plan early: `runs` holds what was gathered until then.
    pub interrupted: bool,
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

/// Runs every run of the plan in its schedule order. Descendants orphaned during a run are reparented
/// to this process (child subreaper) so they stay visible to the sampler and are reaped. The command's
/// tree dies with this process, however it ends (a watchdog process, see `watchdog.rs`, and the
/// command's parent-death signal: each command is started from the thread that calls `execute`, which
/// waits for it).
pub fn execute(plan: &RunPlan, observer: &mut dyn Observer, interrupted: &AtomicBool) -> Execution {
    let _ = procmem::become_child_subreaper();
    // Without it (fork failed) the tree is still stopped on every ending but alloclens's own death.
    let mut watchdog = watchdog::Watchdog::start().ok();
    let mut runs = Vec::new();
    for spec in plan.schedule() {
        if interrupted.load(Ordering::Relaxed) {
            break;
        }
        let variant = &plan.variants[spec.variant];
        let (command, extra_env) = materialize(plan, &spec);
        let inherited = std::env::var_os("LD_PRELOAD");
        let mut env = variant.environment(inherited.as_deref());
        env.extend(extra_env);
        let ctx = single::RunContext {
            plan,
            spec: &spec,
            variant,
            command,
            env,
            interrupted,
            watchdog: watchdog.as_mut(),
        };
        let record = single::run_one(ctx, observer);
        observer.run_finished(&spec, &record);
        runs.push(record);
    }
    Execution {
        runs,
        interrupted: interrupted.load(Ordering::Relaxed),
    }
}
