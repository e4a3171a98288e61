//! `alloclens report PATH`: glue between the command line and the report library (docs/reports.md).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use report::{
    merge_runs, render_html, write_figures, FigureFormat, Reportable, RunData, TraceComparison,
};

use safe_output::write_whole;

#[derive(clap::Args)]
pub struct Args {
    /// A results directory of `alloclens run`, `tune` or `watch`, a trace file of `alloclens record`,
    /// or a dataset of `alloclens merge` (hosts and variants side by side)
    pub path: PathBuf,
    /// Write the HTML report to FILE (default: PATH/report.html for a results directory, PATH.html for
    /// a trace; not written when only --png/--svg/--parquet are asked for, unless -o is given)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Overlay a second results directory (or a second trace) in every chart (lines shown as "A: ..."
    /// and "B: ...")
    #[arg(long, value_name = "DIR")]
    pub compare: Option<PathBuf>,
    /// Also write each chart as a PNG figure (1200x700) into DIR
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// Also write each chart as an SVG figure (1200x700) into DIR
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Also write Parquet tables into DIR: samples and markers of a run, timelines and size histograms
    /// of a trace (raw trace events: `alloclens export`)
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if watch::WatchDir::is_watch_dir(&args.path) {
        return watch_report(&args);
    }
    if report::DatasetData::is_dataset(&args.path) {
        return dataset_report(&args);
    }
    let is_run = RunData::is_results_dir(&args.path);
    if let Some(other) = &args.compare {
        super::refuse_watch_dir(other, "--compare overlays two runs or two traces")?;
        // Only when the other one is surely of the other kind: anything else fails to load, saying why.
        let other_is_run = RunData::is_results_dir(other);
        if other_is_run != is_run && (other_is_run || other.is_file()) {
            bail!(
                "cannot compare a results directory with a trace ('{}', '{}'): give two of the same kind",
                args.path.display(),
                other.display()
            );
        }
    }
    let doc = if is_run {
        let data = RunData::load(&args.path)?;
        if let Some(dir) = &args.parquet {
            for (path, rows) in report::write_run_parquet(&data, dir)? {
                eprintln!("alloclens: {} rows in {}", rows, path.display());
            }
        }
        match &args.compare {
            Some(other) => {
                let b = RunData::load(other)?;
                merge_runs(&data, "A", &b, "B").document()
            }
            None => data.document(),
        }
    } else {
        if !args.path.is_file() {
            bail!(
                "'{}' is neither a results directory of `alloclens run` (with results.json) nor a trace file",
                args.path.display()
            );
        }
        let data = super::load_trace(&args.path)?;
        if let Some(dir) = &args.parquet {
            let written = report::write_analysis_parquet(&data.file.analysis, dir)?;
            for (path, rows) in written {
                eprintln!("alloclens: {} rows in {}", rows, path.display());
            }
        }
        match &args.compare {
            Some(other) => TraceComparison::new(data, super::load_trace(other)?).document(),
            None => data.document(),
        }
    };
    for (dir, format) in [
        (&args.png, FigureFormat::Png),
        (&args.svg, FigureFormat::Svg),
    ] {
        if let Some(dir) = dir {
            let written = write_figures(&doc, dir, format)?;
            eprintln!(
                "alloclens: {} {} figures in {}",
                written.len(),
                format.extension(),
                dir.display()
            );
        }
    }
    let only_files = args.png.is_some() || args.svg.is_some() || args.parquet.is_some();
    let output = match (&args.output, only_files) {
        (Some(o), _) => Some(o.clone()),
        (None, true) => None,
        (None, false) => Some(default_output(&args.path, is_run)),
    };
    if let Some(output) = output {
        write_html(&doc, &output)?;
        eprintln!("alloclens: report in {}", output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The page of a dataset of `alloclens merge`: hosts and variants side by side (docs/dataset.md).
fn dataset_report(args: &Args) -> anyhow::Result<ExitCode> {
    if args.compare.is_some() || args.parquet.is_some() {
        bail!(
            "--compare and --parquet are not available for a dataset: it is Parquet already \
             (docs/dataset.md)"
        );
    }
    let data = report::DatasetData::load(&args.path)?;
    let doc = data.document();
    write_directory_outputs(args, &doc)
}

/// The page of a `watch` directory (no --compare or --parquet for those yet).
fn watch_report(args: &Args) -> anyhow::Result<ExitCode> {
    if args.compare.is_some() || args.parquet.is_some() {
        bail!("--compare and --parquet are not available for a watch directory yet: its samples are in samples.csv");
    }
    let data = watch::WatchDir::load(&args.path)
        .with_context(|| format!("cannot read the watch in {}", args.path.display()))?;
    super::warn(&data.samples_damage);
    let doc = data.document();
    write_directory_outputs(args, &doc)
}

/// The figures (--png, --svg) and the page of a directory's document: the page goes to -o, or to
/// DIR/report.html unless only figures were asked for.
fn write_directory_outputs(args: &Args, doc: &report::Document) -> anyhow::Result<ExitCode> {
    for (dir, format) in [
        (&args.png, FigureFormat::Png),
        (&args.svg, FigureFormat::Svg),
    ] {
        if let Some(dir) = dir {
            let written = write_figures(doc, dir, format)?;
            eprintln!(
                "alloclens: {} {} figures in {}",
                written.len(),
                format.extension(),
                dir.display()
            );
        }
    }
    let output = match (&args.output, args.png.is_some() || args.svg.is_some()) {
        (Some(o), _) => Some(o.clone()),
        (None, true) => None,
        (None, false) => Some(args.path.join("report.html")),
    };
    if let Some(output) = output {
        write_html(doc, &output)?;
        eprintln!("alloclens: report in {}", output.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn default_output(path: &Path, is_run: bool) -> PathBuf {
    if is_run {
        path.join("report.html")
    } else {
        let mut name = path.as_os_str().to_owned();
        name.push(".html");
        PathBuf::from(name)
    }
}

/// Writes `DIR/report.html` for a `run` results directory (used by `demo`).
pub fn write_run_report(dir: &Path) -> anyhow::Result<PathBuf> {
    let data = RunData::load(dir)?;
    let doc = data.document();
    let output = default_output(dir, true);
    write_html(&doc, &output)?;
    Ok(output)
}

/// The page written whole (`write_whole`): a full disk leaves no half page, and an earlier page
/// stays whole.
fn write_html(doc: &report::Document, output: &Path) -> anyhow::Result<()> {
    let page = render_html(doc).context("cannot serialise the chart data")?;
    let written = write_whole(output, |out| out.write_all(page.as_bytes()));
    written.with_context(|| format!("cannot write the report '{}'", output.display()))
}
