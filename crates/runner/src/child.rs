//! Starting the measured command and stopping its whole tree.
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How a run's process ended, as wait4 reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitStatus {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    fn from_wait_status(status: libc::c_int) -> ExitStatus {
        if libc::WIFEXITED(status) {
            ExitStatus {
                code: Some(libc::WEXITSTATUS(status)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(status) {
            ExitStatus {
                code: None,
                signal: Some(libc::WTERMSIG(status)),
            }
        } else {
            ExitStatus {
                code: None,
                signal: None,
            }
        }
    }
}

/// CPU time consumed by a reaped process and the descendants it waited for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub user: Duration,
    pub sys: Duration,
}

impl CpuTimes {
    pub fn add(&mut self, other: CpuTimes) {
        self.user += other.user;
        self.sys += other.sys;
    }

    fn from_rusage(ru: &libc::rusage) -> CpuTimes {
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        CpuTimes {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
        }
    }
}

pub struct Started {
    pub child: Child,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub started_at: Instant,
}

/// Starts `command` in a process group of its own (so the whole group can be stopped), with stdin
/// closed and stdout/stderr piped to us for markers and pass-through.
pub fn spawn(command: &[String], env: &[(OsString, OsString)]) -> io::Result<Started> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::other("empty command"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setpgid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started_at = Instant::now();
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    Ok(Started {
        child,
        stdout,
        stderr,
        started_at,
    })
}

/// Blocks until `pid` (one of our children) ends; returns its status and CPU times.
pub fn wait(pid: u32) -> io::Result<(ExitStatus, CpuTimes)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, fully written by wait4 on success.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to local variables.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r == pid as libc::pid_t {
            return Ok((
                ExitStatus::from_wait_status(status),
                CpuTimes::from_rusage(&ru),
            ));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reaps `pid` if it is a child of ours that has ended (an orphan reparented to us as subreaper).
pub fn try_reap(pid: u32) -> Option<CpuTimes> {
    let mut status: libc::c_int = 0;
    // SAFETY: as in `wait`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
    (r == pid as libc::pid_t).then(|| CpuTimes::from_rusage(&ru))
}

/// Sends `signal` to the process group and to each pid (members may have left the group with setsid).
pub fn signal_tree(pgid: u32, pids: &[u32], signal: Signal) {
    let _ = kill(Pid::from_raw(-(pgid as i32)), signal);
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
}

/// True while `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}
