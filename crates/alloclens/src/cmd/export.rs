//! `alloclens export TRACE --parquet DIR | --pprof FILE`: glue between the command line,
//! `report::export_events` (Parquet) and `profiles::from_trace` (pprof).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use report::export_events_with;

#[derive(clap::Args)]
#[command(group(
    clap::ArgGroup::new("output")
        .args(["parquet", "pprof"])
        .required(true)
        .multiple(true)
))]
pub struct Args {
    /// Trace file written by `alloclens record`
    pub trace: PathBuf,
    /// Write DIR/events.parquet: one row per allocator call (columns in docs/reports.md)
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
    /// Write FILE, a pprof heap profile (gzip-compressed profile.proto) of a trace recorded with
    /// --stacks: allocated and in-use objects and bytes by call site (docs/profile.md)
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// With --pprof: look for separate debug files under DIR (DIR/.build-id/xx/yyyy.debug, or by
    /// debuglink) instead of /usr/lib/debug; repeatable
    #[arg(long = "debug-dir", value_name = "DIR", requires = "pprof")]
    pub debug_dirs: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::check_debug_dirs(&args.debug_dirs)?;
    super::refuse_watch_dir(&args.trace, "export reads a trace of `alloclens record`")?;
    if let Some(file) = &args.pprof {
        let mut options = profiles::TraceOptions::default();
        if !args.debug_dirs.is_empty() {
            options.debug_roots = args.debug_dirs.clone();
        }
        pprof(&args.trace, file, &options)?;
    }
    if let Some(dir) = &args.parquet {
        parquet(&args.trace, dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn parquet(trace: &Path, dir: &Path) -> anyhow::Result<()> {
    let exported = {
        let bar = super::progress::RecordsBar::new("exporting");
        export_events_with(trace, dir, &bar)?
    };
    super::warn(&exported.losses.warnings("exported"));
    eprintln!(
        "alloclens: {} calls in {}",
        exported.rows,
        exported.path.display()
    );
    Ok(())
}

fn pprof(trace: &Path, file: &Path, options: &profiles::TraceOptions) -> anyhow::Result<()> {
    let made = {
        let bar = super::progress::RecordsBar::new("profiling");
        profiles::from_trace(trace, options, &bar)?
    };
    safe_output::write_whole(file, |out| {
        profiles::pprof::write_gzipped(&made.profile, out)
    })
    .map_err(|e| anyhow::anyhow!("cannot write '{}': {e}", file.display()))?;
    super::warn(&made.warnings);
    let [_, alloc_bytes, inuse_objects, inuse_bytes] = made.totals;
    let estimated = match made.sample_bytes {
        Some(r) => format!(" (estimated from stacks sampled once per {r} bytes)"),
        None => String::new(),
    };
    let resident = match made.residency_totals {
        Some([held, free]) => format!(
            "; at the last heap residency reading, {held} resident bytes held by live blocks and \
             {free} by free memory only (resident_space, free_left_space)"
        ),
        None => String::new(),
    };
    eprintln!(
        "alloclens: pprof profile of {} process image(s), {} call stacks: {alloc_bytes} bytes \
         allocated, {inuse_bytes} bytes in {inuse_objects} blocks in use at the end{estimated}{resident}, in {}",
        made.images,
        made.profile.sample.len(),
        file.display()
    );
    Ok(())
}
