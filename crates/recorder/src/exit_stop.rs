//! `record --leaks`: holds the command at its exit, before its memory is gone, with ptrace.
//!
//! The command asks to be traced (`PTRACE_TRACEME`, in the child before exec: a tracee of its
//! parent, which Yama's default scope allows), so it stops once after the exec, before any of its
//! code runs; we set `PTRACE_O_TRACEEXIT` (a stop in each thread's exit, the address space still
//! whole) and `PTRACE_O_TRACECLONE` (its threads are traced too, so their registers can be read
//! at the exit). Forks are not followed. Every other stop is passed on at once: a signal is
//! delivered as it would have been. When the recorder dies, the kernel detaches the command,
//! which runs on (no `PTRACE_O_EXITKILL`).
//!
//! Only the thread that spawned the command may make these calls: the recorder's main loop.
use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What `poll` saw.
pub enum ExitEvent {
    /// A thread of the command (its main thread, another killed with the process, or any once
    /// the main thread ended alone) is held in its exit: `hold_threads`, scan if the process is
    /// exiting, then `release`.
    AtExit,
    /// The command ended (a wait status), without a stop at its exit if none came before.
    Ended(i32),
}

/// The tracer of the command's threads.
pub struct ExitStop {
    leader: libc::pid_t,
    /// Threads we trace (the leader among them).
    threads: BTreeSet<libc::pid_t>,
    /// Threads whose first stop (the SIGSTOP a traced clone starts with) is still to come.
    fresh: BTreeSet<libc::pid_t>,
    /// Threads held in their exit stop, to let go in `release`.
    held: Vec<libc::pid_t>,
    /// When a stop was last served (`busy`).
    last_stop: Instant,
    /// Execs seen since the start: the image at the exit is the command's image of this index.
    pub execs: u32,
    /// The main thread ended alone (`pthread_exit`); any thread's exit stop may be the process's.
    leader_left: bool,
    /// The thread whose exit stop made `poll` say `AtExit`.
    exiting: Option<libc::pid_t>,
}

/// After a stop, how long the loop polls for the next without sleeping: a thread's creation
/// makes three stops in a row (the clone, the new thread's first stop, its exit), each waiting
/// for the loop otherwise (2,000 threads created and joined: 0.67 s plain, 5.6 s with --leaks
/// sleeping 1 ms between polls).
const BUSY_AFTER_STOP: Duration = Duration::from_millis(10);

/// How long the scan waits for another thread to stop in its exit (`ExitStop::exit_of`): a
/// thread the exit killed stops at once, or keeps SIGKILL pending until it does
/// (`EXIT_STOP_WAIT`, then it is not scanned); one that does neither for `EXIT_STOP_SOON` runs on:
/// the exit was its main thread's alone.
const EXIT_STOP_SOON: Duration = Duration::from_millis(200);
const EXIT_STOP_WAIT: Duration = Duration::from_secs(2);

/// Whether thread `tid`, held in its exit stop, ends alone: it is in the `exit` system call
/// (glibc's `pthread_exit`, or a thread's return), not `exit_group` nor killed by a signal or an
/// exec, which take every other thread. Unknown (true: the others are watched) where the
/// registers do not say it.
fn exits_alone(tid: libc::pid_t) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // user_regs_struct's orig_rax: the system call the thread is in, or -1.
        const ORIG_RAX: usize = 15 * 8;
        // SAFETY: PTRACE_PEEKUSER reads a word of the stopped thread's registers; errno tells a
        // failure from a word of -1.
        let word = unsafe {
            *libc::__errno_location() = 0;
            libc::ptrace(
                libc::PTRACE_PEEKUSER,
                tid,
                ORIG_RAX as *mut libc::c_void,
                std::ptr::null_mut::<libc::c_void>(),
            )
        };
        let failed = word == -1 && io::Error::last_os_error().raw_os_error() != Some(0);
        failed || word == libc::SYS_exit
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = tid;
        true
    }
}

/// Whether thread `tid` is in an exec, which kills the process's other threads but leaves it
/// running (the exec waits until they are gone).
fn in_exec(leader: libc::pid_t, tid: libc::pid_t) -> bool {
    let path = format!("/proc/{leader}/task/{tid}/syscall");
    let number = std::fs::read_to_string(path).ok().and_then(|s| {
        let first = s.split_whitespace().next()?;
        first.parse::<libc::c_long>().ok()
    });
    matches!(number, Some(n) if n == libc::SYS_execve || n == libc::SYS_execveat)
}

/// What became of another thread at an exit stop (`ExitStop::exit_of`).
enum ThreadExit {
    /// Held in its exit stop.
    Stopped,
    /// Being killed by the exit, but not stopped in time: not scanned.
    Slow,
    /// Neither: the exit was not the process's.
    RunsOn,
    /// Ended already.
    Gone,
}

/// A pipe whose write end the child inherits until its exec: the child writes whether
/// `PTRACE_TRACEME` worked.
pub struct TraceMeReport {
    read: OwnedFd,
    write: OwnedFd,
}

