//! The shell commands around the measured runs (hyperfine's --prepare and --cleanup): run with
//! `sh -c`, the run's parameters substituted and `--env` set, output discarded but for the end of
//! stderr, which a failure quotes. Each runs in a process group of its own, stopped (SIGTERM, then
//! SIGKILL) when alloclens is interrupted or when it outlasts --timeout, as a run is.
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::plan::{materialize, substitute, RunPlan, RunSpec};

/// How a shell command around the runs went wrong.
#[derive(Debug)]
pub(crate) enum ShellError {
    /// It failed, could not start, or outlasted --timeout (then stopped): the message.
    Failed(String),
    /// alloclens was interrupted (Ctrl-C, SIGTERM) while it ran: it was stopped; the message.
    Interrupted(String),
}

/// After SIGTERM, how long the command's group has before SIGKILL (as a run's tree).
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How often the command is looked at while it runs (the interrupt flag, the timeout).
const POLL: Duration = Duration::from_millis(20);

/// Runs `command` for the run `spec`; Err says how it failed, naming `option`.
pub(crate) fn run_shell(
    option: &str,
    command: &str,
    plan: &RunPlan,
    spec: &RunSpec,
    interrupted: &AtomicBool,
) -> Result<(), ShellError> {
    let text = substitute(command, &spec.assignment);
    let (_, env) = materialize(plan, spec);
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg(&text)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setpgid and prctl are async-signal-safe and touch no memory of the parent.
    unsafe {
        shell.pre_exec(|| {
            // A group of its own, so stopping it stops what it started too; SIGKILL when the
            // thread that waits for it (alloclens's) ends.
            if libc::setpgid(0, 0) != 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = shell
        .spawn()
        .map_err(|e| ShellError::Failed(format!("{option} `{text}` could not be started: {e}")))?;
    let group = child.id() as libc::pid_t;
    let mut stderr_pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    let mut stop: Option<(Instant, bool)> = None; // (SIGTERM sent at, SIGKILL sent)
    let mut stopped_for: Option<bool> = None; // Some(true): interrupted, Some(false): timeout
    let status: ExitStatus = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return Err(ShellError::Failed(format!(
                    "{option} `{text}` could not be waited for: {e}"
                )))
            }
        }
        let now = Instant::now();
        if stop.is_none() {
            let timed_out = plan.timeout.is_some_and(|t| now - started >= t);
            if timed_out || interrupted.load(Ordering::Relaxed) {
                stopped_for = Some(!timed_out);
                stop = Some((now, false));
                // SAFETY: a signal to the group this function started.
                unsafe { libc::kill(-group, libc::SIGTERM) };
            }
        } else if let Some((at, false)) = stop {
            if now - at >= STOP_GRACE {
                // SAFETY: as above.
                unsafe { libc::kill(-group, libc::SIGKILL) };
                stop = Some((at, true));
            }
        }
        std::thread::sleep(POLL);
    };
    // What the group left behind does not outlive it (nor hold the stderr pipe).
    if stop.is_some() {
        // SAFETY: as above; ESRCH when the group is gone.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    let stderr = reader.join().unwrap_or_default();
    match stopped_for {
        Some(true) => {
            return Err(ShellError::Interrupted(format!(
                "{option} `{text}` was stopped: alloclens was interrupted while it ran"
            )))
        }
        Some(false) => {
            return Err(ShellError::Failed(format!(
                "{option} `{text}` was stopped after --timeout {}",
                humantime_secs(plan.timeout.unwrap_or_default())
            )))
        }
        None => {}
    }
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr,
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    let status = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exited with {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "was killed by a signal".to_string(),
    };
    Err(ShellError::Failed(match last {
        Some(line) => format!("{option} `{text}` {status}: {}", line.trim()),
        None => format!("{option} `{text}` {status}"),
    }))
}

/// A --timeout as given back in messages: "2s", "1.5s".
fn humantime_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{s}s")
    }
}
