//! `alloclens record` as two processes, so that the command is not affected when the recorder
//! dies (killed, out of memory, a bug): a small supervisor, which the user started, and the
//! recorder, its child, which starts the command as before. The supervisor only waits. When the
//! recorder ends normally it exits as the recorder did (the recorder mirrors the command's
//! status). When the recorder dies, the command runs on untraced (the shim stops tracing once the
//! recorder's socket is gone) and becomes the supervisor's child (`PR_SET_CHILD_SUBREAPER`): the
//! supervisor forwards the command's output where the recorder read it (`--marker`), waits for
//! it and ends with its status, instead of handing the terminal back while the command runs on.
//!
//! Clean-up: the recorder tells the supervisor what it made, so that its death leaves nothing
//! behind: the socket directory is removed, and the trace file is committed (renamed over the
//! target with `--force`) when the command ran, removed when it never started (`output`).
//!
//! Signals: SIGTERM and SIGHUP (a batch system's time limit, `kill`, a closed terminal) are
//! passed on, by the supervisor to the recorder and by the recorder to the command, instead of
//! ending `alloclens` at once; SIGINT and SIGQUIT, which the terminal sends the whole group, are
//! left to the command. Either way the command decides, and the recording ends, complete, when
//! it does.
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::Arc;

use crate::sys::{self, Received};
use crate::TraceFile;

/// Where the supervisor passes termination signals on: the recorder, then (once the recorder is
/// gone) the command. 0: nowhere yet.
static FORWARD_TO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Termination requests a wrapper passes on rather than dies of (as tini and init systems do):
/// the command decides, and the recording ends when it does.
const FORWARDED: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGHUP];

extern "C" fn forward(signal: libc::c_int) {
    let pid = FORWARD_TO.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 {
        sys::kill(pid, signal);
    }
}

/// Termination signals the recorder received, for its loop to pass on to the command
/// (`take_pending_signal`); 0: none.
static PENDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn remember(signal: libc::c_int) {
    PENDING.store(signal, std::sync::atomic::Ordering::Relaxed);
}

/// Ctrl-C and Ctrl-\ reach the whole foreground group: the command decides what to do with
/// them, and both processes go on until it ends.
const IGNORED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];

extern "C" fn ignore(_: libc::c_int) {}

/// Installs `handler` for `signals`. A handler, unlike SIG_IGN, is reset by exec: the command
/// starts with the default dispositions.
fn handle(signals: &[libc::c_int], handler: extern "C" fn(libc::c_int)) {
    for &signal in signals {
        sys::install_handler(signal, handler);
    }
}

/// `record --pid`: Ctrl-C, Ctrl-\, SIGTERM and SIGHUP end the recording (the attached process,
/// not our child, runs on); `take_pending_signal` tells the loop.
pub fn catch_termination() {
    handle(
        &[libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP],
        remember,
    );
}

