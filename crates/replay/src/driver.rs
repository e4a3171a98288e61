//! The replay process: started with the allocator preloaded (`alloclens replay-driver`), it maps
//! the calls the parent decoded, makes one thread per recorded thread, performs the calls and
//! writes its measurements into the same mapping. Nothing here allocates between the first call and
//! the last one except the calls themselves: the block table is a memfd too, RSS is read with
//! pread into a stack buffer.
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::calls::{Action, Call, NO_BLOCK};
use crate::shared::{Image, SamplePoint, SharedMap, ThreadDesc, TOUCH_ALL, TOUCH_PAGES};

extern "C" {
    fn valloc(size: libc::size_t) -> *mut libc::c_void;
    fn pvalloc(size: libc::size_t) -> *mut libc::c_void;
}

/// A block whose allocation returned NULL in the replay: later calls on it are skipped.
const FAILED: usize = 1;
const PAGE: usize = 4096;

/// Runs the replay of the calls mapping passed as descriptor `fd`. Returns the exit status: 0 when
/// every call was performed.
pub fn run(fd: RawFd) -> Result<(), String> {
    let map = SharedMap::inherit(fd).map_err(|e| format!("cannot map the calls: {e}"))?;
    let image = Image::of(&map).ok_or("the calls mapping is not one alloclens wrote")?;
    let blocks_len = (image.header().blocks as usize).max(1) * std::mem::size_of::<usize>();
    let blocks = SharedMap::create("alloclens-replay-blocks", blocks_len)
        .map_err(|e| format!("cannot make the block table: {e}"))?;
    // SAFETY: a zeroed shared mapping of `blocks` words, used only as atomics below.
    let table: &[AtomicUsize] = unsafe {
        std::slice::from_raw_parts(
            blocks.as_ptr() as *const AtomicUsize,
            blocks_len / std::mem::size_of::<usize>(),
        )
    };
    let statm = Statm::open().map_err(|e| format!("cannot read /proc/self/statm: {e}"))?;
    let touch = Touching {
        how: image.header().touch,
        limit: image.header().touch_limit as usize,
    };
    let go = AtomicBool::new(false);
    let calls: &[Call] = image.calls();
    let samples: &mut [SamplePoint] = image.samples();
    let mut sample_parts = Vec::new();
    let mut rest = samples;
    for t in image.threads().iter() {
        let (mine, tail) = rest.split_at_mut(t.samples_len as usize);
        sample_parts.push(mine);
        rest = tail;
    }
    std::thread::scope(|scope| {
        for (desc, points) in image.threads().iter_mut().zip(sample_parts) {
            let mine = &calls[desc.calls_off as usize..][..desc.calls_len as usize];
            let (go, statm) = (&go, &statm);
            scope.spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                    std::thread::yield_now();
                }
                replay_thread(mine, desc, points, table, statm, touch);
            });
        }
        let h = image.header();
        h.rss_start = statm.anon_bytes();
        h.start_ns = now_ns();
        go.store(true, Ordering::Release);
    });
    let h = image.header();
    h.end_ns = now_ns();
    h.rss_end = statm.anon_bytes();
    h.finished = 1;
    drop(blocks);
    Ok(())
}

fn replay_thread(
    calls: &[Call],
    desc: &mut ThreadDesc,
    points: &mut [SamplePoint],
    table: &[AtomicUsize],
    statm: &Statm,
    touch: Touching,
) {
    let mut failed = 0u64;
    let mut waits = 0u64;
    let mut next = 0usize;
    let mut next_local = points.first().map_or(u64::MAX, |p| p.local);
    for (i, call) in calls.iter().enumerate() {
        // SAFETY: every pointer handed to free/realloc is one this replay's allocator returned and
        // that no other call has freed (the decoder gives each block exactly one end).
        unsafe { perform(call, table, touch, &mut failed, &mut waits) };
        if i as u64 == next_local {
            let p = &mut points[next];
            p.t_ns = now_ns();
            p.rss = statm.anon_bytes();
            p.taken = 1;
            desc.done.store(i as u64 + 1, Ordering::Relaxed);
            next += 1;
            next_local = points.get(next).map_or(u64::MAX, |p| p.local);
        }
    }
    desc.failed = failed;
    desc.waits = waits;
    desc.done.store(calls.len() as u64, Ordering::Relaxed);
}

