//! `alloclens man`: manual pages in roff, generated from the clap definition so that they never
//! drift from the options.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

#[derive(clap::Args)]
pub struct Args {
    /// Write every page into DIR (alloclens.1, alloclens-run.1, ... one per command and workload)
    /// instead of printing alloclens.1 on stdout. Read one with `man -l DIR/alloclens-run.1`
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let command = crate::cli::Cli::command();
    match &args.output {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the directory '{}'", dir.display()))?;
            clap_mangen::generate_to(command, dir).with_context(|| {
                format!("cannot write the manual pages into '{}'", dir.display())
            })?;
        }
        None => {
            let mut out = super::stdout();
            clap_mangen::Man::new(command).render(&mut out)?;
            std::io::Write::flush(&mut out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
