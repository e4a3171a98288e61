//! The command's tree dies with alloclens, even when alloclens is SIGKILLed.
//!
//! A signal handler cannot run on SIGKILL, so a small process forked at the start (the watchdog,
//! named `lens-watchdog`) does it: it holds one end of a socket whose other end only alloclens holds.
//! When alloclens dies, for whatever reason, the kernel closes that end, the watchdog reads the end of
//! file and SIGKILLs the current run's process group and every member of the tree alloclens last
//! told it about (checked against their start time, so a reused pid is left alone). The watchdog
//! has a process group of its own and ignores the terminal's signals, so Ctrl-C or a kill of
//! alloclens's group leaves it alive to clean up; its name does not contain "alloclens", so neither
//! does `pkill alloclens`.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Messages are one packet each: `[kind: u32][value: u32][pids: u32...]`, native endianness.
const GROUP: u32 = 1; // value: the run's process group; forgets the members
const MEMBERS: u32 = 2; // pids: the tree as last sampled, replacing the previous members
const DONE: u32 = 3; // the run's tree is gone: nothing to kill
/// The members the watchdog keeps (a larger tree is still covered by its process group).
const MAX_MEMBERS: usize = 4096;

pub(crate) struct Watchdog {
    socket: Option<OwnedFd>,
    pid: libc::pid_t,
    /// A message was dropped (the socket was full): send the members again at the next chance.
    stale: bool,
}