/// The pointer of block `b`, waiting (spinning, then yielding) while another thread has not made it
/// yet: a cross-thread free keeps its place after its allocation, without a lock.
#[inline]
fn block(table: &[AtomicUsize], b: u32, waits: &mut u64) -> usize {
    let slot = &table[b as usize];
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    *waits += 1;
    let mut spins = 0u32;
    loop {
        let p = slot.load(Ordering::Acquire);
        if p != 0 {
            return p;
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Makes block `b` (or its failure) visible to the other threads. The Release store orders every
/// write the allocating thread made to the block before the free or realloc that reads the slot.
#[inline]
fn publish(table: &[AtomicUsize], b: u32, p: *mut libc::c_void, failed: &mut u64) {
    let ok = !p.is_null();
    if !ok {
        *failed += 1;
    }
    table[b as usize].store(if ok { p as usize } else { FAILED }, Ordering::Release);
}

#[inline]
unsafe fn perform(
    call: &Call,
    table: &[AtomicUsize],
    touch: Touching,
    failed: &mut u64,
    waits: &mut u64,
) {
    let size = call.size();
    // Matched on the raw byte: this runs once per call.
    const MALLOC: u8 = Action::Malloc as u8;
    const CALLOC: u8 = Action::Calloc as u8;
    const REALLOC: u8 = Action::Realloc as u8;
    const FREE: u8 = Action::Free as u8;
    const FREE_NULL: u8 = Action::FreeNull as u8;
    const POSIX_MEMALIGN: u8 = Action::PosixMemalign as u8;
    const ALIGNED_ALLOC: u8 = Action::AlignedAlloc as u8;
    const MEMALIGN: u8 = Action::Memalign as u8;
    const VALLOC: u8 = Action::Valloc as u8;
    const PVALLOC: u8 = Action::Pvalloc as u8;
    let new = match call.action() {
        MALLOC => libc::malloc(size),
        FREE => {
            let p = block(table, call.block, waits);
            if p != FAILED {
                libc::free(p as *mut libc::c_void);
            }
            return;
        }
        CALLOC => libc::calloc(1, size),
        REALLOC => {
            let old = if call.old == NO_BLOCK {
                0
            } else {
                block(table, call.old, waits)
            };
            let old = if old == FAILED { 0 } else { old };
            libc::realloc(old as *mut libc::c_void, size)
        }
        FREE_NULL => {
            libc::free(std::ptr::null_mut());
            return;
        }
        POSIX_MEMALIGN => {
            let mut p = std::ptr::null_mut();
            if libc::posix_memalign(&mut p, call.align(), size) != 0 {
                p = std::ptr::null_mut();
            }
            p
        }
        ALIGNED_ALLOC => libc::aligned_alloc(call.align(), size),
        MEMALIGN => libc::memalign(call.align(), size),
        VALLOC => valloc(size),
        PVALLOC => pvalloc(size),
        _ => return,
    };
    // Touched before it is published: once its slot is set, the thread that frees it may do so at
    // once, and a write after that lands in the allocator's free list (glibc aborts with
    // "malloc(): unaligned fastbin chunk detected").
    if !new.is_null() {
        touch_block(new.cast(), size, touch);
    }
    publish(table, call.block, new, failed);
}

/// How new blocks are written: `how` is a `TOUCH_*` code; at most the first `limit` bytes.
#[derive(Clone, Copy)]
struct Touching {
    how: u64,
    limit: usize,
}

/// Writes the new block as the program would have: one byte per page (the default), every byte,
/// or nothing; never more than the first `touch.limit` bytes.
#[inline]
unsafe fn touch_block(p: *mut u8, size: usize, touch: Touching) {
    let size = size.min(touch.limit);
    if size == 0 {
        return;
    }
    let touch = touch.how;
    if touch == TOUCH_PAGES {
        std::ptr::write_volatile(p, 1);
        let end = p as usize + size;
        let mut a = (p as usize + PAGE) & !(PAGE - 1);
        while a < end {
            std::ptr::write_volatile(a as *mut u8, 1);
            a += PAGE;
        }
    } else if touch == TOUCH_ALL {
        std::ptr::write_bytes(p, 0xA5, size);
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// /proc/self/statm, opened once and read with pread: resident minus shared pages is the process's
/// anonymous resident memory (the shared memfds of the driver are not in it).
struct Statm {
    fd: RawFd,
    page: u64,
}

impl Statm {
    fn open() -> std::io::Result<Statm> {
        // SAFETY: a constant NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c"/proc/self/statm".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: sysconf reads a constant.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        Ok(Statm { fd, page })
    }

    fn anon_bytes(&self) -> u64 {
        let mut buf = [0u8; 160];
        // SAFETY: pread into a stack buffer of its length.
        let n = unsafe { libc::pread(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return 0;
        }
        let mut fields = buf[..n as usize].split(|b| *b == b' ').map(|f| {
            f.iter()
                .take_while(|c| c.is_ascii_digit())
                .fold(0u64, |v, c| v * 10 + u64::from(c - b'0'))
        });
        let _size = fields.next();
        let resident = fields.next().unwrap_or(0);
        let shared = fields.next().unwrap_or(0);
        resident.saturating_sub(shared) * self.page
    }
}
