//! alloclens: what a program's heap is really doing, and which allocator serves it best.
//!
//! `main` only parses the command line, dispatches, and turns an error into one line and an exit code.
mod cli;
mod cmd;

use std::process::ExitCode;

fn main() -> ExitCode {
    // The replay process (`alloclens replay` starts it with the allocator under test preloaded):
    // straight to the driver, with no tunable set and nearly nothing allocated before it.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "replay-driver")
    {
        let args: Vec<String> = std::env::args().skip(2).collect();
        return ExitCode::from(replay::driver_main(&args) as u8);
    }
    // Under an address-space limit (`ulimit -v`, common on batch systems) each of glibc's
    // per-thread arenas reserves 64 MiB of it; with one arena that space is left to the buffers
    // that follow the input (analysing the python3 trace of bench/: 300 MiB were enough with
    // one arena, 400 MiB were not with the default ones).
    if blockmap::huge_pages::address_space_limit().is_some() {
        // SAFETY: mallopt only sets a tunable of the C allocator.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    }
    // SIGPIPE stays ignored (Rust's default): a closed stdout must not kill `record` or `run`
    // while they still write a trace or results; the write fails with EPIPE instead, which ends
    // alloclens quietly (is_broken_pipe). Commands started by alloclens get SIGPIPE's default.
    let cli = cli::parse();
    match cmd::dispatch(cli.command) {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("alloclens: error: {}", one_line(&err));
            // 1 for a failure; 2 is left to clap's usage errors (docs/cli.md, "Exit status").
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, outermost first, on one line. A cause that its parent's message already
/// quotes (typed errors often include their source) is not repeated.
fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

/// Whether writing to stdout failed because its reader went away (`alloclens ... | head`): the
/// reader has what it wanted, so this is not an error. Rust ignores SIGPIPE, so the write returns
/// EPIPE, directly or inside serde_json's error.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
