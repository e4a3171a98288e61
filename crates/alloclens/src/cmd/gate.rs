//! `alloclens gate`: glue between the command line and `gate`: limits a CI job fails on, checked
//! against the figures of runs and traces, printed as text, Markdown, JUnit XML or GitHub
//! annotations (docs/gate.md).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// The limits file (TOML: [limits], [growth], [[site]], [[suppress]]; docs/gate.md)
    #[arg(long, value_name = "FILE")]
    pub limits: PathBuf,
    /// The baseline the "+N%" limits are relative to (JSON, kept in the repository)
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write the figures measured now to --baseline, then judge (hard limits still apply)
    #[arg(long, requires = "baseline")]
    pub update_baseline: bool,
    /// Append the verdict as Markdown to FILE (e.g. "$GITHUB_STEP_SUMMARY"; - for standard output)
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the verdict as JUnit XML to FILE, one test case per limit
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print a GitHub Actions annotation (::error) for each failed limit
    #[arg(long)]
    pub github: bool,
    /// Results directories of `alloclens run` and traces of `alloclens record`
    #[arg(required = true, value_name = "RESULTS|TRACE")]
    pub inputs: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let request = gate::Request {
        limits: args.limits.clone(),
        baseline: args.baseline.clone(),
        update_baseline: args.update_baseline,
        inputs: args.inputs.clone(),
    };
    let verdict = gate::gate(&request)?;
    for note in &verdict.notes {
        eprintln!("alloclens: {note}");
    }
    if let (Some(n), Some(path)) = (verdict.baseline_written, &args.baseline) {
        eprintln!(
            "alloclens: baseline of {n} figures written to {}",
            path.display()
        );
    }
    let (outcomes, status) = (&verdict.outcomes, verdict.status);
    let mut out = std::io::BufWriter::new(super::stdout());
    out.write_all(gate::output::text(outcomes, status).as_bytes())?;
    if args.github {
        out.write_all(gate::output::github(outcomes).as_bytes())?;
    }
    if let Some(path) = &args.markdown {
        let text = gate::output::markdown(outcomes, status);
        if path.as_os_str() == "-" {
            out.write_all(text.as_bytes())?;
        } else {
            append(path, &text)?;
        }
    }
    out.flush()?;
    if let Some(path) = &args.junit {
        let xml = gate::output::junit(
            outcomes,
            &chrono::Local::now().format("%Y-%m-%dT%H:%M:%S").to_string(),
            &hostname(),
        );
        safe_output::write_whole(path, |f| f.write_all(xml.as_bytes()))
            .with_context(|| format!("cannot write '{}'", path.display()))?;
    }
    Ok(ExitCode::from(status as u8))
}

/// A job summary is appended to: other steps write there too.
fn append(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot append to '{}'", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot append to '{}'", path.display()))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
