//! The shell commands around the measured runs (hyperfine's --prepare and --cleanup): run with
//! `sh -c`, the run's parameters substituted and `--env` set, output discarded but for the end of
//! stderr, which a failure quotes.
use std::process::{Command, Stdio};

use crate::plan::{materialize, substitute, RunPlan, RunSpec};

/// Runs `command` for the run `spec`; Err says how it failed, naming `option`.
pub(crate) fn run_shell(
    option: &str,
    command: &str,
    plan: &RunPlan,
    spec: &RunSpec,
) -> Result<(), String> {
    let text = substitute(command, &spec.assignment);
    let (_, env) = materialize(plan, spec);
    let output = Command::new("sh")
        .arg("-c")
        .arg(&text)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{option} `{text}` could not be started: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    let status = match output.status.code() {
        Some(code) => format!("exited with {code}"),
        None => "was killed by a signal".to_string(),
    };
    Err(match last {
        Some(line) => format!("{option} `{text}` {status}: {}", line.trim()),
        None => format!("{option} `{text}` {status}"),
    })
}
