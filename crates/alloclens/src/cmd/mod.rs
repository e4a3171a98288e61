//! One module per subcommand: clap arguments, conversion to typed options, glue to the libraries.
pub mod allocators;
pub mod analyze;
pub mod args;
pub mod completions;
pub mod demo;
pub mod diff;
pub mod export;
pub mod gate;
mod ksm_library;
pub mod live;
mod live_collector;
pub mod man;
pub mod merge;
mod profile_diff;
pub mod progress;
pub mod record;
pub mod replay;
pub mod report;
mod results_observer;
pub mod run;
pub mod snapshot;
pub mod tune;
pub mod watch;
pub mod workload;

use std::path::Path;
use std::process::ExitCode;

use ::report::TraceData;

use crate::cli::Command;

/// The exit status of a session that writes a results directory (run, tune, replay): 130 when
/// Ctrl-C stopped it (what was gathered is kept), 1 when something failed or a file misses
/// something, 0 otherwise.
pub fn session_status(interrupted: bool, failed: bool) -> ExitCode {
    if interrupted {
        ExitCode::from(130)
    } else if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

pub fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    if let Command::ReplayDriver(args) = command {
        // With the allocator under test preloaded: nothing else may run first.
        return replay::driver(args);
    }
    give_back_ksm();
    match command {
        Command::Run(args) => run::run(*args),
        Command::Tune(args) => tune::run(*args),
        Command::Watch(args) => watch::run(args),
        Command::Live(args) => live::run(args),
        Command::Allocators(args) => allocators::run(args),
        Command::Workload(args) => workload::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Record(args) => record::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Report(args) => report::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Replay(args) => replay::run(*args),
        Command::ReplayDriver(args) => replay::driver(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Export(args) => export::run(args),
        Command::Gate(args) => gate::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
    }
}

/// A killed `run --ksm` (SIGKILL, a second Ctrl-C) left ksmd's previous settings in its state file:
/// every start gives them back (nothing to do, one stat, when the file is empty or absent).
fn give_back_ksm() {
    use procmem::ksm_control::{default_state_path, recover_leftover, KSM_SYSFS};
    match recover_leftover(Path::new(KSM_SYSFS), &default_state_path()) {
        Ok(values) => {
            for (k, v) in values {
                eprintln!(
                    "alloclens: note: gave back KSM setting {k}={v} left by a killed alloclens"
                );
            }
        }
        Err(e) => eprintln!("alloclens: warning: {e}"),
    }
}

/// Standard output, for what a command prints: a failed write (a full disk, `> /dev/full`) says it
/// was standard output, not a file of the command's. The error keeps its kind, so a reader that
/// went away (EPIPE) still ends alloclens quietly. Unlocked, so a workload may fork while printing;
/// whoever writes flushes before returning (a flush at exit would drop the error).
pub struct Stdout(std::io::Stdout);

pub fn stdout() -> Stdout {
    Stdout(std::io::stdout())
}

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(on_stdout)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(on_stdout)
    }
}

/// An error writing standard output, said as such.
pub fn on_stdout(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

/// Says on stderr what could not be read of a trace, one `alloclens: warning:` line per sentence (the
/// sentences of `trace::Losses`, which name the file): how every command that reads traces reports
/// damage, recorder notes and a missing trailer.
pub fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("alloclens: warning: {w}");
    }
}

/// Refuses a `--debug-dir` that is no directory: a mistyped one would only leave functions
/// unresolved, without a word.
pub fn check_debug_dirs(dirs: &[std::path::PathBuf]) -> anyhow::Result<()> {
    for dir in dirs {
        if !dir.is_dir() {
            let what = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            anyhow::bail!(
                "--debug-dir '{}' {what}: give a directory of separate debug files (DIR/.build-id/xx/yyyy.debug, or by debuglink)",
                dir.display()
            );
        }
    }
    Ok(())
}

/// Refuses a `watch` directory where a run or a trace is expected, naming the command that reads
/// it: `what` says what the refusing command takes ("diff compares runs or traces").
pub fn refuse_watch_dir(path: &Path, what: &str) -> anyhow::Result<()> {
    if ::watch::WatchDir::is_watch_dir(path) {
        anyhow::bail!(
            "'{}' is a watch directory: {what}; its page is `alloclens report {}`",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

/// Analyses the trace at `path` for a report or a diff, saying what could not be read.
pub fn load_trace(path: &Path) -> anyhow::Result<TraceData> {
    let data = {
        let bar = progress::RecordsBar::new(&format!("analysing {}", path.display()));
        TraceData::load_with(path, &bar)?
    };
    warn(&data.file.analysis.warnings);
    Ok(data)
}