/// A termination signal the recorder received since the last call, to pass on to the command.
pub fn take_pending_signal() -> Option<libc::c_int> {
    match PENDING.swap(0, std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// Which process this is after `split`.
pub enum Side {
    /// The child: record as usual, with `RecordOptions::supervisor` set to this link.
    Recorder(Link),
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
        /// Where the trace is, and why, when it could not take the target's name (`--force`).
        rename_error: Option<String>,
    },
}

/// The recorder's end of its socket to the supervisor.
#[derive(Debug, Clone)]
pub struct Link(Arc<OwnedFd>);

/// Message tags: the socket directory and the trace file (`TraceFile::to_bytes`), the command's
/// pid, then (with `--marker`) the read ends of its output pipes.
const SOCKET_DIR: u8 = b'd';
const TRACE_FILE: u8 = b'f';
const PID: u8 = b'p';
const STDOUT: u8 = b'o';
const STDERR: u8 = b'e';

/// Room for the longest message: two paths.
const MAX_MESSAGE: usize = 2 * libc::PATH_MAX as usize + 2;

impl Link {
    /// Tells the supervisor the socket directory, to remove should the recorder die.
    pub fn socket_dir(&self, dir: &std::path::Path) {
        use std::os::unix::ffi::OsStrExt;
        let mut msg = vec![SOCKET_DIR];
        msg.extend_from_slice(dir.as_os_str().as_bytes());
        let _ = sys::send_message(&self.0, &msg, None);
    }

    /// Tells the supervisor the trace file, to commit or discard should the recorder die.
    pub fn trace_file(&self, file: &TraceFile) {
        let mut msg = vec![TRACE_FILE];
        msg.extend_from_slice(&file.to_bytes());
        let _ = sys::send_message(&self.0, &msg, None);
    }

    /// Tells the supervisor the command's pid, and hands it a copy of the command's output pipes
    /// when the recorder reads them. A supervisor that does not get them only loses the fallback:
    /// not worth failing the recording for.
    pub fn announce(&self, child: &Child) {
        let mut pid = vec![PID];
        pid.extend_from_slice(child.id().to_string().as_bytes());
        let _ = sys::send_message(&self.0, &pid, None);
        if let Some(out) = &child.stdout {
            let _ = sys::send_message(&self.0, &[STDOUT], Some(out.as_raw_fd()));
        }
        if let Some(err) = &child.stderr {
            let _ = sys::send_message(&self.0, &[STDERR], Some(err.as_raw_fd()));
        }
    }
}

/// Splits the process in two.
///
/// # Safety
/// No other thread may exist yet: the child goes on from a copy of this single thread, and a
/// lock another thread held at the fork would stay locked there forever.
pub unsafe fn split() -> std::io::Result<Side> {
    let (ours, theirs) = sys::seqpacket_pair()?;
    // Orphans below this process (the command, once the recorder is gone) become its children.
    // Not inherited by the recorder. Refused on old kernels: then only the fallback is lost.
    sys::become_child_subreaper();
    handle(&IGNORED, ignore);
    // SAFETY: the caller guarantees a single thread (this function's condition).
    match unsafe { sys::fork() }? {
        None => {
            drop(ours);
            handle(&FORWARDED, remember);
            // Past the file size limit (`ulimit -f`) a write fails with EFBIG, which the writer
            // handles as it does a full disk, instead of SIGXFSZ killing the recorder.
            handle(&[libc::SIGXFSZ], ignore);
            Ok(Side::Recorder(Link(Arc::new(theirs))))
        }
        Some(recorder) => {
            drop(theirs);
            FORWARD_TO.store(recorder, std::sync::atomic::Ordering::Relaxed);
            handle(&FORWARDED, forward);
            Ok(Side::Supervisor(supervise(recorder, ours)))
        }
    }
}

fn supervise(recorder: libc::pid_t, link: OwnedFd) -> Outcome {
    let Some(status) = sys::wait_for(recorder) else {
        return Outcome::Exited(2);
    };
    let status = ExitStatus::from_raw(status);
    if let Some(code) = status.code() {
        return Outcome::Exited(code);
    }
    // What the recorder sent before it died is still in the socket.
    let (mut pid, mut stdout, mut stderr) = (None, None, None);
    let (mut socket_dir, mut trace) = (None, None);
    let mut buf = vec![0u8; MAX_MESSAGE];
    while let Ok(Received::Message { len, fd }) = sys::recv_message(&link, &mut buf) {
        match (buf.first(), fd) {
            (Some(&SOCKET_DIR), _) => {
                use std::os::unix::ffi::OsStrExt;
                socket_dir = Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
                    &buf[1..len],
                )));
            }
            (Some(&TRACE_FILE), _) => trace = TraceFile::from_bytes(&buf[1..len]),
            (Some(&PID), _) => {
                pid = std::str::from_utf8(&buf[1..len])
                    .ok()
                    .and_then(|p| p.parse::<libc::pid_t>().ok());
            }
            (Some(&STDOUT), Some(fd)) => stdout = Some(fd),
            (Some(&STDERR), Some(fd)) => stderr = Some(fd),
            _ => {}
        }
    }
    FORWARD_TO.store(pid.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    if let Some(dir) = socket_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    // The trace takes its name now, before the command ends: what it holds will not change.
    let rename_error = match (&trace, pid) {
        (Some(trace), Some(_)) => trace.commit().err().and_then(|e| {
            // Already renamed by the recorder, just before it died.
            trace.written().exists().then(|| {
                format!(
                    "'{}' (renaming it to '{}' failed: {e})",
                    trace.written().display(),
                    trace.target().display()
                )
            })
        }),
        (Some(trace), None) => {
            trace.discard();
            None
        }
        (None, _) => None,
    };
    forward_until_closed(stdout, stderr);
    Outcome::RecorderDied {
        signal: status.signal().unwrap_or(0),
        command: pid.and_then(sys::wait_for).map(ExitStatus::from_raw),
        rename_error,
    }
}

/// Copies what the command still writes into the pipes the recorder read (lines the recorder
/// had read but not yet passed on are lost) to our stdout and stderr, until the command and its
/// descendants have closed them.
fn forward_until_closed(stdout: Option<OwnedFd>, stderr: Option<OwnedFd>) {
    let mut pipes: Vec<(std::fs::File, bool)> = Vec::new();
    pipes.extend(stdout.map(|fd| (std::fs::File::from(fd), true)));
    pipes.extend(stderr.map(|fd| (std::fs::File::from(fd), false)));
    let mut buf = vec![0u8; 1 << 16];
    while !pipes.is_empty() {
        let fds: Vec<_> = pipes.iter().map(|(f, _)| f.as_raw_fd()).collect();
        let ready = match sys::poll(&fds, -1) {
            Ok(ready) => ready,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        // Backwards, so that removing a closed pipe leaves the indices still to visit in place.
        for i in (0..ready.len()).rev().filter(|&i| ready[i]) {
            let (file, is_stdout) = &mut pipes[i];
            match file.read(&mut buf) {
                Ok(0) | Err(_) => {
                    pipes.remove(i);
                }
                Ok(n) if *is_stdout => {
                    let _ = std::io::stdout().write_all(&buf[..n]);
                }
                Ok(n) => {
                    let _ = std::io::stderr().write_all(&buf[..n]);
                }
            }
        }
    }
}
