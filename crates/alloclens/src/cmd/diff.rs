//! `alloclens diff A B`: glue between the command line and `report::diff` (runs, traces) or
//! `profiles::diff` (two pprof snapshots).
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use report::RunData;
use report::{diff, Headline, Headlines};

#[derive(clap::Args)]
pub struct Args {
    /// First results directory of `alloclens run`, first trace, or first pprof snapshot
    /// (`alloclens snapshot`)
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
    /// With --sites: how many functions of each trace are compared; with two snapshots: how many
    /// call stacks are printed, by in-use growth
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// With two snapshots: write FILE, a pprof profile whose values are B - A (docs/profile.md)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
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
    super::refuse_watch_dir(path, "diff compares two runs or two traces")?;
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
            command: trace.file.command.clone(),
            warnings: trace.file.analysis.warnings,
        })
    } else {
        bail!(
            "'{}' is neither a results directory of `alloclens run` nor a trace file",
            path.display()
        )
    }
}

/// The call sites of the trace at `path`, or why it has none.
fn call_sites(
    path: &Path,
) -> anyhow::Result<(analyze::call_sites::CallSites, Vec<String>, Vec<String>)> {
    super::refuse_watch_dir(path, "diff --sites compares two traces")?;
    if !path.is_file() {
        bail!(
            "'{}' is not a trace file: diff --sites compares two traces",
            path.display()
        );
    }
    let trace = super::load_trace(path)?;
    let analysis = trace.file;
    match analysis.call_sites {
        Some(sites) => {
            super::warn(&sites.warnings);
            Ok((sites, analysis.analysis.warnings, analysis.command))
        }
        None => bail!(
            "'{}' has no call stacks: record both traces with `alloclens record --stacks` to compare call sites",
            path.display()
        ),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match (is_pprof(&args.a), is_pprof(&args.b)) {
        (true, true) if args.sites => {
            bail!("--sites compares two traces; two pprof snapshots are compared by call site without it")
        }
        (true, true) => return super::profile_diff::run(&args),
        (false, false) => {}
        _ => bail!("cannot compare a pprof profile with a run or a trace: give two snapshots"),
    }
    if args.output.is_some() {
        bail!("-o writes the difference of two pprof snapshots (`alloclens snapshot`); A and B are not");
    }
    let (mut result, commands) = if args.sites {
        let (a, a_warnings, a_command) = call_sites(&args.a)?;
        let (b, b_warnings, b_command) = call_sites(&args.b)?;
        let mut d = report::diff_sites(
            &args.a.display().to_string(),
            &a,
            &args.b.display().to_string(),
            &b,
            args.top,
        );
        d.warnings = [a_warnings, b_warnings].concat();
        (d, Some(("traces", a_command, b_command)))
    } else {
        headline_diff(&args)?
    };
    // Comparing two programs is allowed (a rewrite, new flags), but never by accident.
    if let Some((kind, a, b)) = commands.filter(|(_, a, b)| a != b) {
        let warning = format!(
            "the two {kind} are of different commands: `{}` and `{}`",
            a.join(" "),
            b.join(" ")
        );
        eprintln!("alloclens: warning: {warning}");
        result.warnings.push(warning);
    }
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &result)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", result.render_text())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The two sides' commands (to warn when they differ) come back with the comparison.
type Commands = Option<(&'static str, Vec<String>, Vec<String>)>;

fn headline_diff(args: &Args) -> anyhow::Result<(report::Diff, Commands)> {
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
    let kind = if a.is_run { "runs" } else { "traces" };
    Ok((result, Some((kind, a.command, b.command))))
}

/// A gzip-compressed file: a pprof profile (traces and results are not).
fn is_pprof(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|_| magic == [0x1f, 0x8b])
}
