//! Starting the measured command and stopping its whole tree.
use std::ffi::OsString;
use std::io;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How a run's process ended, as wait4 reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CommandExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl CommandExit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    fn from_wait_status(status: libc::c_int) -> CommandExit {
        if libc::WIFEXITED(status) {
            CommandExit {
                code: Some(libc::WEXITSTATUS(status)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(status) {
            CommandExit {
                code: None,
                signal: Some(libc::WTERMSIG(status)),
            }
        } else {
            CommandExit {
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
    /// The command's stdout: a pipe, or the master side of its pseudo-terminal.
    pub stdout: Box<dyn Read + Send>,
    pub stderr: ChildStderr,
    pub started_at: Instant,
    /// The same moment on the system clock (ns since the Unix epoch), to line a run up with other
    /// samplers' records (results.json `runs[].start_unix_ns`).
    pub started_unix_ns: u64,
    /// The forked child's own RSS high-water mark just before its exec, in bytes: a copy of
    /// alloclens's pages that the kernel keeps in the command's `ru_maxrss` (see [`Reaped`]).
    pub fork_peak_rss: Option<u64>,
}

/// Starts `command` in a process group of its own (so the whole group can be stopped), with stdin
/// /dev/null (ours with `pass_stdin`) and stdout/stderr piped to us for markers and pass-through. With `stdout_pty`, stdout is a
/// pseudo-terminal instead of a pipe: C stdio and Python then flush each line as it is written (they
/// buffer whole blocks into a pipe), so marker lines arrive when they happen. With `ksm_prctl`, the
/// command's tree is made KSM-mergeable by prctl(PR_SET_MEMORY_MERGE).
pub fn spawn(
    command: &[String],
    env: &[(OsString, OsString)],
    stdout_pty: bool,
    pass_stdin: bool,
    ksm_prctl: bool,
) -> io::Result<Started> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::other("empty command"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(if pass_stdin {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let pty_master = if stdout_pty {
        let (master, slave) = open_raw_pty()?;
        cmd.stdout(Stdio::from(slave));
        Some(master)
    } else {
        None
    };
    let parent = std::process::id() as libc::pid_t;
    // Non-blocking: the parent reads what the child wrote before its exec, never waits for more.
    let (fork_rss_read, fork_rss_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
            .map_err(io::Error::from)?;
    let fork_rss_fd = fork_rss_write.as_raw_fd();
    // SAFETY: setpgid, prctl, getppid, getrusage and write are async-signal-safe and touch no
    // memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // SIGKILL when alloclens dies. It fires when the forking *thread* ends: the caller's
            // thread waits for the command (run_one), so it outlives it. The watchdog covers the
            // command's own children, and this command too if its exec clears the signal (setuid).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // alloclens already ended (no allocation here: this is after fork).
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Every anonymous mapping of this process and of what it forks or execs becomes
            // mergeable (Linux >= 6.6; EINVAL before 6.4, cleared at exec by 6.4 and 6.5). The CLI
            // checks support first, so a failure here is reported as the run not starting.
            if ksm_prctl && libc::prctl(libc::PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Last, so that little is touched between this reading and the exec.
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut ru) == 0 {
                let kib = ru.ru_maxrss.to_ne_bytes();
                libc::write(fork_rss_fd, kib.as_ptr().cast(), kib.len());
            }
            Ok(())
        });
    }
    let started_at = Instant::now();
    let started_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut child = cmd.spawn()?;
    drop(fork_rss_write);
    let fork_peak_rss = read_fork_peak_rss(fork_rss_read);
    // The parent's copy of the pty slave went with `cmd`'s Stdio: only the tree holds it now, so
    // reading the master ends (EIO) when the last of them exits.
    drop(cmd);
    let stdout: Box<dyn Read + Send> = match pty_master {
        Some(master) => Box::new(std::fs::File::from(master)),
        None => Box::new(child.stdout.take().expect("piped stdout")),
    };
    let stderr = child.stderr.take().expect("piped stderr");
    Ok(Started {
        child,
        stdout,
        stderr,
        started_at,
        started_unix_ns,
        fork_peak_rss,
    })
}

/// What the child wrote before its exec: its `ru_maxrss` (KiB), in bytes.
fn read_fork_peak_rss(pipe: OwnedFd) -> Option<u64> {
    let mut kib = [0u8; std::mem::size_of::<libc::c_long>()];
    std::fs::File::from(pipe).read_exact(&mut kib).ok()?;
    u64::try_from(libc::c_long::from_ne_bytes(kib))
        .ok()
        .map(|k| k * 1024)
}

/// Whether a process made mergeable by prctl(PR_SET_MEMORY_MERGE) before exec stays mergeable after
/// it: Linux 6.4 and 6.5 clear the flag at exec (fixed in 6.6 by "mm/ksm: support fork/exec for
/// prctl"). Probed for real: `cat /proc/self/smaps` started that way must see its own mappings
/// flagged `mg` (mergeable). False when the prctl or the probe fails.
pub fn prctl_merge_kept_across_exec() -> bool {
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/self/smaps")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().is_ok_and(|out| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with("VmFlags:") && l.split_whitespace().any(|f| f == "mg"))
    })
}

/// A pseudo-terminal pair whose output is passed through untouched (no "\n" -> "\r\n", no echo).
fn open_raw_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::termios::{self, LocalFlags, OutputFlags, SetArg};
    let pty = nix::pty::openpty(None, None).map_err(io::Error::from)?;
    let mut attrs = termios::tcgetattr(&pty.slave).map_err(io::Error::from)?;
    attrs.output_flags.remove(OutputFlags::OPOST);
    attrs.local_flags.remove(LocalFlags::ECHO);
    termios::tcsetattr(&pty.slave, SetArg::TCSANOW, &attrs).map_err(io::Error::from)?;
    Ok((pty.master, pty.slave))
}

/// What wait4 reports of a reaped process together with the descendants it waited for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reaped {
    pub cpu: CpuTimes,
    /// `ru_maxrss` in bytes: the largest peak RSS among the process and the descendants it waited
    /// for (the kernel's high-water marks, counted in KiB), images before an exec included.
    pub max_rss: u64,
}

