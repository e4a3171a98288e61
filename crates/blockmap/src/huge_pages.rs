//! Large buffers backed by transparent huge pages. Debian's kernels (and this machine's) give huge
//! pages only to memory that asks for them (`transparent_hugepage/enabled` = `madvise`), and the
//! live tables of a large trace are hundreds of MiB of randomly accessed memory: with 4 KiB pages
//! every lookup also misses the TLB, and filling them costs a page fault per 4 KiB. Measured on
//! the python3 trace of bench/record-real.sh with huge pages for every allocation (`always`):
//! `analyze` took 0.72-0.77 s instead of 0.96-0.97 s, with 20 k page faults instead of 164 k.
//! A request the kernel cannot honour (huge pages off, another OS) changes nothing.

/// Smaller buffers hold at most one aligned 2 MiB extent: not worth the system call.
const MIN_BYTES: usize = 4 << 20;

/// An empty vector with room for `capacity` elements whose buffer the kernel is asked to back
/// with huge pages, before anything touches it.
fn vec_with_capacity<T>(capacity: usize) -> Vec<T> {
    let v = Vec::with_capacity(capacity);
    advise(v.as_ptr() as usize, v.capacity() * std::mem::size_of::<T>());
    v
}

/// `len` copies of `value` in a buffer backed by huge pages (see `vec_with_capacity`).
pub fn vec_filled<T: Clone>(value: T, len: usize) -> Vec<T> {
    let mut v = vec_with_capacity(len);
    v.resize(len, value);
    v
}

/// `vec_with_capacity`, or `None` when the memory cannot be had (an address-space limit such as
/// `ulimit -v`, strict overcommit): for the buffers whose size follows the input, so that a
/// caller can make do with less or say what went wrong instead of aborting.
pub fn try_vec_with_capacity<T>(capacity: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(capacity).ok()?;
    advise(v.as_ptr() as usize, v.capacity() * std::mem::size_of::<T>());
    Some(v)
}

/// `vec_filled`, or `None` when the memory cannot be had (see `try_vec_with_capacity`).
pub fn try_vec_filled<T: Clone>(value: T, len: usize) -> Option<Vec<T>> {
    let mut v = try_vec_with_capacity(len)?;
    v.resize(len, value);
    Some(v)
}

/// This process's address-space limit (`RLIMIT_AS`, `ulimit -v`) in bytes, `None` without one.
pub fn address_space_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX))
}

/// Bytes of address space this process may still map under its `address_space_limit`, or `None`
/// without one. Buffers reserved ahead of use count against that limit as soon as they are
/// reserved, so a reservation sized by it leaves room for the rest.
pub fn address_space_left() -> Option<usize> {
    let limit = address_space_limit()?;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    Some(limit.saturating_sub(pages * page))
}

fn advise(addr: usize, bytes: usize) {
    if bytes < MIN_BYTES {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = addr.next_multiple_of(page);
    let end = (addr + bytes) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside the caller's live allocation; MADV_HUGEPAGE is a
        // hint that changes neither the contents nor the validity of the memory.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_have_the_asked_length_and_contents() {
        let v: Vec<u64> = vec_filled(7, 1 << 20);
        assert_eq!(v.len(), 1 << 20);
        assert!(v.iter().all(|&x| x == 7));
        let w: Vec<[u64; 4]> = vec_with_capacity(1 << 18);
        assert!(w.is_empty() && w.capacity() >= 1 << 18);
        let t: Vec<u32> = try_vec_filled(3, 1 << 20).expect("4 MiB can be had");
        assert!(t.len() == 1 << 20 && t.iter().all(|&x| x == 3));
    }

    #[test]
    fn a_buffer_larger_than_the_address_space_is_refused_not_fatal() {
        assert!(try_vec_with_capacity::<u64>(usize::MAX / 16).is_none());
        assert!(try_vec_filled(0u64, 1 << 60).is_none());
    }
}
