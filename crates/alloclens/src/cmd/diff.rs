//! `alloclens diff A B`: glue between the command line and `report::diff`.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use report::RunData;
use report::{diff, Headline, Headlines};

#[derive(clap::Args)]
pub struct Args {
    /// First results directory of `alloclens run`, or first trace
    pub a: PathBuf,
    /// Second one, of the same kind
    pub b: PathBuf,
    /// Print the comparison as JSON ({a, b, rows: [{scope, metric, unit, a, b, change, change_percent}],
    /// warnings})
    #[arg(long)]
    pub json: bool,
}

/// One side of the comparison.
struct Side {
    /// A results directory (else a trace).
    is_run: bool,
    headlines: Vec<Headline>,
    /// What could not be read of it (a trace's damage, said on stderr as well).
    warnings: Vec<String>,
    /// The command that was run or recorded.
    command: Vec<String>,
}

fn side(path: &Path) -> anyhow::Result<Side> {
    if RunData::is_results_dir(path) {
        let data = RunData::load(path)?;
        Ok(Side {
            is_run: true,
            headlines: data.headlines(),
            warnings: Vec::new(),
            command: data.results.command.clone(),
        })
    } else if path.is_file() {
        let trace = super::load_trace(path)?;
        Ok(Side {
            is_run: false,
            headlines: trace.headlines(),
            command: trace.analysis.command.clone(),
            warnings: trace.analysis.analysis.warnings,
        })
    } else {
        bail!(
            "'{}' is neither a results directory of `alloclens run` nor a trace file",
            path.display()
        )
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = side(&args.a)?;
    let b = side(&args.b)?;
    if a.is_run != b.is_run {
        bail!("cannot compare a results directory with a trace: give two of the same kind");
    }
    let mut result = diff(
        &args.a.display().to_string(),
        &a.headlines,
        &args.b.display().to_string(),
        &b.headlines,
    );
    result.warnings = [a.warnings, b.warnings].concat();
    // Comparing two programs is allowed (a rewrite, new flags), but never by accident.
    if a.command != b.command {
        let warning = format!(
            "the two {} are of different commands: `{}` and `{}`",
            if a.is_run { "runs" } else { "traces" },
            a.command.join(" "),
            b.command.join(" ")
        );
        eprintln!("alloclens: warning: {warning}");
        result.warnings.push(warning);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &result)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", result.render_text())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
