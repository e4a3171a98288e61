//! `alloclens export TRACE --parquet DIR`: glue between the command line and `report::export_events`.
use std::path::PathBuf;
use std::process::ExitCode;

use report::export_events;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file written by `alloclens record`
    pub trace: PathBuf,
    /// Write DIR/events.parquet: one row per allocator call (columns in docs/reports.md)
    #[arg(long, value_name = "DIR", required = true)]
    pub parquet: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let exported = export_events(&args.trace, &args.parquet)?;
    super::warn(&exported.losses.warnings("exported"));
    eprintln!(
        "alloclens: {} calls in {}",
        exported.rows,
        exported.path.display()
    );
    Ok(ExitCode::SUCCESS)
}
