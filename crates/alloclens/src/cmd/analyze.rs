//! `alloclens analyze TRACE`: glue between the command line and the `analyze` library.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Trace file written by `alloclens record`
    pub trace: PathBuf,
    /// Print the full result as JSON on stdout (schema in docs/metrics.md) instead of the summary
    #[arg(long)]
    pub json: bool,
    /// Also write CSV files (timeline, sizes, lifetimes, per process/thread/phase, leaks) and summary.json into DIR
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Count only the phase(s) opened by markers with this label ("start" = before the first marker)
    #[arg(long, value_name = "NAME")]
    pub phase: Option<String>,
    /// Only the process with this pid (all its exec'd images)
    #[arg(long, value_name = "PID")]
    pub process: Option<u32>,
    /// Detail the N process images with the most peak live bytes (then calls), after the
    /// whole-trace summary
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
    /// Detail every process image, in trace order (instead of --top)
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
}

impl Args {
    fn options(&self) -> analyze::Options {
        analyze::Options {
            process: self.process,
            config: analyze::Config {
                phase: self.phase.clone(),
                ..analyze::Config::default()
            },
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Library errors already name the file and what was recovered.
    let result = {
        let bar = super::progress::RecordsBar::new("analysing");
        analyze::analyze_file_with(&args.trace, &args.options(), &bar)?
    };
    let analysis = &result.analysis;
    super::warn(&analysis.warnings);
    if let Some(dir) = &args.output {
        analyze::output::csv::write_csv_dir(analysis, dir)?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        analyze::output::json::write_json(analysis, &mut out)?;
    } else {
        if !result.command.is_empty() {
            writeln!(
                out,
                "trace of: {} (allocator: {}{})",
                result.command.join(" "),
                result.allocator,
                if result.no_addresses {
                    ", recorded without addresses"
                } else {
                    ""
                }
            )?;
        }
        let options = analyze::output::text::TextOptions {
            top: (!args.all).then_some(args.top),
        };
        analyze::output::text::write_text_with(analysis, options, &mut out)?;
        if let Some(dir) = &args.output {
            writeln!(
                out,
                "\nwrote CSV files and summary.json to {}",
                dir.display()
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
