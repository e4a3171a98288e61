//! The memory the driver works from, outside malloc: memfd-backed shared mappings, named so that
//! /proc/PID/maps shows them (`/memfd:alloclens-replay-calls`, `/memfd:alloclens-replay-blocks`).
//! Their pages are shared memory, which the kernel counts apart from anonymous memory, so the RSS
//! the replay measures (anonymous resident pages) holds the allocator's and the blocks' pages only.
//!
//! Layout of the calls mapping, written by the parent and read (and partly filled) by the driver:
//! [`Header`], one [`ThreadDesc`] per replay thread, the calls of every thread ([`Call`]), then
//! the [`SamplePoint`]s of every thread.
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU64;

use crate::calls::Call;

/// A read-write shared mapping of a whole memfd.
pub struct SharedMap {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; who writes what is the layout's contract (the parent
// before and after the driver runs, the driver's threads each their own part).
unsafe impl Send for SharedMap {}
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// A new zeroed memfd of `len` bytes named `name` (close-on-exec), mapped.
    pub fn create(name: &str, len: usize) -> io::Result<SharedMap> {
        let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid C string; the returned descriptor is owned below.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let len = len.max(8);
        // SAFETY: ftruncate on our own descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Self::map(fd, len)
    }

    /// Maps the memfd the parent handed down as descriptor `fd`.
    pub fn inherit(fd: RawFd) -> io::Result<SharedMap> {
        // SAFETY: fstat into a zeroed struct; the descriptor was given to this process to own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Self::map(fd, st.st_size as usize)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<SharedMap> {
        // SAFETY: a fresh shared mapping of the whole file; unmapped in Drop.
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
        Ok(SharedMap {
            ptr: ptr.cast(),
            len,
            fd,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, not used after this.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

pub const MAGIC: u64 = u64::from_le_bytes(*b"ALREPLY1");

/// What to do to a new block's memory.
pub const TOUCH_NONE: u64 = 0;
pub const TOUCH_PAGES: u64 = 1;
pub const TOUCH_ALL: u64 = 2;

/// Start of the calls mapping. Inputs first (the parent's), then what the driver writes.
#[repr(C)]
pub struct Header {
    pub magic: u64,
    pub threads: u64,
    pub calls: u64,
    pub blocks: u64,
    pub samples: u64,
    pub touch: u64,
    /// The most bytes touched per block (`plan::TOUCH_BLOCK_LIMIT`).
    pub touch_limit: u64,
    /// CLOCK_MONOTONIC ns when the threads were released and when the last one ended.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Anonymous resident bytes just before the first call and after the last.
    pub rss_start: u64,
    pub rss_end: u64,
    /// 1 when every thread finished its calls.
    pub finished: u64,
    pub _reserved: [u64; 4],
}

/// One replay thread's share: where its calls and sample points are, and what it did.
#[repr(C)]
pub struct ThreadDesc {
    pub calls_off: u64,
    pub calls_len: u64,
    pub samples_off: u64,
    pub samples_len: u64,
    /// Calls performed so far (published at each sample point and at the end: the progress bar).
    pub done: AtomicU64,
    /// Allocating calls the allocator answered with NULL.
    pub failed: u64,
    /// Frees and reallocs that had to wait for another thread's allocation.
    pub waits: u64,
    pub _reserved: u64,
}

/// A point of the measurement: after the thread's call `local`, at recorded position `seq` (calls
/// done in the original order), where the trace had `live` requested bytes live. The driver fills
/// `t_ns`, `rss` and `taken`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SamplePoint {
    pub local: u64,
    pub seq: u64,
    pub live: u64,
    pub t_ns: u64,
    pub rss: u64,
    pub taken: u64,
}

/// Byte offsets of the parts of a calls mapping.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub threads_at: usize,
    pub calls_at: usize,
    pub samples_at: usize,
    pub len: usize,
}

impl Layout {
    pub fn new(threads: usize, calls: usize, samples: usize) -> Layout {
        let threads_at = 128;
        let calls_at = threads_at + threads * std::mem::size_of::<ThreadDesc>();
        let samples_at = calls_at + calls * std::mem::size_of::<Call>();
        let len = samples_at + samples * std::mem::size_of::<SamplePoint>();
        Layout {
            threads_at,
            calls_at,
            samples_at,
            len,
        }
    }
}

/// Typed views of a calls mapping.
pub struct Image<'a> {
    map: &'a SharedMap,
    layout: Layout,
}

impl<'a> Image<'a> {
    /// The views of a mapping whose header is written; None when it is not a calls mapping.
    pub fn of(map: &'a SharedMap) -> Option<Image<'a>> {
        if map.len() < std::mem::size_of::<Header>() {
            return None;
        }
        // SAFETY: the mapping is at least a header long and page-aligned.
        let h = unsafe { &*(map.as_ptr() as *const Header) };
        if h.magic != MAGIC {
            return None;
        }
        let layout = Layout::new(h.threads as usize, h.calls as usize, h.samples as usize);
        (layout.len <= map.len()).then_some(Image { map, layout })
    }

    /// Writes a header for `threads`, `calls` and `samples` into a mapping of `layout.len` bytes.
    pub fn init(map: &'a SharedMap, header: Header) -> Image<'a> {
        let layout = Layout::new(
            header.threads as usize,
            header.calls as usize,
            header.samples as usize,
        );
        assert!(layout.len <= map.len(), "mapping too small for its layout");
        // SAFETY: in bounds (asserted), aligned (page start), and nobody else uses it yet.
        unsafe { std::ptr::write(map.as_ptr() as *mut Header, header) };
        Image { map, layout }
    }

    #[allow(clippy::mut_from_ref)]
    pub fn header(&self) -> &mut Header {
        // SAFETY: checked in `of`/`init`; the driver's main thread and the parent write it at
        // different times.
        unsafe { &mut *(self.map.as_ptr() as *mut Header) }
    }

    #[allow(clippy::mut_from_ref)]
    pub fn threads(&self) -> &mut [ThreadDesc] {
        let n = self.header().threads as usize;
        // SAFETY: within the layout; each replay thread writes only its own descriptor.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.as_ptr().add(self.layout.threads_at) as *mut ThreadDesc,
                n,
            )
        }
    }

    #[allow(clippy::mut_from_ref)]
    pub fn calls(&self) -> &mut [Call] {
        let n = self.header().calls as usize;
        // SAFETY: within the layout; written by the parent only, before the driver runs.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.as_ptr().add(self.layout.calls_at) as *mut Call,
                n,
            )
        }
    }

    #[allow(clippy::mut_from_ref)]
    pub fn samples(&self) -> &mut [SamplePoint] {
        let n = self.header().samples as usize;
        // SAFETY: within the layout; each replay thread writes only its own points.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.as_ptr().add(self.layout.samples_at) as *mut SamplePoint,
                n,
            )
        }
    }

    /// Clears what a driver wrote, for the next replay of the same calls.
    pub fn reset_outputs(&self) {
        let h = self.header();
        h.start_ns = 0;
        h.end_ns = 0;
        h.rss_start = 0;
        h.rss_end = 0;
        h.finished = 0;
        for t in self.threads() {
            *t.done.get_mut() = 0;
            t.failed = 0;
            t.waits = 0;
        }
        for s in self.samples() {
            s.t_ns = 0;
            s.rss = 0;
            s.taken = 0;
        }
    }
}
