//! The injection itself, on x86_64: seize every thread, wait for a safe point, borrow that thread
//! for two calls (dlopen, the library's entry), give it back, detach.
//!
//! The safe points (docs/attach.md says why each is safe):
//! - the first instruction of the serving allocator's `malloc` or `free`, caught with a hardware
//!   breakpoint (debug registers DR0-DR3, set per thread through PTRACE_POKEUSER): nothing in the
//!   process's memory is changed, a thread we did not seize never traps, and at a function's entry
//!   the ABI leaves every vector register to the callee, so saving the general registers is enough;
//! - when no thread reaches one within the wait (an idle program): a thread blocked in a system
//!   call of the C library that no allocator makes while holding its lock (read, poll, nanosleep,
//!   ...); the call is restarted after we give the thread back, as after any signal.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::elf::function_address;
use crate::error::AttachError;
use crate::process::{parse_maps, Module, Target};
use crate::{Argument, EntryCall, Injection, SafePoint};

type Regs = libc::user_regs_struct;

const RTLD_NOW: u64 = 2;
/// glibc's private flag for `__libc_dlopen_mode` (before 2.34 dlopen lived in libdl).
const RTLD_DLOPEN: u64 = 0x8000_0000;
/// Below a function's stack pointer: the red zone the interrupted code may use, and a margin.
const RED_ZONE: u64 = 256;
/// The return address of our calls: returning there faults at address 0, which we catch.
const RETURN_TRAP: u64 = 0;
/// si_code of a hardware breakpoint's SIGTRAP.
const TRAP_HWBKPT: i32 = 4;
/// EFLAGS' resume flag: the next instruction's breakpoint is not taken.
const RESUME_FLAG: u64 = 1 << 16;
/// Threads of alloclens's own in the process (a library loaded by an earlier attach runs one):
/// never borrowed, never stopped.
const OWN_THREAD_PREFIX: &str = "alloclens";

/// System calls no allocator makes while holding a lock of its own, and that a program blocks in
/// when idle: a thread blocked in one, inside the C library's wrapper, is borrowed safely.
const SAFE_SYSCALLS: &[i64] = &[
    0,   // read
    1,   // write
    7,   // poll
    19,  // readv
    23,  // select
    34,  // pause
    35,  // nanosleep
    43,  // accept
    45,  // recvfrom
    47,  // recvmsg
    61,  // wait4
    128, // rt_sigtimedwait
    130, // rt_sigsuspend
    // restart_syscall: a sleep with a timeout that a stop interrupted goes on as this one
    // (nanosleep, poll, select, a timed futex wait). No allocator waits for its locks with a
    // timeout, so none is inside an allocator.
    219, 230, // clock_nanosleep
    232, // epoll_wait
    247, // waitid
    270, // pselect6
    271, // ppoll
    281, // epoll_pwait
    288, // accept4
    441, // epoll_pwait2
];

/// How a thread stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// PTRACE_INTERRUPT's stop (or another ptrace event stop).
    Event,
    /// A signal on its way to the thread (SIGTRAP of our breakpoint included).
    Signal(i32),
    /// Job control stopped the whole process (SIGSTOP from someone else).
    Group,
    /// At one of our breakpoints (its SIGTRAP is ours, never delivered).
    Breakpoint,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Stopped(Stop),
    Running,
    Gone,
}

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// SAFETY of every ptrace call below: the kernel checks the tid and our rights; the pointers are
/// to live locals of the right type.
fn ptrace(request: libc::c_uint, tid: u32, addr: u64, data: u64) -> std::io::Result<i64> {
    // SAFETY: see above; errno is reset first so that PEEK requests can be told from errors.
    unsafe {
        *libc::__errno_location() = 0;
        let r = libc::ptrace(
            request,
            tid as libc::pid_t,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        );
        if r == -1 && *libc::__errno_location() != 0 {
            return Err(errno());
        }
        Ok(r)
    }
}

fn get_regs(tid: u32) -> std::io::Result<Regs> {
    // SAFETY: user_regs_struct is plain data; the kernel fills it.
    let mut regs: Regs = unsafe { std::mem::zeroed() };
    ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut Regs as u64)?;
    Ok(regs)
}

fn set_regs(tid: u32, regs: &Regs) -> std::io::Result<()> {
    ptrace(libc::PTRACE_SETREGS, tid, 0, regs as *const Regs as u64).map(drop)
}

