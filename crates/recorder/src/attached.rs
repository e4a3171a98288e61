//! `record --pid`: records a process that is already running, from the attach to the detach.
//!
//! The attach crate loads the attach shim into the process (no debugger) and calls its entry
//! with this recording's socket; the shim patches the process's GOT and from then on its
//! threads write rings as under the preload shim, so the same server drains them into the same
//! trace. The detach (`--duration`, Ctrl-C, SIGTERM, SIGHUP) shuts our side of the socket: the
//! shim puts the GOT back and ends its image, and the process runs on. How and what is seen:
//! docs/attach.md.
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use attach::{Argument, AttachError, EntryCall, Injection, Target};
use trace::{TraceHeader, Trailer};

use crate::server::Server;
use crate::spawn::unix_ns;
use crate::{sys, RecordError, RecordOptions, RecordSummary, TraceFile};

/// The attach shim's entry (shim/record/attach.c).
const ENTRY: &str = "alloclens_record_attach";
/// How long alloclens waits for a thread at a safe point before it looks for one blocked in a
/// system call (as watch --pid).
const SAFE_POINT_WAIT: Duration = Duration::from_millis(1500);
/// How long the detach waits for the shim to end its image (it takes about 40 ms: two pauses
/// for calls in flight) before the trace is closed anyway.
const DETACH_WAIT: Duration = Duration::from_secs(5);
const SOCKET_NAME: &str = "rec.sock";
const PROCESS_EXITED: &str = "the process exited";

/// How a `record --pid` went, beside the recording's summary.
#[derive(Debug, Clone)]
pub struct Attached {
    pub injection: Injection,
    /// What ended the recording: "--duration", "signal 2 (SIGINT)", "the process exited".
    pub ended_by: String,
    /// The process ended while it was recorded (nothing was detached).
    pub exited: bool,
}

/// Attaches to process `pid`, records until `duration` passes, a termination signal arrives or
/// the process ends, then detaches. `o.command` is ignored (the header takes the process's
/// command line). `on_attached` is called once the shim runs in the process.
pub fn record_pid(
    o: &RecordOptions,
    pid: u32,
    duration: Option<Duration>,
    on_attached: &mut dyn FnMut(&Injection),
) -> Result<(RecordSummary, Attached), RecordError> {
    crate::check_stacks(o)?;
    let target = attach::check(pid)?;
    // Held until the trace is finished: one alloclens at a time in the process.
    let _lock = attach::session_lock(&target)?;
    let bytes = embedded::ATTACH_SHIM.bytes;
    let library = attach::stage(&target, embedded::ATTACH_SHIM.stem, bytes)?;
    let dir = attach::scratch_directory(&target, "record")?;
    let socket = Socket {
        ours: dir.ours.join(SOCKET_NAME),
        dir,
    };
    let listener = sys::listen_seqpacket(&socket.ours).map_err(RecordError::Socket)?;
    // SAFETY: geteuid has no preconditions.
    if target.uid != unsafe { libc::geteuid() } {
        std::os::unix::fs::chown(&socket.ours, Some(target.uid), Some(target.gid))
            .map_err(RecordError::Socket)?;
    }
    let (output, file) = TraceFile::create(&o.output, o.existing)?;
    let mut server = match crate::spawn::serve(o, &trace_header(o, &target), listener, file) {
        Ok(s) => s,
        Err(e) => {
            output.discard();
            return Err(e);
        }
    };
    crate::supervisor::catch_termination();
    let theirs = socket.dir.theirs.join(SOCKET_NAME).display().to_string();
    let stacks = o
        .stacks
        .map_or(0, |s| u64::from(s.depth) | u64::from(s.frees) << 32);
    let sample = o.stacks.map_or(0, |s| s.sample_bytes);
    let injected = attach::inject(
        &target,
        &library.theirs,
        bytes,
        &EntryCall {
            function: ENTRY,
            arguments: vec![
                Argument::Str(&theirs),
                Argument::Int(stacks),
                Argument::Int(sample),
            ],
        },
        SAFE_POINT_WAIT,
    )
    .and_then(|i| entry_result(pid, &library.theirs, i));
    let injection = match injected {
        Ok(i) => i,
        Err(e) => {
            drop(server);
            output.discard();
            return Err(e.into());
        }
    };
    on_attached(&injection);
    let ended_by = follow(&mut server, duration);
    let summary = finish(server);
    drop(socket);
    let summary = commit(output, summary);
    let exited = ended_by == PROCESS_EXITED;
    Ok((
        summary,
        Attached {
            injection,
            ended_by,
            exited,
        },
    ))
}

