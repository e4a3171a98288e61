//! `alloclens record` as two processes, so that the command keeps its exit status when the
//! recorder dies (killed, out of memory, a bug): a small supervisor, which the user started, and
//! the recorder, its child, which starts the command as before. The supervisor only waits. When
//! the recorder ends normally it exits as the recorder did (the recorder mirrors the command's
//! status). When the recorder dies, the command runs on untraced (the shim stops tracing once the
//! recorder's socket is gone) and becomes the supervisor's child (`PR_SET_CHILD_SUBREAPER`): the
//! supervisor waits for it and ends with its status, instead of handing the terminal back while
//! the command still runs.
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;

/// Which process this is after `split`.
pub enum Side {
    /// The child: record as usual, with `RecordOptions::announce_pid` set to this pipe.
    Recorder(Arc<File>),
    /// The parent, once the recorder has ended.
    Supervisor(Outcome),
}

pub enum Outcome {
    /// The recorder exited with this code (the command's, as it mirrors it).
    Exited(i32),
    /// The recorder died by `signal`. `command` is the command's status, waited for here, or
    /// `None` when it had not started or had already been waited for by the recorder.
    RecorderDied {
        signal: i32,
        command: Option<ExitStatus>,
    },
}

/// Splits the process in two. Call it before any thread starts: the child goes on from a copy
/// of this single thread.
pub fn split() -> std::io::Result<Side> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (announced, announce) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Orphans below this process (the command, once the recorder is gone) become its children.
    // Not inherited by the recorder. Refused on old kernels: then only the fallback is lost.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // SAFETY: the caller guarantees a single thread, so the child's copy is consistent.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            drop(announced);
            Ok(Side::Recorder(Arc::new(File::from(announce))))
        }
        recorder => {
            drop(announce);
            Ok(Side::Supervisor(supervise(recorder, announced)))
        }
    }
}

fn supervise(recorder: libc::pid_t, announced: OwnedFd) -> Outcome {
    let Some(status) = wait_for(recorder) else {
        return Outcome::Exited(2);
    };
    let status = ExitStatus::from_raw(status);
    if let Some(code) = status.code() {
        return Outcome::Exited(code);
    }
    // The recorder is gone, and with it the pipe's last writer: this read ends.
    let mut text = String::new();
    let _ = File::from(announced).read_to_string(&mut text);
    let command = text
        .trim()
        .parse::<libc::pid_t>()
        .ok()
        .and_then(wait_for)
        .map(ExitStatus::from_raw);
    Outcome::RecorderDied {
        signal: status.signal().unwrap_or(0),
        command,
    }
}

/// The raw wait status of child `pid`, or `None` when it is not (or no longer) ours to wait for.
fn wait_for(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status it is given.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}