/// Debug register `n` (0-7) of a stopped thread.
fn set_debug_register(tid: u32, n: usize, value: u64) -> std::io::Result<()> {
    let offset = std::mem::offset_of!(libc::user, u_debugreg) + n * 8;
    ptrace(libc::PTRACE_POKEUSER, tid, offset as u64, value).map(drop)
}

/// The breakpoints of `addresses` (at most 4) on a stopped thread, or none (empty).
fn arm(tid: u32, addresses: &[u64]) -> std::io::Result<()> {
    // DR7 first off, so that no half-set combination is ever enabled.
    set_debug_register(tid, 7, 0)?;
    let mut dr7 = 0u64;
    for (i, &a) in addresses.iter().take(4).enumerate() {
        set_debug_register(tid, i, a)?;
        // Local enable; condition 00 (execution) and length 00, as execution breakpoints need.
        dr7 |= 1 << (2 * i);
    }
    if dr7 != 0 {
        set_debug_register(tid, 7, dr7)?;
    }
    Ok(())
}

fn wait(tid: u32, block: bool) -> Wait {
    let mut status = 0;
    let flags = libc::__WALL | if block { 0 } else { libc::WNOHANG };
    // SAFETY: waitpid on a tid we trace; status is a live local.
    let r = unsafe { libc::waitpid(tid as libc::pid_t, &mut status, flags) };
    if r == 0 {
        return Wait::Running;
    }
    if r < 0 || libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
        return Wait::Gone;
    }
    let sig = libc::WSTOPSIG(status);
    if status >> 16 == libc::PTRACE_EVENT_STOP {
        return Wait::Stopped(
            if matches!(
                sig,
                libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
            ) {
                Stop::Group
            } else {
                Stop::Event
            },
        );
    }
    if status >> 16 != 0 {
        return Wait::Stopped(Stop::Event);
    }
    Wait::Stopped(Stop::Signal(sig))
}

/// One seized thread.
#[derive(Debug)]
struct Thread {
    tid: u32,
    /// Stopped by us (or by a signal we hold), with the signal it still has to get.
    stopped: Option<Stop>,
}

impl Thread {
    /// The signal it must get when it runs again: one we held at its stop.
    fn pending(&self) -> u64 {
        match self.stopped {
            Some(Stop::Signal(sig)) => sig as u64,
            _ => 0,
        }
    }
}

/// Every thread of the process, seized; the detach of all of them on drop, whatever happened.
struct Session {
    pid: u32,
    threads: Vec<Thread>,
    mem: File,
    /// The armed breakpoints' addresses: a SIGTRAP there is ours.
    breakpoints: Vec<u64>,
}

impl Session {
    fn seize(target: &Target) -> Result<Session, AttachError> {
        let pid = target.pid;
        let mem = File::options()
            .read(true)
            .write(true)
            .open(target.proc_dir.join("mem"))
            .map_err(|e| refused_at(pid, "its memory", e))?;
        let mut session = Session {
            pid,
            threads: Vec::new(),
            mem,
            breakpoints: Vec::new(),
        };
        // Threads started while we seize are found by the next listing; ones started after the
        // last one are not seized, and never trap (debug registers are per thread, not inherited).
        for _ in 0..3 {
            let mut new = 0;
            for tid in list_threads(pid)? {
                if session.threads.iter().any(|t| t.tid == tid) {
                    continue;
                }
                match ptrace(libc::PTRACE_SEIZE, tid, 0, 0) {
                    Ok(_) => {
                        session.threads.push(Thread { tid, stopped: None });
                        new += 1;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        return Err(refused_at(pid, &format!("PTRACE_SEIZE of thread {tid}"), e))
                    }
                }
            }
            if new == 0 {
                break;
            }
        }
        if session.threads.is_empty() {
            return Err(AttachError::Exited(pid));
        }
        Ok(session)
    }

