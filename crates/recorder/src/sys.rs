//! The few system calls std does not offer: SOCK_SEQPACKET sockets, SCM_RIGHTS, shared mappings,
//! signals, fork and wait. Every unsafe block of the crate lives here, behind safe functions but
//! for `fork`, whose one caller (`supervisor::split`) passes its own safety condition on.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64};

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::other(format!(
            "socket path '{}' is longer than {} bytes: set TMPDIR to a shorter directory",
            path.display(),
            addr.sun_path.len() - 1
        )));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok((
        addr,
        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
    ))
}

/// A non-blocking, close-on-exec AF_UNIX SOCK_SEQPACKET listener.
pub fn listen_seqpacket(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) = sockaddr(path)?;
    // SAFETY: plain socket calls on a descriptor we own; addr outlives the calls.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        ))?;
        let fd = OwnedFd::from_raw_fd(fd);
        check(libc::bind(
            fd.as_raw_fd(),
            &addr as *const _ as *const libc::sockaddr,
            len,
        ))?;
        check(libc::listen(fd.as_raw_fd(), 512))?;
        Ok(fd)
    }
}

/// Accepts one pending connection (non-blocking), `None` when there is none.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: accept4 with null address is valid; the result is a fresh descriptor we own.
    let rc = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: rc is a valid descriptor returned by accept4.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(rc) }))
}

/// What one non-blocking receive produced.
pub enum Received {
    Message { len: usize, fd: Option<OwnedFd> },
    WouldBlock,
    Closed,
}

/// Sends one message on a connected socket, with `fd` passed along when given.
pub fn send_message(sock: &OwnedFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let mut control = [0u64; 8]; // aligned room for one SCM_RIGHTS descriptor
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; the pointers stay valid for the call; the control message
    // is written within control's size (CMSG_SPACE of one descriptor is 24 bytes).
    let n = unsafe {
        let mut mh: libc::msghdr = std::mem::zeroed();
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        if let Some(fd) = fd {
            mh.msg_control = control.as_mut_ptr().cast();
            mh.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
        }
        libc::sendmsg(sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one message into `buf`, with at most one passed descriptor.
pub fn recv_message(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut control = [0u64; 8]; // aligned room for one SCM_RIGHTS descriptor
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; the pointers stay valid for the call; we only read the
    // control message the kernel wrote, within control's size.
    unsafe {
        let mut mh: libc::msghdr = std::mem::zeroed();
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control.as_mut_ptr().cast();
        mh.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(
            sock.as_raw_fd(),
            &mut mh,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        );
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(Received::WouldBlock),
                io::ErrorKind::ConnectionReset => Ok(Received::Closed),
                _ => Err(e),
            };
        }
        if n == 0 {
            return Ok(Received::Closed);
        }
        let mut fd = None;
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c) as *const RawFd;
                for i in 0..count {
                    let raw = std::ptr::read_unaligned(data.add(i));
                    let owned = OwnedFd::from_raw_fd(raw);
                    if fd.is_none() {
                        fd = Some(owned); // extra descriptors are closed on drop
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
        if mh.msg_flags & libc::MSG_TRUNC != 0 {
            return Ok(Received::Message { len: 0, fd });
        }
        Ok(Received::Message {
            len: n as usize,
            fd,
        })
    }
}

/// `fds` as poll's entries, each waiting to be readable.
fn poll_entries(fds: &[RawFd]) -> Vec<libc::pollfd> {
    fds.iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect()
}

/// Waits until one of `fds` is readable or `timeout` passed (to the microsecond: `ppoll`).
pub fn poll_readable(fds: &[RawFd], timeout: std::time::Duration) {
    let mut p = poll_entries(fds);
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: p is a valid array of pollfd and ts a valid timespec for the duration of the call.
    unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

/// Waits until one of `fds` is readable (or at its end) or `timeout_ms` passed (-1: no limit);
/// says which are.
pub fn poll(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p = poll_entries(fds);
    // SAFETY: p is a valid array of pollfd for the duration of the call.
    if unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.iter().map(|p| p.revents != 0).collect())
}

/// A shared mapping of a descriptor handed over by the shim.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; access goes through atomics and volatile reads.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only reads through atomics, volatile reads and copies of memory
// the other process published; the stack arenas are shared by the images of a fork family.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn map(fd: &OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: mapping a descriptor we own; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The 8-aligned u64 at `offset`, used atomically with the other process.
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset + 8 <= self.len && offset & 7 == 0,
            "atomic outside the mapping"
        );
        // SAFETY: in bounds and aligned (mappings are page-aligned); lives as long as &self.
        unsafe { &*(self.ptr.add(offset) as *const AtomicU64) }
    }

    /// Copies four u64 at `offset` (a record the producer published before we read `head`).
    #[inline]
    pub fn read_record(&self, offset: usize) -> [u64; 4] {
        assert!(offset + 32 <= self.len);
        // SAFETY: in bounds; volatile because another process writes the memory.
        unsafe { std::ptr::read_volatile(self.ptr.add(offset) as *const [u64; 4]) }
    }

    /// The `n` records starting at `offset`, in place: only records the producer published
    /// before we read `head` with acquire ordering, which it does not touch again until we
    /// advance the tail.
    #[inline]
    pub fn published_records(&self, offset: usize, n: usize) -> &[[u64; 4]] {
        assert!(offset + n * 32 <= self.len && offset & 7 == 0);
        // SAFETY: in bounds and 8-aligned; the producer does not write these records while the
        // slice lives (see above), and it lives no longer than &self.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset) as *const [u64; 4], n) }
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The 4-aligned u32 at `offset`, used atomically with the other process.
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset + 4 <= self.len && offset & 3 == 0,
            "atomic outside the mapping"
        );
        // SAFETY: in bounds and aligned; lives as long as &self.
        unsafe { &*(self.ptr.add(offset) as *const AtomicU32) }
    }

    /// Copies `len` bytes at `offset` (memory the other process wrote before publishing it);
    /// `None` when out of bounds.
    pub fn copy(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        if offset.checked_add(len)? > self.len {
            return None;
        }
        let mut out = vec![0u8; len];
        // SAFETY: in bounds; the source is shared memory the producer no longer writes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), len) };
        Some(out)
    }

    /// Size of the file behind `fd`.
    pub fn fd_size(fd: &OwnedFd) -> io::Result<u64> {
        // SAFETY: fstat on a descriptor we own into a zeroed stat buffer.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            check(libc::fstat(fd.as_raw_fd(), &mut st))?;
            Ok(st.st_size as u64)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what mmap returned.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock the shim stamps with).
