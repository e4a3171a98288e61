//! The recorder's loop: accepts shim connections, handles their control messages, drains every
//! image's rings each round, writes chunks, and decides how each image ended.
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use trace::{EndReason, Marker, ProcessInfo};

use crate::batch::{Batch, ChunkBuilder};
use crate::image::{liveness, Batches, Image, Liveness};
use crate::memory::MemorySampler;
use crate::pipeline::{FileWriter, Finished, Pipeline};
use crate::protocol::{self, Message};
use crate::sys::{self, Received};
use crate::untraced::{self, Announced, Expected, Verdict};

mod exec_follow;
use crate::ProcessSummary;
use exec_follow::{ExecFollower, NO_HELLO, VERDICT_GRACE};

/// Why the loop is asked to look again.
pub enum Input {
    /// An output line matched `--marker`: label.
    OutputMarker(String),
    /// One output pipe reached its end.
    OutputClosed,
}

/// An output pipe read for `--marker`, as its reader thread shows it to the loop: an image that
/// ended may still have matching lines in the pipe, and its stream must not close before they
/// became markers (a short program's markers were lost whenever the reader thread ran late).
pub struct OutputPipe {
    /// The pipe's read end (owned by the reader thread; looked at while `closed` is false).
    pub fd: RawFd,
    /// The reader has nothing buffered and waits on the pipe (or is about to).
    pub idle: AtomicBool,
    /// The reader is done and the pipe closed.
    pub closed: AtomicBool,
}