impl TraceMeReport {
    pub fn new() -> io::Result<TraceMeReport> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both were just opened and are ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(TraceMeReport { read, write })
    }

    /// For the child, between fork and exec: ask to be traced, say whether it worked. Only
    /// async-signal-safe calls.
    pub fn child_side(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let fd = self.write.as_raw_fd();
        move || {
            let null = std::ptr::null_mut::<libc::c_void>();
            // SAFETY: plain system calls on our own process and an open descriptor.
            unsafe {
                let ok: u8 = u8::from(libc::ptrace(libc::PTRACE_TRACEME, 0, null, null) == 0);
                libc::write(fd, (&ok as *const u8).cast(), 1);
            }
            Ok(())
        }
    }

    /// After the spawn: whether the child is traced (`Err` says why not).
    pub fn outcome(self) -> Result<(), String> {
        drop(self.write);
        let mut byte = [0u8; 1];
        let mut file = std::fs::File::from(self.read);
        match io::Read::read(&mut file, &mut byte) {
            Ok(1) if byte[0] == 1 => Ok(()),
            _ => Err(
                "the kernel refused ptrace (PTRACE_TRACEME: a Yama ptrace_scope of 3, a \
                      seccomp filter or a container's policy)"
                    .into(),
            ),
        }
    }
}

fn ptrace(request: libc::c_uint, tid: libc::pid_t, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: requests that take an integer `data` (or none) and write nowhere of ours.
    let r = unsafe {
        libc::ptrace(
            request,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            data as *mut libc::c_void,
        )
    };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn event_message(tid: libc::pid_t) -> u64 {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: PTRACE_GETEVENTMSG writes one unsigned long at `data`.
    unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            &mut msg as *mut libc::c_ulong,
        );
    }
    msg as u64
}

/// A stop that is not a signal to deliver: group-stops have no siginfo.
fn is_group_stop(tid: libc::pid_t) -> bool {
    // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t at `data`.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            &mut info as *mut libc::siginfo_t,
        )
    };
    r == -1
}

fn wait_nohang(tid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid writes the status it is given.
    let r = unsafe { libc::waitpid(tid, &mut status, libc::WNOHANG | libc::__WALL) };
    (r == tid).then_some(status)
}

impl ExitStop {
    /// Takes over the command `pid`, which asked to be traced: waits for its stop after the
    /// exec, sets the options and lets it run.
    pub fn begin(pid: u32) -> io::Result<ExitStop> {
        let leader = pid as libc::pid_t;
        let mut status = 0;
        // SAFETY: waitpid writes the status it is given.
        if unsafe { libc::waitpid(leader, &mut status, libc::__WALL) } != leader {
            return Err(io::Error::last_os_error());
        }
        if !libc::WIFSTOPPED(status) {
            return Err(io::Error::other("the command ended before it started"));
        }
        let options =
            libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_TRACEEXEC;
        ptrace(libc::PTRACE_SETOPTIONS, leader, options as usize)?;
        ptrace(libc::PTRACE_CONT, leader, 0)?;
        Ok(ExitStop {
            leader,
            threads: BTreeSet::from([leader]),
            fresh: BTreeSet::new(),
            held: Vec::new(),
            last_stop: Instant::now(),
            execs: 0,
            leader_left: false,
            exiting: None,
        })
    }

    /// Serves every pending stop without blocking; says when the command reached its exit or
    /// ended.
    pub fn poll(&mut self) -> Option<ExitEvent> {
        let tids: Vec<_> = self.threads.iter().copied().collect();
        for tid in tids {
            while let Some(status) = wait_nohang(tid) {
                if let Some(event) = self.on_status(tid, status) {
                    return Some(event);
                }
                if !self.threads.contains(&tid) {
                    break;
                }
            }
        }
        None
    }

    /// A stop was served lately: more may follow at once (`BUSY_AFTER_STOP`).
    pub fn busy(&self) -> bool {
        self.last_stop.elapsed() < BUSY_AFTER_STOP
    }

    fn on_status(&mut self, tid: libc::pid_t, status: i32) -> Option<ExitEvent> {
        self.last_stop = Instant::now();
        if !libc::WIFSTOPPED(status) {
            self.threads.remove(&tid);
            return (tid == self.leader).then_some(ExitEvent::Ended(status));
        }
        match status >> 16 {
            libc::PTRACE_EVENT_EXIT if tid == self.leader || self.leader_left => {
                self.held.push(tid);
                self.exiting = Some(tid);
                return Some(ExitEvent::AtExit);
            }
            // Another thread killed by the process's exit (an `exit_group` of the main thread, a
            // fatal signal) may stop before the main thread does: held too, or it would be gone
            // when the main thread's stop comes. `hold_threads` tells an exec's kill (which
            // leaves the process running) and lets it go.
            libc::PTRACE_EVENT_EXIT if !exits_alone(tid) => {
                self.held.push(tid);
                self.exiting = Some(tid);
                return Some(ExitEvent::AtExit);
            }
            libc::PTRACE_EVENT_CLONE => {
                let new = event_message(tid) as libc::pid_t;
                if self.threads.insert(new) {
                    self.fresh.insert(new);
                }
            }
            libc::PTRACE_EVENT_EXEC => {
                // The other threads are gone; the exec'ing one now has the leader's id.
                self.threads = BTreeSet::from([self.leader]);
                self.fresh.clear();
                self.execs += 1;
                self.leader_left = false;
            }
            0 => {
                let signal = libc::WSTOPSIG(status);
                let first = signal == libc::SIGSTOP && self.fresh.remove(&tid);
                if !first && !is_group_stop(tid) {
                    let _ = ptrace(libc::PTRACE_CONT, tid, signal as usize);
                    return None;
                }
            }
            _ => {}
        }
        let _ = ptrace(libc::PTRACE_CONT, tid, 0);
        None
    }

