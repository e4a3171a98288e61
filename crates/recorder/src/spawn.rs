//! Starts the command with the shim preloaded, forwards its output (reading it only for
//! `--marker`), and runs the server loop until the command and its descendants are done.
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use trace::{TraceHeader, TraceWriter, Trailer};

use crate::protocol::{ENV_SOCKET, EXEC_ENV_PRELOAD, EXEC_ENV_SOCKET};
use crate::server::{Input, OutputPipe, Server};
use crate::untraced::{Announced, Expected};
use crate::{shim, sys, RecordError, RecordOptions, RecordSummary};

pub fn run(o: &RecordOptions) -> Result<RecordSummary, RecordError> {
    let program = o.command.first().ok_or(RecordError::NoCommand)?;
    let shim = shim::shim_path()?;
    let dir = tempfile::Builder::new()
        .prefix("alloclens-")
        .tempdir()
        .map_err(RecordError::Socket)?;
    let sock_path = dir.path().join("rec.sock");
    let listener = sys::listen_seqpacket(&sock_path).map_err(RecordError::Socket)?;

    let file = File::create(&o.output).map_err(|source| RecordError::Output {
        path: o.output.clone(),
        source,
    })?;
    let header = TraceHeader {
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
    };
    // The header reaches the file at once: should the recorder die before its first periodic
    // flush, the file is still a trace (of no process yet), not an empty file.
    let writer = TraceWriter::new(BufWriter::with_capacity(1 << 20, file), &header)
        .and_then(|mut w| w.flush().map(|()| w))
        .map_err(|source| RecordError::Output {
            path: o.output.clone(),
            source,
        })?;
    let mut server = Server::new(
        listener,
        writer,
        o.chunk_records.max(1),
        o.zstd_level,
        o.addresses,
    );

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
    let preload = preload_with_shim(&shim, preload);
    cmd.env("LD_PRELOAD", &preload);
    cmd.env(ENV_SOCKET, &sock_path);
    let (tx, rx) = mpsc::channel();
    let mut output_open = 0usize;
    if o.marker.is_some() {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child: Child = cmd.spawn().map_err(|source| {
        let command = program.to_string_lossy().into_owned();
        if source.kind() == std::io::ErrorKind::NotFound {
            RecordError::CommandNotFound { command }
        } else {
            RecordError::Spawn { command, source }
        }
    })?;
    if let Some(link) = &o.supervisor {
        link.announce(&child);
    }
    // The command itself may be a program the shim cannot enter (statically linked, set-user-ID):
    // followed like an exec the shim announced.
    server.expect(Expected {
        shim: shim.clone(),
        socket: sock_path.clone(),
    });
    server.spawned(Announced {
        pid: child.id(),
        ppid: std::process::id(),
        path: program.to_string_lossy().into_owned(),
        argv0: program.to_string_lossy().into_owned(),
        env: EXEC_ENV_PRELOAD | EXEC_ENV_SOCKET,
        preload: preload.to_string_lossy().into_owned(),
    });
    if let Some(re) = &o.marker {
        if let Some(out) = child.stdout.take() {
            let pipe = Arc::new(OutputPipe::new(out.as_raw_fd()));
            server.watch_output(pipe.clone());
            forward_lines(out, std::io::stdout(), re.clone(), tx.clone(), pipe);
            output_open += 1;
        }
        if let Some(err) = child.stderr.take() {
            let pipe = Arc::new(OutputPipe::new(err.as_raw_fd()));
            server.watch_output(pipe.clone());
            forward_lines(err, std::io::stderr(), re.clone(), tx.clone(), pipe);
            output_open += 1;
        }
    }
    drop(tx);

    let mut status = None;
    let mut exited_at: Option<Instant> = None;
    loop {
        if let (Some(signal), None) = (crate::supervisor::take_pending_signal(), status) {
            // SAFETY: kill with our child's pid (not yet waited for, so not reused).
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
        // Decide on the state seen by a whole round that started after the exit: hellos and
        // hang-ups sent before the command died are read by then.
        let seen_exit = exited_at;
        let moved = server.round(&rx, &mut output_open, seen_exit.is_some());
        if status.is_none() {
            if let Some(s) = child.try_wait().map_err(RecordError::Wait)? {
                status = Some(s);
                exited_at = Some(Instant::now());
            }
        }
        if let Some(at) = seen_exit {
            let quiet = server.live_images() == 0 && output_open == 0;
            if quiet || at.elapsed() >= o.linger {
                break;
            }
        }
        if moved == 0 {
            server.wait(1);
        }
    }
    // Output lines that are still buffered in the channel.
    server.round(&rx, &mut output_open, true);
    server.abandon_remaining();
    let status =
        status.ok_or_else(|| RecordError::Wait(std::io::Error::other("no exit status")))?;
    let events: u64 = server.summaries.iter().map(|p| p.events).sum();
    let trailer = Trailer {
        exit: describe_status(&status),
        events,
        end_unix_ns: unix_ns(),
    };
    let bytes = server.finish(&trailer);
    Ok(RecordSummary {
        status,
        processes: std::mem::take(&mut server.summaries),
        events,
        output_markers: server.markers,
        bytes,
        warnings: std::mem::take(&mut server.warnings),
        untraced: std::mem::take(&mut server.untraced),
    })
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