impl OutputPipe {
    pub fn new(fd: RawFd) -> Self {
        OutputPipe {
            fd,
            idle: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Lines written to the pipe have not all been read and matched yet.
    fn behind(&self) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        if !self.idle.load(Ordering::Acquire) {
            return true;
        }
        // `fd` is open while `closed` is false.
        sys::unread_bytes(self.fd).is_some_and(|n| n > 0)
    }
}

/// An image's place in `images`, `finished` and `summaries`. Images are never removed, so it
/// names one image for the whole recording. Typed indices (heaptrack's indices.h): an image's
/// index cannot be taken for a connection's, nor a stream number for either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ImageIndex(usize);

impl ImageIndex {
    /// Every image of `images` (of length `len`).
    fn all(len: usize) -> impl Iterator<Item = ImageIndex> {
        (0..len).map(ImageIndex)
    }
}

/// A connection's place in `conns`, valid within one `read_messages` (a closed connection is
/// removed in place, keeping accept order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConnIndex(usize);

/// `vec[index]` with a typed index into the vectors it indexes.
macro_rules! typed_index {
    ($index:ty => $($item:ty),+) => {$(
        impl std::ops::Index<$index> for Vec<$item> {
            type Output = $item;
            fn index(&self, i: $index) -> &$item {
                &self[i.0]
            }
        }
        impl std::ops::IndexMut<$index> for Vec<$item> {
            fn index_mut(&mut self, i: $index) -> &mut $item {
                &mut self[i.0]
            }
        }
    )+};
}
typed_index!(ImageIndex => Image, bool, ProcessSummary);
typed_index!(ConnIndex => Conn);

struct Conn {
    sock: OwnedFd,
    /// The connection's image, once the hello arrived.
    image: Option<ImageIndex>,
}

pub struct Server {
    listener: OwnedFd,
    conns: Vec<Conn>,
    pub images: Vec<Image>,
    finished: Vec<bool>,
    pub summaries: Vec<ProcessSummary>,
    /// The encoder and writer threads; None once writing failed or finished.
    writer: Option<Pipeline>,
    pub warnings: Vec<String>,
    chunk_records: usize,
    /// Store addresses (`RecordOptions::addresses`); without, each image keeps `BlockIds`.
    addresses: bool,
    buf: Vec<u8>,
    /// Chunk buffers to reuse.
    spare: Vec<Vec<u8>>,
    /// Encoders of finished images, reset, for new ones (an encoder's tables take 0.5-1 MiB).
    spare_encoders: Vec<trace::ChunkEncoder>,
    /// Batches sealed this round, to hand to the compressors.
    sealed: Vec<Batch>,
    last_flush: Instant,
    pub markers: u64,
    pub bytes: u64,
    /// Events that reached the file, per stream, once writing failed (`None` while it works:
    /// then every event drained is written).
    written: Option<Vec<u64>>,
    /// (pid, start ticks) -> images seen, for exec numbering.
    images_of: HashMap<(u32, u64), u32>,
    /// Images that vanished without a goodbye: an exec in progress looks the same until the new
    /// image says hello, so the verdict (Lost or Exec) waits a little.
    verdict_pending: Vec<(ImageIndex, Instant)>,
    /// When `round` last looked for new connections, and what the last round moved.
    last_accept_ns: u64,
    last_moved: u64,
    /// When a round last moved as many records as a thread at full speed leaves (`pause`).
    full_speed_at: Instant,
    /// The pipes read for `--marker`.
    outputs: Vec<Arc<OutputPipe>>,
    /// Since when an ended image has been waiting for the output readers to catch up.
    output_wait: Option<Instant>,
    /// The execs and spawns of other processes, until each is traced or reported not traced.
    execs: ExecFollower,
    /// Programs that ran without the shim (also written into the trace).
    pub untraced: Vec<trace::Untraced>,
    /// `record --stacks`: the stack ids and arenas, and how events chunks store the ids.
    stacks: Option<(crate::stacks::Stacks, crate::batch::StackIds)>,
    /// Reads the images' memory (`RecordOptions::memory_interval`); its samples are written at
    /// each flush and before an image's end.
    memory: Option<MemorySampler>,
    /// `record --pid`: what the attach shim said of the process at the attach.
    pub attach: Option<trace::AttachFigures>,
    /// `record --leaks`: the process whose live blocks are kept for the leak check at exit.
    leaks_pid: Option<u32>,
    /// Its last image's live blocks, once that image ended (not by exec): (exec index, blocks).
    ended_blocks: Option<(u32, crate::batch::ExitBlocks)>,
}

/// A block live at the exit: real address, and what the leak check needs of it.
pub type LiveAtExit = (u64, crate::batch::ExitBlock);

fn exe_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// How long ended images wait for the output readers (`OutputPipe`) before closing anyway: a
/// partial line with no newline keeps a reader busy for as long as the program leaves it so.
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

const FLUSH_EVERY: Duration = Duration::from_millis(500);

/// How often a busy recorder looks for new connections. An `accept` that finds none still makes
/// the kernel allocate and free a socket and its file (3.7 us here, ten times a `recvmsg`), and
/// a busy recorder runs thousands of rounds a second (27 k in python3's 7 s). A new process's
/// records wait in its rings meanwhile; idle rounds, and every round once the command exited,
/// still accept at once.
const ACCEPT_EVERY_NS: u64 = 1_000_000;

/// `Server::pause`: a round that moved this many records (an eighth of a ring) saw a thread at
/// full speed; for this long after it, a round that moved nothing is followed by a short pause.
const FULL_SPEED_ROUND: u64 = (crate::protocol::RING_RECORDS / 8) as u64;
const FULL_SPEED_LATELY: Duration = Duration::from_millis(10);
const PAUSE_AT_FULL_SPEED: Duration = Duration::from_micros(50);

impl Server {
    pub fn new(
        listener: OwnedFd,
        writer: FileWriter,
        chunk_records: usize,
        level: i32,
        addresses: bool,
        progress: Option<Arc<crate::RecordProgress>>,
        stacks: Option<crate::batch::StackIds>,
    ) -> Server {
        let mut warnings = Vec::new();
        let writer = match Pipeline::start(writer, level, progress) {
            Ok(p) => Some(p),
            Err(e) => {
                warnings.push(format!("cannot start the trace writer thread: {e}"));
                None
            }
        };
        Server {
            listener,
            conns: Vec::new(),
            images: Vec::new(),
            finished: Vec::new(),
            summaries: Vec::new(),
            writer,
            warnings,
            chunk_records,
            addresses,
            buf: vec![0u8; protocol::MAX_MESSAGE + 64],
            spare: Vec::new(),
            spare_encoders: Vec::new(),
            sealed: Vec::new(),
            last_flush: Instant::now(),
            markers: 0,
            bytes: 0,
            written: None,
            images_of: HashMap::new(),
            verdict_pending: Vec::new(),
            last_accept_ns: 0,
            last_moved: 0,
            full_speed_at: Instant::now(),
            outputs: Vec::new(),
            output_wait: None,
            execs: ExecFollower::default(),
            untraced: Vec::new(),
            stacks: stacks.map(|ids| (crate::stacks::Stacks::new(), ids)),
            memory: None,
            attach: None,
            leaks_pid: None,
            ended_blocks: None,
        }
    }

    /// Reads the memory of every image from now on (`RecordOptions::memory_interval`).
    /// With `addresses`, also which pages of each image's heap are resident at its smaps samples.
    pub fn sample_memory(&mut self, interval: Duration) {
        match MemorySampler::start(interval, self.addresses) {
            Ok(m) => self.memory = Some(m),
            Err(e) => self.warn(format!(
                "cannot start the memory sampler thread ({e}): the trace has no memory samples"
            )),
        }
    }

