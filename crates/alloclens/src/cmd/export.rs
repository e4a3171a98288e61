//! `alloclens export TRACE --parquet DIR`: glue between the command line and `report::export_events`.
use std::path::PathBuf;
use std::process::ExitCode;

use report::export_events_with;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file written by `alloclens record`
    pub trace: PathBuf,
    /// Write DIR/events.parquet: one row per allocator call (columns in docs/reports.md)
    #[arg(long, value_name = "DIR", required = true)]
    pub parquet: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::refuse_watch_dir(&args.trace, "export reads a trace of `alloclens record`")?;
    let exported = {
        let bar = super::progress::RecordsBar::new("exporting");
        export_events_with(&args.trace, &args.parquet, &bar)?
    };
    super::warn(&exported.losses.warnings("exported"));
    eprintln!(
        "alloclens: {} calls in {}",
        exported.rows,
        exported.path.display()
    );
    Ok(ExitCode::SUCCESS)
}
