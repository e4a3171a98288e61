//! Starts the command with the shim preloaded, forwards its output (reading it only for
//! `--marker`), and runs the server loop until the command and its descendants are done.
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use trace::{TraceHeader, TraceWriter, Trailer};

use crate::exit_stop::{ExitEvent, ExitStop, TraceMeReport};
use crate::leak_check;
use crate::protocol::{ENV_SOCKET, EXEC_ENV_PRELOAD, EXEC_ENV_SOCKET};
use crate::server::{Input, OutputPipe, Server};
use crate::untraced::{Announced, Expected};
use crate::{shim, sys, RecordError, RecordOptions, RecordSummary, TraceFile};

/// The socket's name in its directory (`socket_dir`).
const SOCKET_NAME: &str = "rec.sock";

/// Prefix of a socket directory in the temporary directory; the recorder's pid follows.
const SOCKET_DIR_PREFIX: &str = "alloclens-";

/// A private directory (mode 0700) for the recorder's socket, `alloclens-PID-NS-XXXXXX` in the
/// temporary directory (NS: the pid namespace, in hex, in which PID means this process).
/// Removed when the recording ends; when the recorder dies, by the supervisor; when both die, by
/// the next recording that finds it (`sweep_stale_socket_dirs`).
fn socket_dir() -> Result<tempfile::TempDir, RecordError> {
    let tmp = std::env::temp_dir();
    let ns = pid_namespace();
    sweep_stale_socket_dirs(&tmp, ns);
    tempfile::Builder::new()
        .prefix(&format!(
            "{SOCKET_DIR_PREFIX}{}-{ns:x}-",
            std::process::id()
        ))
        .tempdir_in(&tmp)
        .map_err(RecordError::Socket)
}