/// Bytes per page (`/proc` figures in pages: statm).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Host name for the trace header.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Name of a signal ("SIGKILL").
pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string.
    let s = unsafe { libc::strsignal(sig) };
    let desc = if s.is_null() {
        String::new()
    } else {
        // SAFETY: non-null NUL-terminated string from libc.
        unsafe { std::ffi::CStr::from_ptr(s) }
            .to_string_lossy()
            .into_owned()
    };
    let abbrev = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "",
    };
    match (abbrev, desc.is_empty()) {
        ("", true) => format!("signal {sig}"),
        ("", false) => desc,
        (a, _) => a.to_string(),
    }
}

// ---- Processes, signals and identity ----------------------------------------------------------

/// Sends `signal` to process `pid`; a process already gone is not an error worth reporting.
/// Async-signal-safe (a signal handler calls it).
pub fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill takes integers only and is async-signal-safe.
    unsafe { libc::kill(pid, signal) };
}

/// Installs `handler` for `signal` (a handler, unlike SIG_IGN, is reset by exec).
pub fn install_handler(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the handlers the crate installs are async-signal-safe (atomics and kill only).
    unsafe { libc::signal(signal, handler as *const () as libc::sighandler_t) };
}

/// Makes this process the reaper of orphans below it; refused on old kernels (ignored).
pub fn become_child_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Splits the process in two: `Ok(None)` in the child, `Ok(Some(pid))` in the parent.
///
/// # Safety
/// No other thread may exist: the child goes on from a copy of this single thread, and a lock
/// another thread held at the fork would stay locked there forever.
pub unsafe fn fork() -> io::Result<Option<libc::pid_t>> {
    // SAFETY: the caller guarantees a single thread, so the child's copy is consistent.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// The raw wait status of child `pid` (retried when a signal interrupts the wait), or `None`
/// when it is not (or no longer) ours to wait for.
pub fn wait_for(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status it is given.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// Lowers the calling thread's scheduling priority by `increment` (per thread on Linux); a
/// failure (a sandbox that forbids it) changes nothing else.
pub fn nice_this_thread(increment: libc::c_int) {
    // SAFETY: nice() only changes the calling thread's scheduling priority.
    unsafe { libc::nice(increment) };
}

pub fn effective_uid() -> libc::uid_t {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

pub fn effective_gid() -> libc::gid_t {
    // SAFETY: getegid has no preconditions.
    unsafe { libc::getegid() }
}

// ---- Descriptors ------------------------------------------------------------------------------

/// A connected pair of SOCK_SEQPACKET sockets (close-on-exec).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The device and inode of open descriptor `fd`, or `None` when it is not open.
pub fn device_and_inode(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: struct stat is plain data, valid when zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one struct stat; a descriptor that is not open just fails.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    ok.then_some((st.st_dev, st.st_ino))
}

/// Bytes waiting to be read in pipe or socket `fd` (FIONREAD), or `None` when it cannot say.
/// `fd` must be open: the caller knows it is (a closed number may have been reused).
pub fn unread_bytes(fd: RawFd) -> Option<usize> {
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
    (r == 0).then_some(unread.max(0) as usize)
}

/// A shared file of `len` bytes standing in for one the shim hands over.
#[cfg(test)]
pub fn memfd(len: usize) -> OwnedFd {
    // SAFETY: plain system calls; the descriptor is checked and then owned.
    unsafe {
        let fd = libc::memfd_create(c"alloclens-test".as_ptr(), 0);
        assert!(fd >= 0, "memfd_create failed");
        assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
        OwnedFd::from_raw_fd(fd)
    }
}

/// True when the dynamic linker can load `name` (what the shim will `dlopen` in the command).
pub fn library_loads(name: &std::ffi::CStr) -> bool {
    // SAFETY: dlopen/dlclose of a system library by name; the handle is checked and released.
    unsafe {
        let h = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
        true
    }
}