    /// Follows execs and spawns: a program that does not get (or cannot use) `expected` is
    /// reported as not traced.
    /// `record --leaks`: keep the live blocks of process `pid` (the command) for the leak
    /// check at its exit. Call before it says hello.
    pub fn keep_exit_blocks_of(&mut self, pid: u32) {
        self.leaks_pid = Some(pid);
    }

    /// The blocks live in image `exec_index` of `pid` (`keep_exit_blocks_of`), after draining
    /// what its rings still hold; `None` when that image has not said hello (yet).
    pub fn exit_blocks(&mut self, pid: u32, exec_index: u32) -> Option<Vec<LiveAtExit>> {
        let running = ImageIndex::all(self.images.len()).find(|&i| {
            !self.finished[i]
                && self.images[i].pid == pid
                && self.summaries[i].exec_index == exec_index
        });
        let collect = |t: &crate::batch::ExitBlocks| t.iter().map(|(a, b)| (a, *b)).collect();
        if let Some(i) = running {
            self.images[i].start_round(sys::monotonic_ns());
            self.drain(i, true);
            return self.images[i].exit_blocks().map(collect);
        }
        match &self.ended_blocks {
            Some((index, blocks)) if *index == exec_index => Some(collect(blocks)),
            _ => None,
        }
    }

    /// Writes the leak check's result into the trace (a LEAKS chunk).
    pub fn write_leaks(&mut self, leaks: trace::Leaks) {
        if let Some(w) = self.writer.as_mut() {
            w.leaks(leaks);
        }
    }

    pub fn expect(&mut self, expected: Expected) {
        self.execs.expect(expected);
    }

    /// A process the recorder itself started (the command): its exec already happened.
    pub fn spawned(&mut self, ann: Announced) {
        self.execs.spawned(ann);
        self.check_execs();
    }

    /// Images that may still produce events or await their verdict.
    /// `record --pid`'s detach: shuts the recorder's side of every connection, which the attach
    /// shim's watcher thread takes as the signal to put the GOT back and end its image
    /// (`END_DETACHED`). The connections stay open for what the shim sends until then.
    pub fn detach_all(&self) {
        for c in &self.conns {
            // SAFETY: shutdown on a socket we own; it changes no memory.
            unsafe { libc::shutdown(c.sock.as_raw_fd(), libc::SHUT_WR) };
        }
    }

    pub fn live_images(&self) -> usize {
        self.finished.iter().filter(|f| !**f).count() + self.verdict_pending.len()
    }

    /// One round. Returns how many records it moved (0: the caller may sleep).
    /// `eager`: accept new connections whatever the time since the last look (once the command
    /// exited, every connection made before must be seen).
    pub fn round(&mut self, inputs: &Receiver<Input>, output_open: &mut usize, eager: bool) -> u64 {
        let now = sys::monotonic_ns();
        for (img, finished) in self.images.iter_mut().zip(&self.finished) {
            if !finished {
                img.start_round(now);
            }
        }
        if eager || self.last_moved == 0 || now.wrapping_sub(self.last_accept_ns) >= ACCEPT_EVERY_NS
        {
            self.last_accept_ns = now;
            while let Ok(Some(sock)) = sys::accept(&self.listener) {
                self.conns.push(Conn { sock, image: None });
            }
        }
        self.read_messages();
        self.check_execs();
        self.take_inputs(inputs, output_open);
        let mut moved = 0;
        for i in ImageIndex::all(self.images.len()) {
            if self.finished[i] {
                continue;
            }
            // A detached image (record --pid) is over at its hang-up; its process runs on.
            let detached = self.images[i].said_end == Some(EndReason::Detached);
            let gone = self.images[i].hung_up
                && (detached || self.is_gone(i))
                && self.output_caught_up(inputs, output_open);
            moved += self.drain(i, gone);
            if gone {
                match self.images[i].said_end {
                    Some(reason) => self.finish_image(i, reason),
                    None => {
                        self.finished[i] = true; // drained for good; only the verdict is open
                        self.verdict_pending.push((i, Instant::now()));
                    }
                }
            }
        }
        let due: Vec<ImageIndex> = self
            .verdict_pending
            .iter()
            .filter(|(_, at)| at.elapsed() >= VERDICT_GRACE)
            .map(|(i, _)| *i)
            .collect();
        for i in due {
            self.verdict_pending.retain(|(j, _)| *j != i);
            // It exec'd a program that looked traceable but never connected.
            if let Some(ann) = self.images[i].exec.take() {
                self.not_traced(&ann, None, NO_HELLO.into());
                self.finish_image(i, EndReason::Exec);
            } else {
                self.finish_image(i, EndReason::Lost);
            }
        }
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush();
        } else {
            self.check_writer();
        }
        self.last_moved = moved;
        if moved >= FULL_SPEED_ROUND {
            self.full_speed_at = Instant::now();
        }
        moved
    }