/// The socket and its directory in the process's /tmp, removed when the recording ends (also
/// when the process has exited: `Staged::remove`).
struct Socket {
    ours: std::path::PathBuf,
    dir: attach::Staged,
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.dir.remove();
    }
}

/// The entry's return: the GOT slots patched, or why the shim could not start.
fn entry_result(pid: u32, library: &Path, i: Injection) -> Result<Injection, AttachError> {
    let detail = match i.entry_returned {
        n if n > 0 => return Ok(i),
        0 => "no module of it calls malloc or free through its GOT (an allocator linked into the executable, or a static program)",
        -1 => "another alloclens record --pid is recording it",
        -2 => "the socket path is too long",
        -3 => "its malloc and free could not be found",
        -4 => "it could not connect to alloclens (its stderr says why)",
        -5 => "it could not start the shim's thread",
        _ => "the attach shim's entry failed",
    };
    Err(AttachError::LoadFailed {
        pid,
        library: library.display().to_string(),
        detail: detail.into(),
    })
}

/// Runs the server until the end condition, then detaches. Returns what ended it.
fn follow(server: &mut Server, duration: Option<Duration>) -> String {
    let (_tx, inputs) = mpsc::channel();
    let mut output_open = 0usize;
    let start = Instant::now();
    let mut seen_image = false;
    let ended_by = loop {
        let moved = server.round(&inputs, &mut output_open, false);
        // An image may come and go within one round (a process that exits at once).
        seen_image |= !server.summaries.is_empty();
        if let Some(signal) = crate::supervisor::take_pending_signal() {
            break format!("signal {signal} ({})", sys::signal_name(signal));
        }
        if duration.is_some_and(|d| start.elapsed() >= d) {
            break "--duration".into();
        }
        // The shim said hello during the injection: an image seen and gone is the process's end.
        if seen_image && server.live_images() == 0 {
            return PROCESS_EXITED.into();
        }
        if !seen_image && start.elapsed() > DETACH_WAIT {
            break "the shim never connected".into();
        }
        if moved == 0 {
            server.pause(Duration::from_millis(20));
        }
    };
    server.detach_all();
    let detached = Instant::now();
    while server.live_images() > 0 && detached.elapsed() < DETACH_WAIT {
        if server.round(&inputs, &mut output_open, true) == 0 {
            server.wait(Duration::from_millis(10));
        }
    }
    ended_by
}

fn finish(mut server: Server) -> RecordSummary {
    let (_tx, inputs) = mpsc::channel();
    let mut output_open = 0usize;
    server.round(&inputs, &mut output_open, true);
    server.abandon_remaining();
    let intercepted: u64 = server.summaries.iter().map(|p| p.events).sum();
    let trailer = Trailer {
        exit: "detached".into(),
        events: intercepted,
        end_unix_ns: unix_ns(),
        attach: server.attach.clone(),
    };
    let bytes = server.finish(&trailer);
    for i in 0..server.summaries.len() {
        server.summaries[i].events = server.events_written(i);
    }
    let events = server.summaries.iter().map(|p| p.events).sum();
    RecordSummary {
        status: ExitStatus::from_raw(0),
        processes: std::mem::take(&mut server.summaries),
        events,
        events_intercepted: intercepted,
        output_markers: 0,
        bytes,
        warnings: std::mem::take(&mut server.warnings),
        untraced: std::mem::take(&mut server.untraced),
        leaks: None,
    }
}

fn commit(output: TraceFile, mut summary: RecordSummary) -> RecordSummary {
    if let Err(e) = output.commit() {
        summary.warnings.push(format!(
            "cannot rename the trace '{}' to '{}': {e}; the recording is in the former",
            output.written().display(),
            output.target().display()
        ));
    }
    summary
}

fn trace_header(o: &RecordOptions, target: &Target) -> TraceHeader {
    let pid = target.pid;
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    TraceHeader {
        command,
        allocator: allocator_of(target),
        attached_pid: Some(pid),
        ..crate::spawn::trace_header(o)
    }
}

/// The allocator serving the process, by the libraries it has loaded (glibc's when none).
fn allocator_of(target: &Target) -> String {
    const KNOWN: [(&str, &str); 4] = [
        ("libjemalloc", "jemalloc"),
        ("libtcmalloc", "tcmalloc"),
        ("libmimalloc", "mimalloc"),
        ("libtbbmalloc", "tbbmalloc"),
    ];
    target
        .modules
        .iter()
        .find_map(|m| {
            let name = m.file_name();
            KNOWN
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .map(|(_, label)| label.to_string())
        })
        .unwrap_or_else(|| "glibc".into())
}
