//! `alloclens man`: manual pages in roff, generated from the clap definition so that they never
//! drift from the options.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use safe_output::write_whole;

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
            write_pages(command, dir).with_context(|| {
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

/// Every page, as clap_mangen::generate_to names them, each written whole (`write_whole`): a full
/// disk leaves no partial page, and a page already there stays whole until its new version
/// replaces it.
fn write_pages(command: clap::Command, dir: &Path) -> std::io::Result<()> {
    fn write(command: clap::Command, dir: &Path) -> std::io::Result<()> {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            write(sub.clone(), dir)?;
        }
        let man = clap_mangen::Man::new(command);
        write_whole(&dir.join(man.get_filename()), |out| man.render(out))
    }
    let mut command = command.disable_help_subcommand(true);
    command.build();
    write(command, dir)
}
