//! The background collector of a `live --pid` session: the watch engine (its samples, the agent
//! in the process, the profile tables) run by an alloclens process of its own, detached from the
//! terminal (a session of its own: a hang-up of the viewer's terminal does not reach it), its pid
//! in DIR/collector.pid and its output in DIR/collector.log. The viewer only reads the session's
//! directory and can stop the collector (SIGTERM, which ends its watch as Ctrl-C ends `watch`'s:
//! the agent's hooks put back, watch.json written). docs/live.md, "Collecting with no viewer".
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The collector's pid, written once its session is open, removed after its results are written.
pub const PID_FILE: &str = watch::COLLECTOR_PID;
/// The collector's standard output and error (its summary at the end).
pub const LOG_FILE: &str = watch::COLLECTOR_LOG;
/// The argument that makes `alloclens live` the collector; a pid file's process is taken for the
/// session's collector only when its command line has it.
pub const COLLECTOR_ARG: &str = "--collector";

/// A running collector of the session in `dir`.
pub struct Collector {
    pub dir: PathBuf,
    pub pid: u32,
    /// When this viewer started it: reaped here once it ends (not left a zombie while we run).
    child: Option<Child>,
}

#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    #[error("cannot start the background collector: {0}")]
    Spawn(std::io::Error),
    /// The collector refused to start: its own error line.
    #[error("{0}")]
    Refused(String),
}

impl Collector {
    /// The collector running for the session in `dir`, if one is.
    pub fn find(dir: &Path) -> Option<Collector> {
        let pid = read_pid(dir)?;
        is_collector(pid).then(|| Collector {
            dir: dir.to_path_buf(),
            pid,
            child: None,
        })
    }

    /// Starts `command` (`alloclens live --collector ...`) detached: a session of its own, stdin
    /// from /dev/null, its stderr a pipe until it is ready. The collector replaces its stdout and
    /// stderr by its log once its session is open and its pid file written, which closes the
    /// pipe: what it wrote before (warnings, or the error that made it stop) is returned.
    pub fn spawn(
        mut command: Command,
        dir: &Path,
    ) -> Result<(Collector, Vec<String>), CollectorError> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: setsid(2) is async-signal-safe; the child calls nothing else before exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(CollectorError::Spawn)?;
        let mut said = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut said);
        }
        let lines: Vec<String> = said.lines().map(str::to_string).collect();
        // Its pipe closed: either it is ready (its log in place) or it ended.
        let ready = (0..100).any(|_| {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return false;
            }
            if read_pid(dir) == Some(child.id()) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            false
        });
        if !ready {
            let _ = child.wait();
            let error = lines
                .iter()
                .rev()
                .find_map(|l| l.strip_prefix("alloclens: error: "))
                .map(str::to_string)
                .unwrap_or_else(|| {
                    format!(
                        "the background collector ended at its start ({})",
                        lines.join(" ")
                    )
                });
            return Err(CollectorError::Refused(error));
        }
        let pid = child.id();
        let warnings = lines
            .iter()
            .filter_map(|l| l.strip_prefix("alloclens: warning: "))
            .map(str::to_string)
            .collect();
        Ok((
            Collector {
                dir: dir.to_path_buf(),
                pid,
                child: Some(child),
            },
            warnings,
        ))
    }

    /// Whether it still collects: its pid file names it and it is alive (a collector killed
    /// outright leaves its pid file: the process is checked too).
    pub fn is_running(&mut self) -> bool {
        if let Some(child) = &mut self.child {
            if !matches!(child.try_wait(), Ok(None)) {
                return false;
            }
        }
        read_pid(&self.dir) == Some(self.pid) && is_collector(self.pid)
    }

    /// Whether it is gone: its results written (its pid file removed) and its process exited.
    pub fn has_ended(&mut self) -> bool {
        !self.is_running() && !procmem::is_alive(self.pid)
    }

    /// Asks it to end its watch (SIGTERM): it writes its results, then removes its pid file.
    pub fn stop(&self) -> std::io::Result<()> {
        // SAFETY: kill(2) on a pid that was checked to be this session's collector just before.
        if unsafe { libc::kill(self.pid as i32, libc::SIGTERM) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The last line of its log: why it ended, when it did without results.
    pub fn last_words(&self) -> String {
        std::fs::read_to_string(self.dir.join(LOG_FILE))
            .ok()
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }
}

fn read_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `pid` is alive and an alloclens collector (not a process that reused a dead one's pid).
fn is_collector(pid: u32) -> bool {
    if !procmem::is_alive(pid) {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
        cmd.split(|&b| b == 0)
            .any(|a| a == COLLECTOR_ARG.as_bytes())
    })
}