    /// Stops thread `i` (no-op when stopped); false when it is gone. It waits however long the
    /// thread takes (one in uninterruptible sleep stops when its system call ends): a thread
    /// forgotten while it stops would stay stopped, or armed.
    fn stop(&mut self, i: usize) -> bool {
        if self.threads[i].stopped.is_some() {
            return true;
        }
        let tid = self.threads[i].tid;
        if ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).is_err() {
            return false;
        }
        let stop = loop {
            match wait(tid, true) {
                Wait::Stopped(stop) => break Some(stop),
                Wait::Gone => break None,
                Wait::Running => {}
            }
        };
        match stop {
            Some(stop) => {
                self.threads[i].stopped = Some(self.classify(tid, stop));
                true
            }
            None => false,
        }
    }

    /// A SIGTRAP at one of our breakpoints is ours; any other signal is the program's.
    fn classify(&self, tid: u32, stop: Stop) -> Stop {
        if stop == Stop::Signal(libc::SIGTRAP)
            && get_regs(tid).is_ok_and(|r| self.breakpoints.contains(&r.rip))
        {
            return Stop::Breakpoint;
        }
        stop
    }

    /// Lets stopped thread `i` run on, with the signal it was stopped with; a thread at one of
    /// our breakpoints steps over it.
    fn resume(&mut self, i: usize) {
        let t = &mut self.threads[i];
        if t.stopped.is_none() {
            return;
        }
        if t.stopped == Some(Stop::Breakpoint) {
            if let Ok(mut regs) = get_regs(t.tid) {
                regs.eflags |= RESUME_FLAG;
                let _ = set_regs(t.tid, &regs);
            }
        }
        let _ = ptrace(libc::PTRACE_CONT, t.tid, 0, t.pending());
        t.stopped = None;
    }

    /// Disarms and detaches thread `i` (stopping it first), giving it the signal it holds: a
    /// thread left armed and untraced would die of its next breakpoint, and so would one with a
    /// breakpoint's SIGTRAP still queued ([`Session::drain_breakpoint_trap`]).
    fn release(&mut self, i: usize) {
        if self.stop(i) {
            let tid = self.threads[i].tid;
            let _ = arm(tid, &[]);
            if self.drain_breakpoint_trap(i) {
                let t = &self.threads[i];
                let _ = ptrace(libc::PTRACE_DETACH, t.tid, 0, t.pending());
            }
        }
        self.threads[i].stopped = None;
        self.threads[i].tid = 0;
    }

    /// A thread can hit a breakpoint just as PTRACE_INTERRUPT stops it: the kernel reports the
    /// interrupt first and keeps the breakpoint's SIGTRAP queued, which would kill the process
    /// once the thread is no longer traced. While SIGTRAP is pending for stopped thread `i`, it is
    /// let run into that signal's stop, and a breakpoint's trap is dropped (a SIGTRAP of the
    /// program's own is kept for it). False when the thread is gone.
    fn drain_breakpoint_trap(&mut self, i: usize) -> bool {
        let tid = self.threads[i].tid;
        for _ in 0..8 {
            if !sigtrap_pending(self.pid, tid) {
                return true;
            }
            let held = self.threads[i].pending();
            if ptrace(libc::PTRACE_CONT, tid, 0, held).is_err() {
                return false;
            }
            let stop = loop {
                match wait(tid, true) {
                    Wait::Stopped(stop) => break stop,
                    Wait::Gone => return false,
                    Wait::Running => {}
                }
            };
            self.threads[i].stopped = Some(
                if stop == Stop::Signal(libc::SIGTRAP) && from_breakpoint(tid) {
                    Stop::Event
                } else {
                    stop
                },
            );
        }
        true
    }

    fn alive(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.threads.len()).filter(|&i| self.threads[i].tid != 0)
    }

    fn write(&self, address: u64, bytes: &[u8]) -> Result<(), AttachError> {
        self.mem
            .write_all_at(bytes, address)
            .map_err(|source| AttachError::Read {
                pid: self.pid,
                what: format!("memory at {address:#x}"),
                source,
            })
    }

    fn read_c_string(&self, address: u64) -> String {
        let mut buf = [0u8; 512];
        let n = self.mem.read_at(&mut buf, address).unwrap_or(0);
        let end = buf[..n].iter().position(|&b| b == 0).unwrap_or(n);
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }

    fn read_u64(&self, address: u64) -> Option<u64> {
        let mut buf = [0u8; 8];
        self.mem.read_exact_at(&mut buf, address).ok()?;
        Some(u64::from_le_bytes(buf))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for i in 0..self.threads.len() {
            if self.threads[i].tid != 0 {
                self.release(i);
            }
        }
    }
}

/// Whether SIGTRAP is queued for thread `tid` (SigPnd of its status, bit 5).
fn sigtrap_pending(pid: u32, tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("SigPnd:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (libc::SIGTRAP - 1)) != 0)
    })
}

