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
    /// whole-trace summary (default 5); with --sites, their call sites
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Detail every process image, in trace order (instead of --top)
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// Show the call sites instead of the summary (a trace recorded with --stacks): the top functions
    /// and stacks of each process, resolved offline from the recorded modules, with each site's resident
    /// and free-left heap bytes when recorded with --addresses; with --json, all of them as JSON; with
    /// -o, also sites_by_function.csv and sites_by_stack.csv
    #[arg(long)]
    pub sites: bool,
    /// Show which call sites hold the heap's resident pages instead of the summary (a trace
    /// recorded with --addresses): at each memory sample, the heap's resident pages split into
    /// held by live blocks, by free memory only, allocator metadata and outside; with --json, all
    /// of it as JSON
    #[arg(long, conflicts_with_all = ["sites", "output", "phase"])]
    pub residency: bool,
    /// With --sites: the N top functions and stacks shown per process image
    #[arg(long, value_name = "N", default_value_t = 10, requires = "sites")]
    pub functions: usize,
    /// With --sites: the figure that orders the call sites: allocating calls, requested bytes, bytes live
    /// at the process's peak, leaked bytes
    #[arg(long, value_enum, value_name = "FIGURE", default_value_t = SiteSort::Calls, requires = "sites")]
    pub sort: SiteSort,
    /// With --sites: look for separate debug files under DIR (DIR/.build-id/xx/yyyy.debug, or by
    /// debuglink) instead of /usr/lib/debug; repeatable
    #[arg(long = "debug-dir", value_name = "DIR", requires = "sites")]
    pub debug_dirs: Vec<PathBuf>,
    /// Analyse up to N process images at once, each on a thread of its own (default: one per
    /// core, at most 4); 1 analyses them one after another on one thread. Same results either way
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
}

/// `--sort`: which figure orders the call sites.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SiteSort {
    // Variants without doc comments: clap would switch the whole --help to its long layout.
    Calls,
    Bytes,
    Peak,
    Leaked,
}

impl SiteSort {
    fn key(self) -> analyze::call_sites::SortKey {
        use analyze::call_sites::SortKey;
        match self {
            SiteSort::Calls => SortKey::Calls,
            SiteSort::Bytes => SortKey::Bytes,
            SiteSort::Peak => SortKey::PeakLive,
            SiteSort::Leaked => SortKey::Leaked,
        }
    }

    fn label(self) -> &'static str {
        match self {
            SiteSort::Calls => "calls",
            SiteSort::Bytes => "requested bytes",
            SiteSort::Peak => "bytes live at the peak",
            SiteSort::Leaked => "leaked bytes",
        }
    }
}

impl Args {
    fn options(&self) -> analyze::Options {
        analyze::Options {
            process: self.process,
            config: analyze::Config {
                phase: self.phase.clone(),
                ..analyze::Config::default()
            },
            call_sites: self.sites.then(|| {
                let mut o = analyze::call_sites::CallSiteOptions {
                    sort: self.sort.key(),
                    ..Default::default()
                };
                if !self.debug_dirs.is_empty() {
                    o.debug_roots = self.debug_dirs.clone();
                }
                o
            }),
            threads: self.threads.map(|n| n as usize),
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::check_debug_dirs(&args.debug_dirs)?;
    // Library errors already name the file and what was recovered.
    super::refuse_watch_dir(&args.trace, "analyze reads a trace of `alloclens record`")?;
    if args.residency {
        return write_residency(&args);
    }
    let result = {
        let bar = super::progress::RecordsBar::new("analysing");
        analyze::analyze_file_with(&args.trace, &args.options(), &bar)?
    };
    let analysis = &result.analysis;
    super::warn(&analysis.warnings);
    if args.sites {
        return write_sites(&args, &result);
    }
    if let Some(dir) = &args.output {
        analyze::output::csv::write_csv_dir(analysis, dir)?;
    }
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json && result.leaks.is_empty() {
        analyze::output::json::write_json(analysis, &mut out)?;
    } else if args.json {
        // `record --leaks`: the leak check of each image beside the figures.
        let mut json = serde_json::to_value(analysis)?;
        json["leaks"] = serde_json::to_value(&result.leaks)?;
        serde_json::to_writer(&mut out, &json)?;
        writeln!(out)?;
    } else {
        if !result.command.is_empty() {
            writeln!(
                out,
                "trace of: {} (allocator: {}{})",
                analyze::output::command_line(&result.command),
                result.allocator,
                if result.no_addresses {
                    ", recorded without addresses"
                } else {
                    ""
                }
            )?;
        }
        if let Some((pid, figures)) = &result.attached {
            writeln!(
                out,
                "{}",
                analyze::output::text::attached_line(*pid, figures.as_ref(), analysis)
            )?;
        }
        let options = analyze::output::text::TextOptions {
            top: (!args.all).then_some(args.top.unwrap_or(5)),
        };
        analyze::output::text::write_text_with(analysis, options, &mut out)?;
        for leaks in &result.leaks {
            analyze::leaks::write_text(leaks, options.top, &mut out)?;
        }
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

/// `--residency`: which call sites hold the heap's resident pages, as text or JSON.
fn write_residency(args: &Args) -> anyhow::Result<ExitCode> {
    let result = analyze::residency::analyze_residency(&args.trace, args.process)?;
    super::warn(&result.warnings);
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json {
        analyze::output::residency::write_residency_json(&result, &mut out)?;
    } else {
        analyze::output::residency::write_residency_text(&result, args.functions, &mut out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `--sites`: the call sites as text, JSON, and CSV files.
fn write_sites(args: &Args, result: &analyze::FileAnalysis) -> anyhow::Result<ExitCode> {
    let Some(sites) = &result.call_sites else {
        anyhow::bail!(
            "'{}' has no call stacks: record it with `alloclens record --stacks` to see call sites",
            args.trace.display()
        );
    };
    super::warn(&sites.warnings);
    if let Some(dir) = &args.output {
        analyze::output::sites::write_sites_csv(sites, dir)?;
    }
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json {
        analyze::output::sites::write_sites_json(sites, &mut out)?;
    } else {
        // Images ranked as the summary ranks them (a wrapper's shells would come first otherwise).
        let processes = &result.analysis.processes;
        let images = analyze::output::sites::ranked_images(
            sites,
            (!args.all).then_some(args.top.unwrap_or(5)),
            |pid, exec| {
                processes
                    .iter()
                    .find(|p| p.pid == pid && p.exec_index == exec)
                    .map_or((0, 0), |p| {
                        (p.stats.peak_live_bytes.value, p.stats.calls_total)
                    })
            },
        );
        let options = analyze::output::sites::SitesTextOptions {
            images: &images,
            functions: args.functions,
            sort: args.sort.key(),
            sort_label: args.sort.label(),
        };
        analyze::output::sites::write_sites_text(sites, &options, &mut out)?;
        if let Some(dir) = &args.output {
            writeln!(
                out,
                "\nwrote sites_by_function.csv and sites_by_stack.csv to {}",
                dir.display()
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