    /// At an exit stop: when the whole process is exiting (every other thread stops in its exit
    /// shortly, or is being killed), the registers of every thread held, and how many were
    /// being killed but did not stop in time (not scanned). `None` when another thread runs on:
    /// only the main thread ended (`pthread_exit`), or an exec killed the first thread; the
    /// check waits for the next exit stop, and the threads held are let go.
    pub fn hold_threads(&mut self) -> Option<(Vec<reachability::Thread>, usize)> {
        let first = self.exiting.take().unwrap_or(self.leader);
        let mut threads: Vec<_> = reachability::read_thread(first as u32)
            .into_iter()
            .collect();
        let alone = exits_alone(first);
        let others: Vec<_> = self
            .threads
            .iter()
            .copied()
            .filter(|&t| t != first && !(self.leader_left && t == self.leader))
            .collect();
        let (mut missed, mut runs_on) = (0, false);
        for tid in others {
            match self.exit_of(tid, alone) {
                ThreadExit::Stopped => {
                    self.held.push(tid);
                    threads.extend(reachability::read_thread(tid as u32));
                }
                ThreadExit::Slow => missed += 1,
                ThreadExit::RunsOn => runs_on = true,
                ThreadExit::Gone => {}
            }
        }
        if runs_on {
            if first == self.leader && alone {
                self.leader_left = true;
            }
            self.release();
            return None;
        }
        Some((threads, missed))
    }

    /// Whether thread `tid` is exiting with the process: a thread the exit kills stops at once,
    /// or has SIGKILL pending until it does (for `EXIT_STOP_WAIT` at most); one that, for
    /// `EXIT_STOP_SOON`, neither stops nor has SIGKILL pending runs on (a loaded machine may
    /// leave a dying thread for a while between taking its SIGKILL and its stop: it is looked at
    /// again each millisecond), and so does one in an exec (which killed the first thread).
    /// `may_run_on` is false when the first thread's exit takes the whole process (exit_group, a
    /// fatal signal): then every other thread is dying, however long the machine's load keeps it
    /// between taking its SIGKILL and its stop, or is the one that called exit_group (no SIGKILL
    /// pending: it stops on its own).
    fn exit_of(&mut self, tid: libc::pid_t, may_run_on: bool) -> ThreadExit {
        let start = Instant::now();
        let mut dying = !may_run_on;
        loop {
            if self.wait_for_exit_stop(tid, Duration::from_millis(1)) {
                return ThreadExit::Stopped;
            }
            if !self.threads.contains(&tid) {
                return ThreadExit::Gone;
            }
            if in_exec(self.leader, tid) {
                return ThreadExit::RunsOn;
            }
            dying = dying || self.being_killed(tid);
            let waited = start.elapsed();
            if !dying && waited >= EXIT_STOP_SOON {
                return ThreadExit::RunsOn;
            }
            if dying && waited >= EXIT_STOP_WAIT {
                return ThreadExit::Slow;
            }
        }
    }

    /// Serves `tid`'s stops until it stops in its exit (true) or `wait` passed.
    fn wait_for_exit_stop(&mut self, tid: libc::pid_t, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && self.threads.contains(&tid) {
            match wait_nohang(tid) {
                Some(s) if libc::WIFSTOPPED(s) && s >> 16 == libc::PTRACE_EVENT_EXIT => {
                    return true
                }
                Some(s) => {
                    let _ = self.on_status(tid, s);
                }
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        false
    }

    /// Whether thread `tid` has SIGKILL pending: the exit of its thread group kills it so.
    fn being_killed(&self, tid: libc::pid_t) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/task/{tid}/status", self.leader));
        let pending = status.ok().and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("SigPnd:"))?
                .trim()
                .to_string();
            u64::from_str_radix(&hex, 16).ok()
        });
        // Gone already, or its pending set says so.
        pending.is_none_or(|p| p & (1 << (libc::SIGKILL - 1)) != 0)
    }

    /// Lets the held threads finish their exit.
    pub fn release(&mut self) {
        for tid in self.held.drain(..) {
            let _ = ptrace(libc::PTRACE_CONT, tid, 0);
        }
    }
}