/// Whether the SIGTRAP thread `tid` is stopped with came from a hardware breakpoint.
fn from_breakpoint(tid: u32) -> bool {
    // SAFETY: siginfo_t is plain data; the kernel fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    ptrace(
        libc::PTRACE_GETSIGINFO,
        tid,
        0,
        &mut info as *mut libc::siginfo_t as u64,
    )
    .is_ok()
        && info.si_code == TRAP_HWBKPT
}

/// [`refused`], the refusal saying what was refused.
fn refused_at(pid: u32, what: &str, e: std::io::Error) -> AttachError {
    match refused(pid, e) {
        AttachError::Ptrace { pid, detail } => AttachError::Ptrace {
            pid,
            detail: format!("{what}: {detail}"),
        },
        other => other,
    }
}

fn refused(pid: u32, e: std::io::Error) -> AttachError {
    match e.raw_os_error() {
        Some(libc::ESRCH) | Some(libc::ENOENT) => AttachError::Exited(pid),
        _ => AttachError::Ptrace {
            pid,
            detail: e.to_string(),
        },
    }
}

fn list_threads(pid: u32) -> Result<Vec<u32>, AttachError> {
    let dir =
        std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|_| AttachError::Exited(pid))?;
    // A thread that has exited (a main thread after pthread_exit stays as a zombie while the
    // others run) never stops again: it is not seized; nor is one of alloclens's own (an earlier
    // attach's agent thread, which may hold the agent's lock at a malloc entry).
    let mut tids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('Z'))
            })
        })
        .filter(|tid| {
            !std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.starts_with(OWN_THREAD_PREFIX))
        })
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// The functions whose entries are safe points: `malloc` and `free` of every module that defines
/// them among the program, the allocators it may have preloaded, and the C library (at most four:
/// the debug registers). The allocator that serves the program comes first in the global scope,
/// and its entries are the ones that trap.
fn entry_breakpoints(target: &Target) -> Vec<(u64, String)> {
    let exe = std::fs::read_link(target.proc_dir.join("exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let mut candidates: Vec<&Module> = target
        .modules
        .iter()
        .filter(|m| {
            let name = m.file_name();
            name.contains("malloc") && !name.starts_with("libc.")
        })
        .collect();
    candidates.extend(target.modules.iter().filter(|m| m.path == exe));
    candidates.extend(target.libc());
    let mut found = Vec::new();
    for m in candidates {
        let Ok(image) = target.read_module(m) else {
            continue;
        };
        for function in ["malloc", "free"] {
            if let Some(a) = function_address(&image, m.base, function) {
                found.push((a, format!("{function} ({})", m.file_name())));
            }
        }
    }
    found.truncate(4);
    found
}

/// The call ABI on x86_64: integer arguments in rdi, rsi, rdx, rcx, r8, r9; strings copied below
/// the stack.
fn call(
    session: &Session,
    tid: u32,
    saved: &Regs,
    function: u64,
    arguments: &[Argument],
    held: &mut Vec<i32>,
) -> Result<u64, AttachError> {
    let pid = session.pid;
    let mut sp = saved.rsp - RED_ZONE;
    debug_assert!(arguments.len() <= 6, "an entry takes six arguments at most");
    let mut values = Vec::with_capacity(arguments.len());
    for a in arguments {
        values.push(match a {
            Argument::Int(v) => *v,
            Argument::Str(s) => {
                let mut bytes = s.as_bytes().to_vec();
                bytes.push(0);
                sp -= bytes.len() as u64;
                session.write(sp, &bytes)?;
                sp
            }
        });
    }
    // At a function's first instruction the stack pointer is 8 below a 16-byte boundary: the
    // return address has just been pushed.
    sp = (sp & !0xf) - 8;
    session.write(sp, &RETURN_TRAP.to_le_bytes())?;
    let mut regs = *saved;
    regs.rsp = sp;
    regs.rip = function;
    regs.rax = 0;
    // Not in a system call any more: the kernel must not restart one with these registers.
    regs.orig_rax = u64::MAX;
    let slots = [
        &mut regs.rdi,
        &mut regs.rsi,
        &mut regs.rdx,
        &mut regs.rcx,
        &mut regs.r8,
        &mut regs.r9,
    ];
    for (slot, v) in slots.into_iter().zip(values) {
        *slot = v;
    }
    set_regs(tid, &regs).map_err(|e| refused(pid, e))?;
    ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|e| refused(pid, e))?;
    loop {
        match wait(tid, true) {
            Wait::Gone => return Err(AttachError::Exited(pid)),
            Wait::Running => continue,
            Wait::Stopped(Stop::Signal(sig)) => {
                let now = get_regs(tid).map_err(|e| refused(pid, e))?;
                if sig == libc::SIGSEGV && now.rip == RETURN_TRAP {
                    return Ok(now.rax);
                }
                if matches!(
                    sig,
                    libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE
                ) {
                    return Err(AttachError::LoadFailed {
                        pid,
                        library: String::new(),
                        detail: format!("signal {sig} at {:#x} during the call", now.rip),
                    });
                }
                // Another signal for this thread: held until it is given back.
                if !held.contains(&sig) {
                    held.push(sig);
                }
                ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|e| refused(pid, e))?;
            }
            Wait::Stopped(_) => {
                ptrace(libc::PTRACE_CONT, tid, 0, 0).map_err(|e| refused(pid, e))?;
            }
        }
    }
}