/// The inode of our pid namespace (0 when unknown): a temporary directory shared with a
/// container holds directories named for pids of another namespace, which say nothing here.
fn pid_namespace() -> u64 {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

/// Removes the socket directories of recorders that died with their supervisor (a SIGKILL to
/// the whole group, a machine out of memory): ours (same owner), named for a pid of our
/// namespace `ns` that is gone, holding nothing but the socket.
fn sweep_stale_socket_dirs(tmp: &Path, ns: u64) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let uid = sys::effective_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SOCKET_DIR_PREFIX))
            .and_then(|rest| {
                let mut parts = rest.splitn(3, '-');
                let pid = parts.next()?.parse::<libc::pid_t>().ok()?;
                let same_ns = u64::from_str_radix(parts.next()?, 16).ok()? == ns;
                (pid > 0 && same_ns && ns != 0).then_some(pid)
            })
        else {
            continue;
        };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == uid);
        let gone = !is_running(pid);
        let only_the_socket = || {
            std::fs::read_dir(&path)
                .is_ok_and(|d| d.flatten().all(|e| e.file_name() == SOCKET_NAME))
        };
        if ours && gone && only_the_socket() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Whether process `pid` exists and is not a zombie (a killed recorder whose parent died too
/// may stay a zombie for long where nothing reaps orphans, as in many containers).
fn is_running(pid: libc::pid_t) -> bool {
    match procmem::read_stat(pid as u32) {
        Ok(stat) => stat.is_alive(),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// What failed to start: a name not in PATH, or a path that is missing or cannot be run.
fn spawn_error(program: &OsString, source: std::io::Error) -> RecordError {
    let command = program.to_string_lossy().into_owned();
    let path = std::path::PathBuf::from(program);
    let is_path = command.contains('/');
    match source.kind() {
        std::io::ErrorKind::NotFound if !is_path => RecordError::CommandNotFound { command },
        // The file is there: what exec did not find is its interpreter or loader.
        std::io::ErrorKind::NotFound if path.exists() => RecordError::InterpreterMissing { path },
        std::io::ErrorKind::NotFound => RecordError::NoSuchProgram { path },
        std::io::ErrorKind::PermissionDenied if is_path => RecordError::NotExecutable { path },
        _ => RecordError::Spawn { command, source },
    }
}

pub fn run(o: &RecordOptions) -> Result<RecordSummary, RecordError> {
    let program = o.command.first().ok_or(RecordError::NoCommand)?;
    let shim = shim::shim_path()?;
    let dir = socket_dir()?;
    if let Some(link) = &o.supervisor {
        link.socket_dir(dir.path());
    }
    let sock_path = dir.path().join(SOCKET_NAME);
    let listener = sys::listen_seqpacket(&sock_path).map_err(RecordError::Socket)?;

    let (output, file) = TraceFile::create(&o.output, o.existing)?;
    if let Some(link) = &o.supervisor {
        link.trace_file(&output);
    }
    let started = start(o, program, &shim, (listener, &sock_path), file);
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            // Nothing was recorded: the file we made goes, a file we were to replace stays.
            output.discard();
            return Err(e);
        }
    };
    let mut result = follow(o, started);
    // Whatever the outcome, the trace holds what was recorded: it takes the name asked for.
    if let Err(e) = output.commit() {
        let w = format!(
            "cannot rename the trace '{}' to '{}': {e}; the recording is in the former",
            output.written().display(),
            output.target().display()
        );
        if let Ok(summary) = &mut result {
            summary.warnings.push(w);
        }
    }
    result
}

/// The command being recorded: the server that receives its events, and what the loop has seen
/// of its end.
struct Recording {
    server: Server,
    child: Child,
    /// Marker lines and ends of output from the threads forwarding the command's output.
    outputs: mpsc::Receiver<Input>,
    /// Output streams still being forwarded.
    output_open: usize,
    status: Option<std::process::ExitStatus>,
    exited_at: Option<Instant>,
    /// `record --leaks`: the check at the command's exit.
    leaks: Option<LeakCheck>,
}

/// How long the leak check waits at the exit for the command's hello still in the socket.
const HELLO_WAIT: Duration = Duration::from_millis(500);

/// `record --leaks`: the tracer holding the command at its exit, or why there is none.
struct LeakCheck {
    pid: u32,
    tracer: Option<ExitStop>,
    /// Why the memory cannot be scanned (degraded to "not freed at exit").
    cannot_stop: Option<String>,
    /// The result, once written.
    done: Option<trace::Leaks>,
}

/// Runs the server loop until the command and its descendants are done, then ends the trace.
fn follow(o: &RecordOptions, mut rec: Recording) -> Result<RecordSummary, RecordError> {
    loop {
        rec.forward_pending_signal();
        // Decide on the state seen by a whole round that started after the exit: hellos and
        // hang-ups sent before the command died are read by then.
        let seen_exit = rec.exited_at;
        let moved = rec
            .server
            .round(&rec.outputs, &mut rec.output_open, seen_exit.is_some());
        rec.poll_exit()?;
        if let Some(at) = seen_exit {
            if rec.is_quiet() || at.elapsed() >= o.linger {
                break;
            }
        }
        if moved == 0 {
            if rec.tracer_busy() {
                std::thread::yield_now();
            } else {
                rec.server.pause(Duration::from_millis(1));
            }
        }
    }
    rec.finish()
}

impl Recording {
    /// A signal the supervisor received (Ctrl-C, SIGTERM) goes on to the command while it runs.
    fn forward_pending_signal(&self) {
        if let (Some(signal), None) = (crate::supervisor::take_pending_signal(), self.status) {
            // Our child's pid: not yet waited for, so not reused.
            sys::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    fn poll_exit(&mut self) -> Result<(), RecordError> {
        if let Some(tracer) = self.leaks.as_mut().and_then(|l| l.tracer.as_mut()) {
            // The tracer reaps the command: `Child::try_wait` would see its ptrace stops.
            match tracer.poll() {
                Some(ExitEvent::AtExit) => self.check_leaks(),
                Some(ExitEvent::Ended(status)) => {
                    use std::os::unix::process::ExitStatusExt;
                    self.status = Some(std::process::ExitStatus::from_raw(status));
                    self.exited_at = Some(Instant::now());
                    if let Some(l) = self.leaks.as_mut() {
                        l.tracer = None;
                    }
                }
                None => {}
            }
            return Ok(());
        }
        if self.status.is_none() {
            if let Some(s) = self.child.try_wait().map_err(RecordError::Wait)? {
                self.status = Some(s);
                self.exited_at = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// `record --leaks`: the command's threads made stops lately; more may follow at once.
    fn tracer_busy(&self) -> bool {
        let tracer = self.leaks.as_ref().and_then(|l| l.tracer.as_ref());
        tracer.is_some_and(ExitStop::busy)
    }

    /// The command is held in its exit: its blocks as the rings last left them, classified
    /// against its memory, into the trace; then it may end.
    fn check_leaks(&mut self) {
        let Some(l) = self.leaks.as_mut() else { return };
        let Some(tracer) = l.tracer.as_mut() else {
            return;
        };
        let Some((threads, missed)) = tracer.hold_threads() else {
            return; // only the main thread ended: the process runs on
        };
        let exec_index = tracer.execs;
        // A short command may reach its exit before its hello was read: it is in the socket.
        let deadline = Instant::now() + HELLO_WAIT;
        let mut found = self.server.exit_blocks(l.pid, exec_index);
        while found.is_none() && Instant::now() < deadline {
            self.server
                .round(&self.outputs, &mut self.output_open, true);
            self.server.wait(Duration::from_millis(1));
            found = self.server.exit_blocks(l.pid, exec_index);
        }
        match found {
            Some(blocks) => {
                let leaks = leak_check::scan(l.pid, exec_index, &threads, missed, &blocks);
                self.server.write_leaks(leaks.clone());
                l.done = Some(leaks);
            }
            None => {
                l.cannot_stop = Some(format!(
                    "the program running at the exit (image {exec_index} of pid {}) was not \
                     traced",
                    l.pid
                ));
            }
        }
        tracer.release();
    }

    /// Degraded: the command ended without the check (never held, or killed first): its
    /// blocks still live are written as "not freed at exit", and a warning says why.
    fn leaks_not_checked(&mut self, status: &std::process::ExitStatus) {
        let Some(l) = self.leaks.as_mut() else { return };
        if l.done.is_some() {
            return;
        }
        let reason = l.cannot_stop.clone().unwrap_or_else(|| {
            format!(
                "the command ended ({}) without stopping at its exit",
                describe_status(status)
            )
        });
        // The last image that said hello, as far as the tracer (if any) saw execs.
        let last = self.server.summaries.iter().filter(|p| p.pid == l.pid);
        let exec_index = last.map(|p| p.exec_index).max().unwrap_or(0);
        let Some(blocks) = self.server.exit_blocks(l.pid, exec_index) else {
            self.server
                .warnings
                .push(format!("--leaks: no leak check: {reason}"));
            return;
        };
        let leaks = leak_check::not_freed(l.pid, exec_index, &blocks, reason.clone());
        self.server.write_leaks(leaks.clone());
        self.server.warnings.push(format!(
            "--leaks: memory not scanned: {reason}; blocks still allocated are only reported as \"{}\"",
            leak_check::NOT_FREED
        ));
        l.done = Some(leaks);
    }

    /// No traced program runs any more and the output is all forwarded.
    fn is_quiet(&self) -> bool {
        self.server.live_images() == 0 && self.output_open == 0
    }

    /// Ends the trace with its trailer and sums up what the file holds.
    fn finish(mut self) -> Result<RecordSummary, RecordError> {
        // Output lines that are still buffered in the channel.
        self.server
            .round(&self.outputs, &mut self.output_open, true);
        self.server.abandon_remaining();
        let status = self
            .status
            .ok_or_else(|| RecordError::Wait(std::io::Error::other("no exit status")))?;
        self.leaks_not_checked(&status);
        let server = &mut self.server;
        let intercepted: u64 = server.summaries.iter().map(|p| p.events).sum();
        let trailer = Trailer {
            exit: describe_status(&status),
            events: intercepted,
            end_unix_ns: unix_ns(),
            attach: None,
        };
        let bytes = server.finish(&trailer);
        // What the file holds: less than what was intercepted when writing failed.
        for i in 0..server.summaries.len() {
            server.summaries[i].events = server.events_written(i);
        }
        let events = server.summaries.iter().map(|p| p.events).sum();
        Ok(RecordSummary {
            status,
            processes: std::mem::take(&mut server.summaries),
            events,
            events_intercepted: intercepted,
            output_markers: server.markers,
            bytes,
            warnings: std::mem::take(&mut server.warnings),
            untraced: std::mem::take(&mut server.untraced),
            leaks: self.leaks.and_then(|l| l.done),
        })
    }
}

/// Opens the trace, starts the command with the shim preloaded and its output forwarded.
fn start(
    o: &RecordOptions,
    program: &OsString,
    shim: &Path,
    (listener, sock_path): (OwnedFd, &Path),
    file: File,
) -> Result<Recording, RecordError> {
    let mut server = serve(o, &trace_header(o), listener, file)?;
    let (mut cmd, preload) = command(o, program, shim, sock_path);
    if o.marker.is_some() {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let report = if o.leaks {
        let report = TraceMeReport::new().map_err(|e| RecordError::Spawn {
            command: program.to_string_lossy().into_owned(),
            source: e,
        })?;
        // SAFETY: the closure makes only async-signal-safe system calls (ptrace, write).
        unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, report.child_side()) };
        Some(report)
    } else {
        None
    };
    let mut child: Child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
    if let Some(link) = &o.supervisor {
        link.announce(&child);
    }
    let leaks = report.map(|report| {
        server.keep_exit_blocks_of(child.id());
        let traced = report.outcome().and_then(|()| {
            ExitStop::begin(child.id()).map_err(|e| format!("cannot trace the command: {e}"))
        });
        match traced {
            Ok(tracer) => LeakCheck {
                pid: child.id(),
                tracer: Some(tracer),
                cannot_stop: None,
                done: None,
            },
            Err(reason) => LeakCheck {
                pid: child.id(),
                tracer: None,
                cannot_stop: Some(reason),
                done: None,
            },
        }
    });
    // The command itself may be a program the shim cannot enter (statically linked, set-user-ID):
    // followed like an exec the shim announced.
    server.expect(Expected {
        shim: shim.to_path_buf(),
        socket: sock_path.to_path_buf(),
    });
    server.spawned(Announced {
        pid: child.id(),
        ppid: std::process::id(),
        path: program.to_string_lossy().into_owned(),
        argv0: program.to_string_lossy().into_owned(),
        env: EXEC_ENV_PRELOAD | EXEC_ENV_SOCKET,
        preload: preload.to_string_lossy().into_owned(),
    });
    let (tx, outputs) = mpsc::channel();
    let mut output_open = 0usize;
    if let Some(re) = &o.marker {
        if let Some(out) = child.stdout.take() {
            watch_and_forward(&mut server, out, std::io::stdout(), re, &tx);
            output_open += 1;
        }
        if let Some(err) = child.stderr.take() {
            watch_and_forward(&mut server, err, std::io::stderr(), re, &tx);
            output_open += 1;
        }
    }
    Ok(Recording {
        server,
        child,
        outputs,
        output_open,
        status: None,
        exited_at: None,
        leaks,
    })
}

/// The server of a recording, writing the trace with `header` into `file`.
pub(crate) fn serve(
    o: &RecordOptions,
    header: &TraceHeader,
    listener: OwnedFd,
    file: File,
) -> Result<Server, RecordError> {
    // Chunks go to the file as they are written, unbuffered (an events chunk is tens to hundreds
    // of kilobytes): a failed write is seen with the chunk it failed on, so the recorder knows
    // which events reached the file, and the header is there at once should the recorder die.
    let writer = TraceWriter::new(file, header).map_err(|source| RecordError::Output {
        path: o.output.clone(),
        source,
    })?;
    let mut server = Server::new(
        listener,
        writer,
        o.chunk_records.max(1),
        o.zstd_level,
        o.addresses,
        o.progress.clone(),
        crate::batch::StackIds::of(header),
    );
    if let Some(interval) = o.memory_interval {
        server.sample_memory(interval);
    }
    Ok(server)
}

pub(crate) fn trace_header(o: &RecordOptions) -> TraceHeader {
    TraceHeader {
        command: o
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        host: sys::hostname(),
        allocator: o.allocator.clone(),
        start_unix_ns: unix_ns(),
        writer: format!("alloclens {}", env!("CARGO_PKG_VERSION")),
        no_addresses: !o.addresses,
        stacks: o.stacks.is_some(),
        free_stacks: o.stacks.is_some_and(|s| s.frees),
        stack_depth: o.stacks.map(|s| s.depth),
        stack_sample_bytes: o.stacks.map_or(0, |s| s.sample_bytes),
        attached_pid: None,
    }
}

/// The command with the options' environment, the shim first in LD_PRELOAD (returned too) and
/// the socket's path.
fn command(
    o: &RecordOptions,
    program: &OsString,
    shim: &Path,
    sock_path: &Path,
) -> (Command, OsString) {
    let mut cmd = Command::new(program);
    cmd.args(&o.command[1..]);
    let mut preload = None;
    for (k, v) in &o.env {
        if k == "LD_PRELOAD" {
            preload = Some(v.clone());
        } else {
            cmd.env(k, v);
        }
    }
    let preload = preload.or_else(|| std::env::var_os("LD_PRELOAD"));
    let preload = preload_with_shim(shim, preload);
    cmd.env("LD_PRELOAD", &preload);
    cmd.env(ENV_SOCKET, sock_path);
    // Inherited settings of an outer recording must not leak into this one.
    cmd.env_remove(crate::protocol::ENV_STACKS);
    cmd.env_remove(crate::protocol::ENV_FREE_STACKS);
    cmd.env_remove(crate::protocol::ENV_STACK_SAMPLE);
    if let Some(s) = o.stacks {
        cmd.env(crate::protocol::ENV_STACKS, s.depth.to_string());
        if s.sample_bytes != 0 {
            cmd.env(
                crate::protocol::ENV_STACK_SAMPLE,
                s.sample_bytes.to_string(),
            );
        }
        if s.frees {
            cmd.env(crate::protocol::ENV_FREE_STACKS, "1");
        }
    }
    (cmd, preload)
}

/// Forwards one of the command's output pipes, which the server watches to know when every
/// marker before an event has been read.
fn watch_and_forward<R: Read + AsRawFd + Send + 'static, W: Write + Send + 'static>(
    server: &mut Server,
    from: R,
    to: W,
    re: &regex::Regex,
    tx: &Sender<Input>,
) {
    let pipe = Arc::new(OutputPipe::new(from.as_raw_fd()));
    server.watch_output(pipe.clone());
    forward_lines(from, to, re.clone(), tx.clone(), pipe);
}

/// The shim first, so its malloc is found first and forwards to the next one in the chain.
fn preload_with_shim(shim: &std::path::Path, rest: Option<OsString>) -> OsString {
    let mut v = OsString::from(shim.as_os_str());
    if let Some(rest) = rest.filter(|r| !r.is_empty()) {
        v.push(":");
        v.push(rest);
    }
    v
}

/// Copies a pipe to our own stream byte for byte, line by line, and reports matching lines.
fn forward_lines<R: Read + Send + 'static, W: Write + Send + 'static>(
    from: R,
    mut to: W,
    re: regex::Regex,
    tx: Sender<Input>,
    pipe: Arc<OutputPipe>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 16, from);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.buffer().is_empty() {
                // Everything read so far was matched and its markers sent (Release: the loop
                // that sees this sees them).
                pipe.idle.store(true, Ordering::Release);
                let more = reader.fill_buf().map_or(0, |b| b.len());
                pipe.idle.store(false, Ordering::Release);
                if more == 0 {
                    break;
                }
            }
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            if let Some(caps) = re.captures(text.trim_end_matches(['\n', '\r'])) {
                let label = caps
                    .get(1)
                    .or_else(|| caps.get(0))
                    .map_or("", |m| m.as_str())
                    .to_string();
                let _ = tx.send(Input::OutputMarker(label));
            }
            // Output is passed on even when nobody reads ours any more (broken pipe ignored).
            let _ = to.write_all(&line).and_then(|_| to.flush());
        }
        pipe.closed.store(true, Ordering::Release);
        drop(reader); // closes the pipe, after `closed` tells the loop to stop looking at it
        let _ = tx.send(Input::OutputClosed);
    });
}

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// "exit 3" or "signal 9 (SIGKILL)".
pub fn describe_status(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s} ({})", sys::signal_name(s)),
        _ => "unknown".into(),
    }
}