impl Reaped {
    fn from_rusage(ru: &libc::rusage) -> Reaped {
        Reaped {
            cpu: CpuTimes::from_rusage(ru),
            max_rss: (ru.ru_maxrss.max(0) as u64) * 1024,
        }
    }
}

/// How far above the forked child's pre-exec high-water mark `ru_maxrss` must be to be the command's
/// own: the child faults in a few hundred KiB between that reading and its exec (~350 KiB measured),
/// and the kernel's per-CPU RSS counters are read approximately.
const FORK_COPY_MARGIN: u64 = 1 << 20;

/// The command's peak RSS from the kernel, when the kernel's figure speaks for it. `ru_maxrss` keeps
/// the high-water mark of the image before the exec too, i.e. of the child's copy of alloclens's own
/// pages (`fork_copy`, a few MiB); a figure not clearly above that copy may be the copy's, and is
/// not given. Above it, it is exact: the largest peak of the command's processes.
pub fn command_peak_rss(max_rss: u64, fork_copy: Option<u64>) -> Option<u64> {
    let copy = fork_copy?;
    (max_rss > copy + FORK_COPY_MARGIN).then_some(max_rss)
}

/// Blocks until `pid` (one of our children) ends; returns its status and resource use.
pub fn wait(pid: u32) -> io::Result<(CommandExit, Reaped)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, fully written by wait4 on success.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to local variables.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r == pid as libc::pid_t {
            return Ok((
                CommandExit::from_wait_status(status),
                Reaped::from_rusage(&ru),
            ));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reaps `pid` if it is a child of ours that has ended (an orphan reparented to us as subreaper).
pub fn try_reap(pid: u32) -> Option<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: as in `wait`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut ru) };
    (r == pid as libc::pid_t).then(|| Reaped::from_rusage(&ru))
}

/// Sends `signal` to the process group and to each pid (members may have left the group with setsid).
pub fn signal_tree(pgid: u32, pids: &[u32], signal: Signal) {
    let _ = kill(Pid::from_raw(-(pgid as i32)), signal);
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid as i32), signal);
    }
}