    pub fn watch_output(&mut self, pipe: Arc<OutputPipe>) {
        self.outputs.push(pipe);
    }

    fn take_inputs(&mut self, inputs: &Receiver<Input>, output_open: &mut usize) {
        while let Ok(input) = inputs.try_recv() {
            match input {
                Input::OutputMarker(label) => self.output_marker(label),
                Input::OutputClosed => *output_open = output_open.saturating_sub(1),
            }
        }
    }

    /// Whether an ended image may close: every line its process wrote has been read and its
    /// marker taken (or the readers kept it waiting `OUTPUT_GRACE`). A reader marks itself idle
    /// after sending its markers, so the markers are in the channel once it is seen idle.
    fn output_caught_up(&mut self, inputs: &Receiver<Input>, output_open: &mut usize) -> bool {
        if self.outputs.iter().any(|p| p.behind()) {
            let since = *self.output_wait.get_or_insert_with(Instant::now);
            if since.elapsed() < OUTPUT_GRACE {
                return false;
            }
        }
        self.output_wait = None;
        self.take_inputs(inputs, output_open);
        true
    }

    /// Blocks until a socket has something or `timeout` passed.
    pub fn wait(&self, timeout: Duration) {
        let mut fds: Vec<RawFd> = vec![self.listener.as_raw_fd()];
        fds.extend(self.conns.iter().map(|c| c.sock.as_raw_fd()));
        sys::poll_readable(&fds, timeout);
    }

    /// After a round that moved nothing: `idle` (the caller's pace), or `PAUSE_AT_FULL_SPEED`
    /// when a round lately moved as much as a thread allocating at full speed leaves. Such a
    /// thread fills its ring in a millisecond or two and then waits for the recorder, and
    /// nothing wakes the recorder for it: each millisecond asleep here was one the program
    /// could lose (alloc-micro, 40 M calls: 421 sleeps of 1 ms beside the program's 1,931
    /// waits for room). A program allocating at a slower pace keeps the millisecond: the
    /// recorder's rounds cost CPU the program may need.
    pub fn pause(&self, idle: Duration) {
        if self.full_speed_at.elapsed() < FULL_SPEED_LATELY {
            self.wait(PAUSE_AT_FULL_SPEED.min(idle));
        } else {
            self.wait(idle);
        }
    }

    fn is_gone(&self, i: ImageIndex) -> bool {
        let img = &self.images[i];
        liveness(img.pid, img.start_ticks) == Liveness::Gone
    }