/// Waits for a thread at an allocator entry (breakpoints armed in every thread); when none comes
/// within `wait`, stops every thread and takes one blocked in a safe system call. Returns the
/// index of the chosen thread, stopped, and where it was.
fn safe_point(
    session: &mut Session,
    target: &Target,
    breakpoints: &[(u64, String)],
    wait_for: Duration,
) -> Result<(usize, SafePoint), AttachError> {
    let pid = target.pid;
    let addresses: Vec<u64> = breakpoints.iter().map(|b| b.0).collect();
    session.breakpoints = addresses.clone();
    let loader_code = |a: u64| target.loader().is_some_and(|m| m.contains_code(a));
    for i in session.alive().collect::<Vec<_>>() {
        let tid = session.threads[i].tid;
        if !session.stop(i) {
            session.threads[i].tid = 0;
            continue;
        }
        if let Err(e) = arm(tid, &addresses) {
            return Err(refused(pid, e));
        }
        session.resume(i);
    }
    let deadline = Instant::now() + wait_for;
    while Instant::now() < deadline {
        let mut idle = true;
        for i in session.alive().collect::<Vec<_>>() {
            let tid = session.threads[i].tid;
            match wait(tid, false) {
                Wait::Running => continue,
                Wait::Gone => {
                    session.threads[i].tid = 0;
                    continue;
                }
                Wait::Stopped(stop) => {
                    idle = false;
                    let stop = session.classify(tid, stop);
                    session.threads[i].stopped = Some(stop);
                    if stop == Stop::Group {
                        return Err(AttachError::Stopped(pid));
                    }
                    let regs = get_regs(tid).map_err(|e| refused(pid, e))?;
                    let at = breakpoints.iter().find(|b| b.0 == regs.rip);
                    match (stop, at) {
                        (Stop::Breakpoint, Some((_, function))) => {
                            // Called from the dynamic loader, the thread may be inside dlopen:
                            // not a point to call dlopen from.
                            let caller = session.read_u64(regs.rsp).unwrap_or(0);
                            if !loader_code(caller) {
                                return Ok((
                                    i,
                                    SafePoint::AllocatorEntry {
                                        tid,
                                        function: function.clone(),
                                    },
                                ));
                            }
                            session.resume(i);
                        }
                        _ => session.resume(i),
                    }
                }
            }
        }
        if session.alive().next().is_none() {
            return Err(AttachError::Exited(pid));
        }
        if idle {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    // Nobody called the allocator: stop everyone and look for a thread blocked in a safe call.
    let libc_code = |a: u64| target.libc().is_some_and(|m| m.contains_code(a));
    let mut choice = None;
    for i in session.alive().collect::<Vec<_>>() {
        if !session.stop(i) {
            session.threads[i].tid = 0;
            continue;
        }
        let tid = session.threads[i].tid;
        let Ok(regs) = get_regs(tid) else { continue };
        if session.threads[i].stopped == Some(Stop::Breakpoint)
            && !loader_code(session.read_u64(regs.rsp).unwrap_or(0))
        {
            let function = breakpoints
                .iter()
                .find(|b| b.0 == regs.rip)
                .unwrap()
                .1
                .clone();
            return Ok((i, SafePoint::AllocatorEntry { tid, function }));
        }
        let number = regs.orig_rax as i64;
        let interrupted = session.threads[i].stopped == Some(Stop::Event);
        if choice.is_none() && interrupted && SAFE_SYSCALLS.contains(&number) && libc_code(regs.rip)
        {
            choice = Some((i, SafePoint::Syscall { tid, number }));
        }
    }
    if session.alive().next().is_none() {
        return Err(AttachError::Exited(pid));
    }
    choice.ok_or(AttachError::NoSafePoint {
        pid,
        waited_ms: wait_for.as_millis() as u64,
    })
}

pub fn inject(
    target: &Target,
    library: &Path,
    image: &[u8],
    entry: &EntryCall,
    wait_for: Duration,
) -> Result<Injection, AttachError> {
    let pid = target.pid;
    let started = Instant::now();
    let libc = target.libc().expect("checked: libc is mapped");
    let libc_image = target.read_module(libc)?;
    let (dlopen, dlopen_flags) = match function_address(&libc_image, libc.base, "dlopen") {
        Some(a) => (a, RTLD_NOW),
        None => (
            function_address(&libc_image, libc.base, "__libc_dlopen_mode").ok_or_else(|| {
                AttachError::MissingSymbol {
                    pid,
                    what: "dlopen".into(),
                    module: libc.path.clone(),
                }
            })?,
            RTLD_NOW | RTLD_DLOPEN,
        ),
    };
    let dlerror = function_address(&libc_image, libc.base, "dlerror");
    let breakpoints = entry_breakpoints(target);
    let library_text = library.display().to_string();

    let mut session = Session::seize(target)?;
    let (chosen, safe_point) = safe_point(&mut session, target, &breakpoints, wait_for)?;
    let borrowed_at = Instant::now();
    // Every other thread runs free again, untraced, while the chosen one works for us.
    for i in session.alive().collect::<Vec<_>>() {
        if i != chosen {
            session.release(i);
        }
    }
    let tid = session.threads[chosen].tid;
    arm(tid, &[]).map_err(|e| refused(pid, e))?;
    let saved = get_regs(tid).map_err(|e| refused(pid, e))?;
    let mut held = Vec::new();
    let outcome = (|| {
        let handle = call(
            &session,
            tid,
            &saved,
            dlopen,
            &[Argument::Str(&library_text), Argument::Int(dlopen_flags)],
            &mut held,
        )?;
        if handle == 0 {
            let detail = match dlerror {
                Some(f) => {
                    let text = call(&session, tid, &saved, f, &[], &mut held)?;
                    if text == 0 {
                        "dlopen failed".to_string()
                    } else {
                        session.read_c_string(text)
                    }
                }
                None => "dlopen failed".to_string(),
            };
            return Err(AttachError::LoadFailed {
                pid,
                library: library_text.clone(),
                detail,
            });
        }
        let maps = std::fs::read_to_string(target.proc_dir.join("maps"))
            .map_err(|_| AttachError::Exited(pid))?;
        let loaded = parse_maps(&maps)
            .into_iter()
            .find(|m| Path::new(&m.path) == library)
            .ok_or_else(|| AttachError::LoadFailed {
                pid,
                library: library_text.clone(),
                detail: "dlopen returned but the library is not mapped".into(),
            })?;
        let function = function_address(image, loaded.base, entry.function).ok_or_else(|| {
            AttachError::MissingSymbol {
                pid,
                what: entry.function.to_string(),
                module: library_text.clone(),
            }
        })?;
        call(&session, tid, &saved, function, &entry.arguments, &mut held)
    })();
    // The thread gets back exactly what it had (a failed call included), and the signals that
    // came for it meanwhile.
    let restored = set_regs(tid, &saved);
    if let Some(&first) = held.first() {
        session.threads[chosen].stopped = Some(Stop::Signal(first));
    }
    session.release(chosen);
    for &sig in held.iter().skip(1) {
        // SAFETY: tgkill to a thread of the process we just gave back.
        unsafe { libc::syscall(libc::SYS_tgkill, pid as i64, tid as i64, sig as i64) };
    }
    let borrowed = borrowed_at.elapsed();
    restored.map_err(|e| refused(pid, e))?;
    drop(session);
    Ok(Injection {
        safe_point,
        borrowed,
        total: started.elapsed(),
        entry_returned: outcome? as i64,
    })
}
