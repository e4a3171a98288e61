//! fork without exec for the multi-process workloads: start a child that runs a closure and `_exit`s,
//! collect each process's report through a pipe, reap the children.
//!
//! The callers are single-threaded when they fork (the CLI runs workloads on its main thread), so the
//! child may run ordinary code, malloc included.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use crate::output::line;
use crate::{WorkloadError, WorkloadProcess};

/// One report on the pipe: index u32, pid u32, ops u64, allocator_calls u64, checksum u64, native
/// endian (same machine). 32 bytes < PIPE_BUF, so each report arrives whole.
const RECORD: usize = 32;

/// The pipe every process of a workload writes its report to.
pub(crate) struct ReportPipe {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl ReportPipe {
    pub fn new() -> Result<Self, WorkloadError> {
        let (read, write) = nix::unistd::pipe().map_err(|source| WorkloadError::Sys {
            what: "pipe(2) for the workers' reports",
            source,
        })?;
        Ok(Self {
            read,
            write: Some(write),
        })
    }

    /// Sends one report (from whichever process holds the write end).
    pub fn send(&self, report: &WorkloadProcess) -> Result<(), WorkloadError> {
        let mut buf = [0u8; RECORD];
        buf[0..4].copy_from_slice(&report.index.to_ne_bytes());
        buf[4..8].copy_from_slice(&report.pid.to_ne_bytes());
        buf[8..16].copy_from_slice(&report.ops.to_ne_bytes());
        buf[16..24].copy_from_slice(&report.allocator_calls.to_ne_bytes());
        buf[24..32].copy_from_slice(&report.checksum.to_ne_bytes());
        let Some(fd) = &self.write else {
            return Err(WorkloadError::Sys {
                what: "report after the pipe was closed",
                source: Errno::EBADF,
            });
        };
        let n = nix::unistd::write(fd.as_fd(), &buf).map_err(|source| WorkloadError::Sys {
            what: "write(2) of a worker report",
            source,
        })?;
        if n == RECORD {
            Ok(())
        } else {
            Err(WorkloadError::Sys {
                what: "short write(2) of a worker report",
                source: Errno::EIO,
            })
        }
    }

    /// Closes this process's write end and reads every report until all other writers have exited.
    pub fn collect(mut self) -> Result<Vec<WorkloadProcess>, WorkloadError> {
        drop(self.write.take());
        let mut bytes = Vec::new();
        std::fs::File::from(self.read)
            .read_to_end(&mut bytes)
            .map_err(|e| WorkloadError::Sys {
                what: "read(2) of the workers' reports",
                source: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            })?;
        Ok(bytes
            .chunks_exact(RECORD)
            .map(|r| WorkloadProcess {
                index: u32::from_ne_bytes(r[0..4].try_into().unwrap_or_default()),
                pid: u32::from_ne_bytes(r[4..8].try_into().unwrap_or_default()),
                ops: u64::from_ne_bytes(r[8..16].try_into().unwrap_or_default()),
                allocator_calls: u64::from_ne_bytes(r[16..24].try_into().unwrap_or_default()),
                checksum: u64::from_ne_bytes(r[24..32].try_into().unwrap_or_default()),
            })
            .collect())
    }
}

/// Forks a child that runs `body`, sends the report it returns, flushes `out` and `_exit`s: 0 on
/// success, 1 after an error (printed as an `error:` line), 101 after a panic. The parent gets the pid.
pub(crate) fn spawn(
    out: &mut dyn Write,
    pipe: &ReportPipe,
    body: impl FnOnce(&mut dyn Write) -> Result<WorkloadProcess, WorkloadError>,
) -> Result<Pid, WorkloadError> {
    // Nothing buffered may be inherited, or the child would print it a second time.
    out.flush()?;
    // SAFETY: the process is single-threaded at this point (see the module comment), so the child
    // can run normal code; it never returns into the caller (it _exits below).
    match unsafe { fork() } {
        Ok(ForkResult::Parent { child }) => Ok(child),
        Ok(ForkResult::Child) => {
            let code = match catch_unwind(AssertUnwindSafe(|| {
                body(&mut *out).and_then(|report| pipe.send(&report))
            })) {
                Ok(Ok(())) => 0,
                Ok(Err(err)) => {
                    let _ = line(
                        out,
                        format_args!("error: pid {}: {err}", std::process::id()),
                    );
                    1
                }
                Err(_) => 101,
            };
            let _ = out.flush();
            // SAFETY: _exit skips atexit handlers and destructors that belong to the parent.
            unsafe { libc::_exit(code) }
        }
        Err(source) => Err(WorkloadError::Sys {
            what: "fork(2)",
            source,
        }),
    }
}

/// Waits for a child and turns anything but a clean exit into an error naming it.
pub(crate) fn reap(role: &'static str, index: u32, pid: Pid) -> Result<(), WorkloadError> {
    loop {
        let status = match waitpid(pid, None) {
            Err(Errno::EINTR) => continue,
            Err(source) => {
                return Err(WorkloadError::Sys {
                    what: "waitpid(2)",
                    source,
                })
            }
            Ok(status) => status,
        };
        let how = match status {
            WaitStatus::Exited(_, 0) => return Ok(()),
            WaitStatus::Exited(_, code) => format!("exited with status {code}"),
            WaitStatus::Signaled(_, sig, _) => format!("was killed by {sig}"),
            _ => continue, // stopped/continued: keep waiting for the end
        };
        return Err(WorkloadError::ChildFailed {
            role,
            index,
            pid: pid.as_raw(),
            how,
        });
    }
}
