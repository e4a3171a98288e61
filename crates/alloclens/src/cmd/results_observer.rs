//! What `run` and `tune` do with each line a measured program prints (`--program-output`): passed
//! to the terminal around the progress bar, saved in the results directory's output/, or dropped.
use std::io::Write;

use indicatif::ProgressBar;
use runner::results_dir::ResultsDir;
use runner::{OutputStream, RunSpec};

use super::run::ProgramOutput;

/// Handles one `line` of run `spec`; for a line passed to the terminal, returns whether it was
/// left open (no newline at its end), so the caller can end it before printing its own lines.
pub fn program_output(
    dir: &mut ResultsDir,
    mode: ProgramOutput,
    bar: &ProgressBar,
    spec: &RunSpec,
    stream: OutputStream,
    line: &[u8],
) -> Option<bool> {
    match mode {
        ProgramOutput::Pass => {
            bar.suspend(|| {
                let _ = match stream {
                    OutputStream::Stdout => std::io::stdout().write_all(line),
                    OutputStream::Stderr => std::io::stderr().write_all(line),
                };
            });
            Some(!line.ends_with(b"\n"))
        }
        ProgramOutput::Save => {
            dir.write_output(spec, line);
            None
        }
        ProgramOutput::Discard => None,
    }
}
