//! `alloclens completions SHELL`: the shell's completion script, generated from the clap definition
//! so that it never drifts from the options.
use std::process::ExitCode;

use clap::CommandFactory;

#[derive(clap::Args)]
pub struct Args {
    /// The shell to complete in. Install the script where the shell looks, e.g.
    /// bash: ~/.local/share/bash-completion/completions/alloclens; zsh: a file _alloclens in a
    /// directory of $fpath; fish: ~/.config/fish/completions/alloclens.fish
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = crate::cli::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "alloclens", &mut out);
    // Written in one go, so that a closed stdout is an error main recognises (generate panics).
    let mut stdout = super::stdout();
    std::io::Write::write_all(&mut stdout, &out)?;
    std::io::Write::flush(&mut stdout)?;
    Ok(ExitCode::SUCCESS)
}
