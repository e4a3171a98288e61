//! One module per subcommand: clap arguments, conversion to typed options, glue to the libraries.
pub mod allocators;
pub mod analyze;
pub mod args;
pub mod demo;
pub mod diff;
pub mod export;
pub mod record;
pub mod report;
pub mod run;
pub mod workload;

use std::process::ExitCode;

use crate::cli::Command;

pub fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(args),
        Command::Allocators(args) => allocators::run(args),
        Command::Workload(args) => workload::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Record(args) => record::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Report(args) => report::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Export(args) => export::run(args),
    }
}
