//! The command-line definition (clap). Conversion to typed options happens in each command's module.
use clap::{Parser, Subcommand};

use crate::cmd;

#[derive(Parser)]
#[command(
    name = "alloclens",
    version = env!("ALLOCLENS_VERSION"),
    about,
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a command under several allocators and compare time and memory of its whole process tree
    Run(Box<cmd::run::Args>),
    /// Find the allocator and settings that serve a command best (memory, time or throughput), with
    /// the evidence and the lines that deploy it
    Tune(Box<cmd::tune::Args>),
    /// Watch a program's memory for minutes to weeks and say why RSS grows: leak, fragmentation,
    /// retention, outside the heap or stable (undetermined, with how to measure it, when the
    /// figures cannot tell), with the allocator's own statistics
    Watch(cmd::watch::Args),
    /// A full-screen view of a program's memory as it runs: RSS, PSS, live and free bytes over
    /// time, the call sites holding the heap, the verdict so far; the same results as `watch`
    Live(cmd::live::Args),
    /// List the known allocators: installed or not, library, version, package to install
    Allocators(cmd::allocators::Args),
    /// Run a built-in workload that reproduces an allocation pattern from the field
    Workload(cmd::workload::Args),
    /// Run the built-in workloads under every installed allocator and print the summary
    Demo(cmd::demo::Args),
    /// Record every allocator call of a command (and its children) into a trace file
    Record(cmd::record::Args),
    /// Print the statistics of a trace: calls, live bytes, cumulated bytes, sizes, lifetimes, leaks
    Analyze(cmd::analyze::Args),
    /// Make a self-contained HTML report (and PNG/SVG figures) of a run's results or of a trace
    Report(cmd::report::Args),
    /// Compare two runs or two traces side by side: every headline figure and its change
    Diff(cmd::diff::Args),
    /// Replay a trace's allocator calls under several allocators: RSS against the bytes the program
    /// really held, fragmentation, retention, speed
    Replay(Box<cmd::replay::Args>),
    /// The replay process `replay` starts (internal)
    #[command(hide = true, name = "replay-driver")]
    ReplayDriver(cmd::replay::DriverArgs),
    /// Read the heap profile a program's agent keeps (`watch --profile`), live or after it died:
    /// in-use and allocated bytes by call site with their standard errors, and a pprof file
    Snapshot(cmd::snapshot::Args),
    /// Fail a CI job on memory: limits on RSS, PSS, allocations, memory not freed, growth per
    /// iteration and call sites, hard or relative to a baseline; text, Markdown, JUnit, annotations
    Gate(cmd::gate::Args),
    /// Export a trace: its raw events as Parquet (pandas, polars, DuckDB, Spark), its call sites as a pprof profile
    Export(cmd::export::Args),
    /// Merge results directories and traces of many hosts into one Parquet dataset for DuckDB or
    /// Spark (appendable; a file merged twice is skipped)
    Merge(cmd::merge::Args),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell)
    Completions(cmd::completions::Args),
    /// Print the manual page in roff, or write every command's page into a directory
    Man(cmd::man::Args),
}

pub fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| {
        use clap::error::ErrorKind;
        // --help and --version go to stdout: a failed write (`> /dev/full`) is an error, where
        // clap's own exit would ignore it.
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            let written = e
                .print()
                .and_then(|_| std::io::Write::flush(&mut std::io::stdout()));
            if let Err(err) = written {
                if err.kind() != std::io::ErrorKind::BrokenPipe {
                    eprintln!("alloclens: error: cannot write to standard output: {err}");
                    std::process::exit(1);
                }
            }
            std::process::exit(0);
        }
        e.exit()
    })
}