impl Watchdog {
    /// Forks the watchdog. The child only calls async-signal-safe functions (read, kill, open) on
    /// fixed-size stack buffers, so forking a threaded process is sound.
    pub(crate) fn start() -> io::Result<Watchdog> {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned here only.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child runs `watch`, which uses async-signal-safe calls only and never returns.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { watch(theirs.as_raw_fd()) },
            pid => {
                drop(theirs);
                // Never block alloclens on a watchdog that does not read (stopped, say).
                // SAFETY: plain fcntl on a descriptor we own.
                unsafe {
                    let flags = libc::fcntl(ours.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(ours.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
                Ok(Watchdog {
                    socket: Some(ours),
                    pid,
                    stale: false,
                })
            }
        }
    }

    /// Its pid: a child of ours that is not part of the measured tree.
    pub(crate) fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// A run started: its command leads process group `pgid`.
    pub(crate) fn group(&mut self, pgid: u32) {
        self.send(GROUP, pgid, &[]);
    }

    /// The tree's members at the latest sample.
    pub(crate) fn members(&mut self, pids: &[u32]) {
        let pids = &pids[..pids.len().min(MAX_MEMBERS)];
        self.stale = !self.send(MEMBERS, pids.len() as u32, pids);
    }

    /// True when the last members message was dropped and should be sent again.
    pub(crate) fn is_stale(&self) -> bool {
        self.stale
    }

    /// The run's tree is stopped and reaped.
    pub(crate) fn done(&mut self) {
        self.send(DONE, 0, &[]);
    }

    fn send(&mut self, kind: u32, value: u32, pids: &[u32]) -> bool {
        let mut packet = Vec::with_capacity(8 + 4 * pids.len());
        packet.extend_from_slice(&kind.to_ne_bytes());
        packet.extend_from_slice(&value.to_ne_bytes());
        for pid in pids {
            packet.extend_from_slice(&pid.to_ne_bytes());
        }
        let Some(socket) = &self.socket else {
            return false;
        };
        // SAFETY: the buffer is valid for its length; MSG_NOSIGNAL: a dead watchdog gives EPIPE.
        let sent = unsafe {
            libc::send(
                socket.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        sent == packet.len() as isize
    }
}

impl Drop for Watchdog {
    /// The last run is done: closing the socket lets the watchdog end, with nothing to kill.
    fn drop(&mut self) {
        self.done();
        drop(self.socket.take());
        let mut status = 0;
        // SAFETY: reaping our own child, which ends as soon as it reads the end of file.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

/// The watchdog's life: read what alloclens says, and when it is gone kill what it left running.
///
/// # Safety
/// Runs in the child of a fork of a possibly threaded process: async-signal-safe calls only, no
/// allocation, no locks.
unsafe fn watch(socket: libc::c_int) -> ! {
    libc::setpgid(0, 0);
    for signal in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGTSTP] {
        libc::signal(signal, libc::SIG_IGN);
    }
    libc::prctl(libc::PR_SET_NAME, c"lens-watchdog".as_ptr(), 0, 0, 0);
    close_other_descriptors(socket);

    let mut packet = [0u32; 2 + MAX_MEMBERS];
    let mut pgid: libc::pid_t = 0;
    let mut pids = [0 as libc::pid_t; MAX_MEMBERS];
    let mut starts = [0u64; MAX_MEMBERS];
    let mut count = 0usize;
    loop {
        let n = libc::recv(
            socket,
            packet.as_mut_ptr().cast(),
            std::mem::size_of_val(&packet),
            0,
        );
        if n < 0 && *libc::__errno_location() == libc::EINTR {
            continue;
        }
        if n < 8 {
            break; // end of file: alloclens is gone (or an error, treated the same)
        }
        match packet[0] {
            GROUP => {
                pgid = packet[1] as libc::pid_t;
                count = 0;
            }
            MEMBERS => {
                let given = (packet[1] as usize)
                    .min((n as usize - 8) / 4)
                    .min(MAX_MEMBERS);
                count = 0;
                for &pid in &packet[2..2 + given] {
                    if let Some(start) = start_time(pid as libc::pid_t) {
                        pids[count] = pid as libc::pid_t;
                        starts[count] = start;
                        count += 1;
                    }
                }
            }
            DONE => {
                pgid = 0;
                count = 0;
            }
            _ => {}
        }
    }
    if pgid > 0 {
        libc::kill(-pgid, libc::SIGKILL);
    }
    for i in 0..count {
        if start_time(pids[i]) == Some(starts[i]) {
            libc::kill(pids[i], libc::SIGKILL);
        }
    }
    libc::_exit(0)
}

/// Closes every descriptor but `keep` (alloclens's stdout, files and pipes are not the watchdog's).
unsafe fn close_other_descriptors(keep: libc::c_int) {
    let below = if keep > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32)
    } else {
        0
    };
    let above = libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    if below != 0 || above != 0 {
        // Kernels before 5.9: close them one by one.
        let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(256, 65536) as libc::c_int;
        for fd in 0..max {
            if fd != keep {
                libc::close(fd);
            }
        }
    }
}

/// Field 22 of /proc/PID/stat (clock ticks after boot), None when the process is gone or a zombie.
/// Stack buffers only: this runs in the watchdog, a child forked from a threaded process, where
/// only async-signal-safe calls are sound, so `procmem::parse_stat` (which the file reading around
/// it would need to allocate for) is not used; this copy reads the state and field 22 only.
unsafe fn start_time(pid: libc::pid_t) -> Option<u64> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len();
    let mut digits = [0u8; 12];
    let mut d = 0;
    let mut p = pid as u32;
    loop {
        digits[d] = b'0' + (p % 10) as u8;
        d += 1;
        p /= 10;
        if p == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        path[at] = digits[d];
        at += 1;
    }
    path[at..at + 5].copy_from_slice(b"/stat");
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 1024];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    if n <= 0 {
        return None;
    }
    let stat = &buf[..n as usize];
    // comm may hold spaces and ')': fields count from the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = fields.next()?;
    if state == b"Z" {
        return None;
    }
    // state is field 3: starttime (22) is 19 fields further.
    let start = fields.nth(18)?;
    let mut value = 0u64;
    for &b in start {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(b - b'0');
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_matches_procfs() {
        let me = std::process::id() as libc::pid_t;
        let expected = procmem::read_stat(me as u32).unwrap().starttime;
        // SAFETY: a plain read of procfs.
        assert_eq!(unsafe { start_time(me) }, Some(expected));
        assert_eq!(unsafe { start_time(i32::MAX) }, None);
    }
}
