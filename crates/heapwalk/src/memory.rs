//! Another process's memory, read without stopping it.

/// Bytes of an address space. The walk reads through this, so that a fabricated image can be
/// walked in tests.
pub trait Memory {
    /// Reads from `addr` into `buf`; the number of bytes read, short where the range leaves the
    /// readable mappings (0 when `addr` itself is not readable).
    fn read_at(&self, addr: u64, buf: &mut [u8]) -> usize;
}

/// The memory of a running process, through `process_vm_readv` (one system call per window, no
/// stop, the same permission as ptrace read).
pub struct ProcessMemory {
    pid: libc::pid_t,
}

impl ProcessMemory {
    pub fn new(pid: u32) -> ProcessMemory {
        ProcessMemory {
            pid: pid as libc::pid_t,
        }
    }
}

impl Memory for ProcessMemory {
    fn read_at(&self, addr: u64, buf: &mut [u8]) -> usize {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, writable for its length and not otherwise borrowed
        // during the call; the remote range is only read, in the other process.
        let read = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        usize::try_from(read).unwrap_or(0)
    }
}
