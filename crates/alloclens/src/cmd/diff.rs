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
    /// Compare two traces recorded with --stacks by call site: calls, requested, peak live and leaked
    /// bytes of each allocating function (the top N of either trace, by calls)
    #[arg(long)]
    pub sites: bool,
    /// With --sites: how many functions of each trace are compared
    #[arg(long, value_name = "N", default_value_t = 10, requires = "sites")]
    pub top: usize,
}

/// Whether `path` is a results directory, its headlines, and what could not be read of it (a trace's
/// damage, said on stderr as well).
fn headlines(path: &Path) -> anyhow::Result<(bool, Vec<Headline>, Vec<String>)> {
    if RunData::is_results_dir(path) {
        Ok((true, RunData::load(path)?.headlines(), Vec::new()))
    } else if path.is_file() {
        let trace = super::load_trace(path)?;
        Ok((false, trace.headlines(), trace.analysis.analysis.warnings))
    } else {
        bail!(
            "'{}' is neither a results directory of `alloclens run` nor a trace file",
            path.display()
        )
    }
}

/// The call sites of the trace at `path`, or why it has none.
fn call_sites(path: &Path) -> anyhow::Result<(analyze::call_sites::CallSites, Vec<String>)> {
    if !path.is_file() {
        bail!(
            "'{}' is not a trace file: diff --sites compares two traces",
            path.display()
        );
    }
    let trace = super::load_trace(path)?;
    let analysis = trace.analysis;
    match analysis.call_sites {
        Some(sites) => {
            super::warn(&sites.warnings);
            Ok((sites, analysis.analysis.warnings))
        }
        None => bail!(
            "'{}' has no call stacks: record both traces with `alloclens record --stacks` to compare call sites",
            path.display()
        ),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let result = if args.sites {
        let (a, a_warnings) = call_sites(&args.a)?;
        let (b, b_warnings) = call_sites(&args.b)?;
        let mut d = report::diff_sites(
            &args.a.display().to_string(),
            &a,
            &args.b.display().to_string(),
            &b,
            args.top,
        );
        d.warnings = [a_warnings, b_warnings].concat();
        d
    } else {
        headline_diff(&args)?
    };
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

fn headline_diff(args: &Args) -> anyhow::Result<report::Diff> {
    let (a_run, a, a_warnings) = headlines(&args.a)?;
    let (b_run, b, b_warnings) = headlines(&args.b)?;
    if a_run != b_run {
        bail!("cannot compare a results directory with a trace: give two of the same kind");
    }
    let mut result = diff(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
    );
    result.warnings = [a_warnings, b_warnings].concat();
    Ok(result)
}
