//! alloclens: what a program's heap is really doing, and which allocator serves it best.
//!
//! `main` only parses the command line, dispatches, and turns an error into one line and an exit code.
mod cli;
mod cmd;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    match cmd::dispatch(cli.command) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            // One line: the error and its causes, outermost first.
            let chain: Vec<String> = err.chain().map(|c| c.to_string()).collect();
            eprintln!("alloclens: error: {}", chain.join(": "));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