    fn read_messages(&mut self) {
        let mut c = 0;
        while c < self.conns.len() {
            let mut closed = false;
            loop {
                match sys::recv_message(&self.conns[c].sock, &mut self.buf) {
                    Ok(Received::Message { len, fd }) => self.handle(ConnIndex(c), len, fd),
                    Ok(Received::WouldBlock) => break,
                    Ok(Received::Closed) | Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed {
                if let Some(i) = self.conns[c].image {
                    self.images[i].hung_up = true;
                    // It exits, or exec'd another program (whose memory is not this image's).
                    let stream = self.images[i].stream;
                    if let Some(m) = &self.memory {
                        m.unwatch(stream);
                    }
                }
                self.conns.remove(c); // keep accept order: hellos of a pid must be seen in order
            } else {
                c += 1;
            }
        }
    }

    fn handle(&mut self, c: ConnIndex, len: usize, fd: Option<OwnedFd>) {
        let Some(msg) = protocol::parse(&self.buf[..len]) else {
            self.warn("ignored a malformed message from the shim".into());
            return;
        };
        match (msg, self.conns[c].image) {
            (
                Message::Hello {
                    version,
                    pid,
                    ppid,
                    start_ticks,
                    mono_ns,
                    real_ns,
                    cmdline,
                    ..
                },
                None,
            ) => {
                if version != protocol::PROTOCOL_VERSION {
                    self.warn(format!(
                        "pid {pid}: shim protocol {version}, expected {}",
                        protocol::PROTOCOL_VERSION
                    ));
                    return;
                }
                let Some(fd) = fd else { return };
                self.hello(c, pid, ppid, start_ticks, mono_ns, real_ns, cmdline, &fd);
            }
            (Message::Ring, Some(i)) => {
                if let Some(fd) = fd {
                    if let Err(e) = self.images[i].add_ring(&fd) {
                        let pid = self.images[i].pid;
                        self.warn(format!("pid {pid}: cannot map a thread ring: {e}"));
                    }
                }
            }
            (
                Message::Mark {
                    tid,
                    seq,
                    mono_ns,
                    label,
                },
                Some(i),
            ) => {
                let img = &mut self.images[i];
                let t_ns = mono_ns.saturating_sub(img.mono0);
                img.add_marker(Marker {
                    seq,
                    t_ns,
                    tid,
                    label,
                });
            }
            (Message::End { reason }, Some(i)) => {
                self.images[i].said_end = Some(match reason {
                    protocol::END_QUICK_EXIT => EndReason::QuickExit,
                    protocol::END_DETACHED => EndReason::Detached,
                    _ => EndReason::Exit,
                });
            }
            (
                Message::Attached {
                    heap_in_use,
                    heap_source,
                    got_slots,
                },
                Some(_),
            ) => {
                let source = match heap_source {
                    protocol::HEAP_GLIBC => "glibc mallinfo2",
                    protocol::HEAP_JEMALLOC => "jemalloc stats.allocated",
                    protocol::HEAP_TCMALLOC => "tcmalloc generic.current_allocated_bytes",
                    _ => "",
                };
                self.attach = Some(trace::AttachFigures {
                    heap_in_use: (!source.is_empty()).then_some(heap_in_use),
                    heap_source: source.into(),
                    got_slots,
                });
            }
            (
                Message::Exec {
                    pid,
                    phase,
                    env,
                    path,
                    argv0,
                    preload,
                    ..
                },
                Some(i),
            ) => self.exec_message(i, pid, phase, env, path, argv0, preload),
            (Message::Stacks { .. }, Some(i)) => {
                let (Some(fd), Some((stacks, _))) = (fd, self.stacks.as_ref()) else {
                    return;
                };
                let (pid, exec_index) = (self.images[i].pid, self.summaries[i].exec_index);
                match stacks.arena(&fd, pid, exec_index) {
                    Ok(arena) => {
                        let stacks = stacks.clone();
                        self.images[i].attach_stacks(stacks, arena);
                    }
                    Err(e) => {
                        let pid = self.images[i].pid;
                        self.warn(format!("pid {pid}: cannot map its stack arena: {e}"));
                    }
                }
            }
            (Message::Stopped { reason }, Some(i)) => {
                let pid = self.images[i].pid;
                self.warn(format!("pid {pid}: tracing stopped: {reason}"));
            }
            _ => self.warn("ignored a message out of protocol order".into()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn exec_message(
        &mut self,
        i: ImageIndex,
        pid: u32,
        phase: u32,
        env: u32,
        path: String,
        argv0: String,
        preload: String,
    ) {
        let own = self.images[i].pid;
        if phase == protocol::EXEC_FAILED {
            if pid == own {
                self.images[i].exec = None;
            }
            self.execs.forget(pid);
            return;
        }
        let ann = Announced {
            pid,
            ppid: if pid == own {
                self.summaries[i].ppid
            } else {
                own
            },
            path,
            argv0,
            env,
            preload,
        };
        if pid == own && phase == protocol::EXEC_BEFORE {
            self.images[i].exec = Some(ann);
            return;
        }
        self.execs.forget(pid);
        if phase == protocol::EXEC_SPAWNED && self.said_hello(pid) {
            return; // the child's hello came first (another socket): traced
        }
        self.execs
            .announced(ann, own, phase == protocol::EXEC_SPAWNED);
    }

    /// Decides on the execs that happened: an image that hung up after announcing one, and the
    /// other processes announced. Each is traced (its hello arrives), or not traced, reported
    /// with the reason, as soon as /proc (or, once it is gone, the file) tells.
    fn check_execs(&mut self) {
        let Some(expected) = self.execs.expected().cloned() else {
            return;
        };
        for i in ImageIndex::all(self.images.len()) {
            let img = &self.images[i];
            if self.finished[i] || !img.hung_up || img.exec_verdict.is_some() {
                continue;
            }
            let Some(ann) = img.exec.clone() else {
                continue;
            };
            let verdict = match untraced::inspect_process(ann.pid, &expected) {
                Verdict::Gone => untraced::inspect_announced(&ann, &expected)
                    .map_or(Verdict::Traceable, Verdict::NotTraced),
                Verdict::NotYet => continue,
                v => v,
            };
            if let Verdict::NotTraced(reason) = &verdict {
                // What /proc shows may be a later exec of a program that was traced: its hello
                // (sent before that exec) finishes this image instead.
                self.catch_up();
                if self.finished[i] {
                    continue;
                }
                let exe = exe_of(ann.pid);
                self.not_traced(&ann, exe, reason.clone());
                self.images[i].start_round(sys::monotonic_ns());
                self.drain(i, true);
                self.images[i].exec = None;
                self.finish_image(i, EndReason::Exec);
            }
            // Traceable: its hello finishes this image (`hello`); should it end without one,
            // the verdict after the grace says so.
            self.images[i].exec_verdict = Some(verdict);
        }
        let decided = self.execs.decide();
        if !decided.is_empty() {
            // A program that connected and then exec'd one that cannot be traced: its hello
            // (sent before that exec) takes it off the list, and its own exec is reported.
            self.catch_up();
            for d in decided {
                if let Some(ann) = self.execs.take(d.pid) {
                    self.not_traced(&ann, d.exe, d.reason);
                }
            }
        }
    }

    /// Reads every connection made and message sent so far (before a verdict that a hello would
    /// change).
    fn catch_up(&mut self) {
        while let Ok(Some(sock)) = sys::accept(&self.listener) {
            self.conns.push(Conn { sock, image: None });
        }
        self.read_messages();
    }

    /// Whether process `pid` (this process, not an earlier one with its pid) has an image.
    fn said_hello(&self, pid: u32) -> bool {
        let ticks = crate::image::start_ticks(pid);
        self.images
            .iter()
            .any(|img| img.pid == pid && ticks.is_none_or(|t| t == img.start_ticks))
    }

    fn not_traced(&mut self, ann: &Announced, exe: Option<String>, reason: String) {
        let u = trace::Untraced {
            pid: ann.pid,
            ppid: ann.ppid,
            program: exe.unwrap_or_else(|| ann.path.clone()),
            argv0: ann.argv0.clone(),
            reason,
            unix_ns: crate::spawn::unix_ns(),
        };
        if let Some(w) = self.writer.as_mut() {
            w.untraced(&u);
        }
        self.untraced.push(u);
    }

    #[allow(clippy::too_many_arguments)]
    fn hello(
        &mut self,
        c: ConnIndex,
        pid: u32,
        ppid: u32,
        start_ticks: u64,
        mono0: u64,
        real_ns: u64,
        cmdline: Vec<String>,
        page_fd: &OwnedFd,
    ) {
        // Connected: traced, whatever was announced of it.
        self.execs.forget(pid);
        // A new image of a process we follow: it exec'd. Its previous image is complete.
        let successor_of: Vec<ImageIndex> = self
            .verdict_pending
            .iter()
            .map(|(i, _)| *i)
            .filter(|&i| self.images[i].pid == pid && self.images[i].start_ticks == start_ticks)
            .collect();
        for i in successor_of {
            self.verdict_pending.retain(|(j, _)| *j != i);
            self.finish_image(i, EndReason::Exec);
        }
        for i in ImageIndex::all(self.images.len()) {
            let img = &self.images[i];
            if !self.finished[i] && img.pid == pid && img.start_ticks == start_ticks {
                self.images[i].start_round(sys::monotonic_ns());
                self.drain(i, true);
                self.finish_image(i, EndReason::Exec);
            }
        }
        let exec_index = {
            let n = self.images_of.entry((pid, start_ticks)).or_insert(0);
            *n += 1;
            *n - 1
        };
        let info = ProcessInfo {
            pid,
            ppid,
            exec_index,
            cmdline,
            start_unix_ns: real_ns,
            truncated: false,
        };
        let stream = self.writer.as_mut().map_or(0, |w| w.begin_process(&info));
        let encoder = self
            .spare_encoders
            .pop()
            .unwrap_or_else(|| trace::ChunkEncoder::new(1));
        let chunk =
            ChunkBuilder::with_stacks(encoder, self.addresses, self.stacks.as_ref().map(|s| s.1));
        match Image::new(stream, pid, start_ticks, mono0, page_fd, chunk) {
            Ok(mut img) => {
                if self.leaks_pid == Some(pid) {
                    img.keep_exit_blocks();
                }
                if let (Some(m), Some(page)) = (&self.memory, img.counter_page()) {
                    m.watch(stream, pid, mono0, page);
                }
                self.conns[c].image = Some(ImageIndex(self.images.len()));
                self.images.push(img);
                self.finished.push(false);
                self.summaries.push(ProcessSummary {
                    pid,
                    ppid,
                    exec_index,
                    command: info.cmdline.first().cloned().unwrap_or_default(),
                    events: 0,
                    unrecorded: 0,
                    lost_in_flight: 0,
                    end: None,
                });
            }
            Err(e) => self.warn(format!("pid {pid}: cannot map its shared page: {e}")),
        }
    }

    fn output_marker(&mut self, label: String) {
        let now = sys::monotonic_ns();
        for i in ImageIndex::all(self.images.len()) {
            if self.finished[i] {
                continue;
            }
            let img = &mut self.images[i];
            let seq = img.counter_now();
            let t_ns = now.saturating_sub(img.mono0);
            img.add_marker(Marker {
                seq,
                t_ns,
                tid: 0,
                label: label.clone(),
            });
        }
        self.markers += 1;
    }

    fn drain(&mut self, i: ImageIndex, last: bool) -> u64 {
        self.recycle();
        let mut batches = Batches {
            spare: &mut self.spare,
            out: &mut self.sealed,
            chunk_records: self.chunk_records,
        };
        let moved = self.images[i].drain(last, &mut batches).records;
        self.hand_off();
        moved
    }

    /// Takes back the buffers of the batches the compressors are done with.
    fn recycle(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            let keep = w.in_flight() + 2;
            w.recycle(&mut self.spare, keep);
        }
    }

    /// Queues the stacks and modules learned since the last call for writing (before the events
    /// that name them, so a file cut short keeps them).
    fn write_stacks(&mut self) {
        let Some((stacks, _)) = self.stacks.as_ref() else {
            return;
        };
        stacks.scan_modules();
        let (first, new, modules) = stacks.take();
        if let Some(w) = self.writer.as_mut() {
            if !modules.is_empty() {
                w.modules(modules);
            }
            if !new.is_empty() {
                w.stacks(first, &new);
            }
        }
    }

    /// Queues the sealed batches for compression (in order), or recycles them when not writing.
    /// The stacks and modules learned since the last events went out precede them: gathered
    /// until then (and at `finish`), not written at every drain, because each STACKS chunk is
    /// its own zstd frame and stacks trickle in a few at a time (a cc1 compile wrote 639
    /// chunks of 12 stacks: 117 KB, against 57 KB for the same stacks in one frame).
    fn hand_off(&mut self) {
        if self.sealed.is_empty() {
            return;
        }
        self.write_stacks();
        for batch in std::mem::take(&mut self.sealed) {
            let unsent = match self.writer.as_mut() {
                Some(w) => w.write_events(batch),
                None => Some(batch),
            };
            if let Some(batch) = unsent {
                self.spare.push(batch.into_buffer());
            }
        }
    }

    /// Stops writing at the writer's first failure (checked every round and at the end).
    fn check_writer(&mut self) {
        if let Some(e) = self.writer.as_mut().and_then(Pipeline::failure) {
            self.write_failed(e);
        }
    }

    fn finish_image(&mut self, i: ImageIndex, reason: EndReason) {
        self.finished[i] = true;
        let img = &self.images[i];
        let (stream, records, pid, events) = (img.stream, img.records, img.pid, img.events);
        let (h, m, lost) = (img.holes, img.misplaced, img.ids_lost());
        let unrecorded = img.unrecorded();
        if unrecorded > 0 {
            self.warn(format!(
                "pid {pid}: {unrecorded} calls not recorded: made by signal handlers while the \
                 shim was recording on the same thread, with 32 such calls already waiting (or \
                 by a signal handler interrupting such a call)"
            ));
        }
        if h > 0 || m > 0 {
            self.warn(format!(
                "pid {pid}: {h} events lost in flight, {m} records out of place"
            ));
        }
        if lost > 0 {
            self.warn(format!(
                "pid {pid}: out of memory for the block-id map: {lost} blocks got no id, so \
                 their releases show as unmatched; raise the address-space limit (ulimit -v) \
                 or record with --addresses"
            ));
        }
        self.summaries[i].events = events;
        self.summaries[i].unrecorded = unrecorded;
        self.summaries[i].lost_in_flight = h;
        self.summaries[i].end = Some(reason);
        if let Some(m) = &self.memory {
            m.unwatch(stream);
        }
        self.write_memory(Some(stream));
        if let Some(w) = self.writer.as_mut() {
            w.end_process(stream, reason, records);
        }
        if self.leaks_pid == Some(pid) && reason != EndReason::Exec {
            let exec_index = self.summaries[i].exec_index;
            self.ended_blocks = self.images[i].take_exit_blocks().map(|b| (exec_index, b));
        }
        // Unmap its rings now: a long recording with many short processes must not pile up.
        if let Some(encoder) = self.images[i].release() {
            if self.spare_encoders.len() < 4 {
                self.spare_encoders.push(encoder);
            }
        }
    }

    /// Seals partial chunks and flushes the file so a crash leaves a readable prefix.
    pub fn flush(&mut self) {
        self.last_flush = Instant::now();
        self.recycle();
        let mut batches = Batches {
            spare: &mut self.spare,
            out: &mut self.sealed,
            chunk_records: self.chunk_records,
        };
        for (img, _) in self
            .images
            .iter_mut()
            .zip(&self.finished)
            .filter(|(_, f)| !**f)
        {
            img.seal(&mut batches);
        }
        self.hand_off();
        self.write_memory(None);
        if let Some(w) = self.writer.as_mut() {
            w.flush();
        }
        self.check_writer();
    }

    /// Queues the memory samples taken so far (of `stream` only, with `Some`) as MEMORY chunks,
    /// and their heap residency readings as RESIDENCY chunks.
    fn write_memory(&mut self, stream: Option<u32>) {
        let Some(m) = &self.memory else { return };
        for taken in m.take(stream) {
            if let Some(w) = self.writer.as_mut() {
                w.memory(taken.stream, taken.samples);
                if !taken.residency.is_empty() {
                    w.residency(taken.stream, taken.residency);
                }
            }
        }
    }

    /// The command is over: the last round for every image still open.
    pub fn abandon_remaining(&mut self) {
        self.check_execs();
        for (ann, reason) in self.execs.abandon() {
            let exe = exe_of(ann.pid);
            self.not_traced(&ann, exe, reason.into());
        }
        for (i, _) in std::mem::take(&mut self.verdict_pending) {
            match self.images[i].exec.take() {
                Some(ann) => {
                    self.not_traced(&ann, None, NO_HELLO.into());
                    self.finish_image(i, EndReason::Exec);
                }
                None => self.finish_image(i, EndReason::Lost),
            }
        }
        for i in ImageIndex::all(self.images.len()) {
            if !self.finished[i] {
                self.images[i].start_round(sys::monotonic_ns());
                self.drain(i, true);
                let reason = if self.images[i].hung_up && self.is_gone(i) {
                    self.images[i].said_end.unwrap_or(EndReason::Lost)
                } else {
                    EndReason::Abandoned
                };
                self.finish_image(i, reason);
            }
        }
    }

    /// Writes the trailer; returns the bytes written.
    pub fn finish(&mut self, trailer: &trace::Trailer) -> u64 {
        if let Some(m) = self.memory.as_mut() {
            m.stop();
        }
        self.write_memory(None);
        self.write_stacks();
        if let Some(bad) = self
            .stacks
            .as_ref()
            .map(|s| s.0.bad_refs())
            .filter(|&b| b > 0)
        {
            self.warn(format!(
                "{bad} records named no call stack the shim had stored (written without a stack)"
            ));
        }
        self.check_writer();
        if let Some(w) = self.writer.take() {
            let done = w.finish(Some(trailer.clone()));
            self.bytes = done.bytes;
            if let Some(e) = done.error.clone() {
                self.stopped(done, &e);
            }
        }
        self.bytes
    }

    fn write_failed(&mut self, e: String) {
        // Keep draining (the program must run on) but stop writing: its calls still go through
        // the rings and are dropped here.
        let Some(w) = self.writer.take() else { return };
        let done = w.finish(None);
        self.bytes = done.bytes;
        self.stopped(done, &e);
    }

    /// Writing stopped on error `e`: the counts become what the file holds, and one warning
    /// says so.
    fn stopped(&mut self, done: Finished, e: &str) {
        let events: u64 = done.events.iter().sum();
        self.written = Some(done.events);
        self.warn(format!(
            "writing the trace failed ({e}): it holds the first {events} events ({}, \
             readable); the command ran on, its later calls not recorded",
            trace::human_bytes(self.bytes)
        ));
    }

    /// Events of image `i` in the file: all it produced, unless writing failed.
    pub fn events_written(&self, i: usize) -> u64 {
        let img = &self.images[ImageIndex(i)];
        match &self.written {
            None => img.events,
            Some(w) => w.get(img.stream as usize).copied().unwrap_or(0),
        }
    }

    fn warn(&mut self, w: String) {
        if !self.warnings.contains(&w) {
            if let Some(writer) = self.writer.as_mut() {
                writer.note(&w);
            }
            self.warnings.push(w);
        }
    }
}
