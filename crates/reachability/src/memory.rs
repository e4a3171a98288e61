//! Reading another process's memory: `process_vm_readv`, one call per range.
use std::io;

/// Memory the scan reads: a stopped process, or a buffer in tests.
pub trait Memory {
    /// Fills `buf` from `addr` as far as the memory is readable; returns the bytes read.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize;

    /// Reads each `(addr, len)` of `requests` into `buf`, one after the other (the lengths add
    /// up to at most `buf.len()`); returns the bytes read of each.
    fn read_batch(&mut self, requests: &[(u64, usize)], buf: &mut [u8]) -> Vec<usize> {
        let mut at = 0;
        requests
            .iter()
            .map(|&(addr, len)| {
                let n = self.read(addr, &mut buf[at..at + len]);
                at += len;
                n
            })
            .collect()
    }
}

/// The memory of process `pid` (the caller holds it stopped: the scan must see one moment).
pub struct ProcessMemory {
    pid: libc::pid_t,
}

impl ProcessMemory {
    pub fn new(pid: u32) -> Self {
        ProcessMemory {
            pid: pid as libc::pid_t,
        }
    }

    fn read_once(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which we own mutably; the remote range is only read.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl Memory for ProcessMemory {
    /// One `process_vm_readv` for the whole batch; the kernel stops at the first request it
    /// cannot read, and those from there on are read one by one.
    fn read_batch(&mut self, requests: &[(u64, usize)], buf: &mut [u8]) -> Vec<usize> {
        let mut local = Vec::with_capacity(requests.len());
        let mut remote = Vec::with_capacity(requests.len());
        let mut at = 0;
        for &(addr, len) in requests {
            local.push(libc::iovec {
                iov_base: buf[at..].as_mut_ptr().cast(),
                iov_len: len,
            });
            remote.push(libc::iovec {
                iov_base: addr as *mut libc::c_void,
                iov_len: len,
            });
            at += len;
        }
        // SAFETY: each local iovec is a distinct part of `buf` (the lengths fit in it, the
        // caller's contract), which we hold mutably; the remote ranges are only read.
        let n = unsafe {
            libc::process_vm_readv(
                self.pid,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        let mut left = n.max(0) as usize;
        let mut at = 0;
        requests
            .iter()
            .map(|&(addr, len)| {
                let got = if left >= len {
                    left -= len;
                    len
                } else {
                    left = 0;
                    self.read(addr, &mut buf[at..at + len])
                };
                at += len;
                got
            })
            .collect()
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        // A partial read stops at the first page that is not mapped: a range that starts
        // readable reads in one call; one that starts in a hole is skipped page by page.
        let mut done = 0;
        while done < buf.len() {
            match self.read_once(addr + done as u64, &mut buf[done..]) {
                Ok(0) | Err(_) => return done,
                Ok(n) => done += n,
            }
        }
        done
    }
}

/// Windows of another process's memory kept by `CachedMemory`, and their size: blocks allocated
/// one after the other lie side by side, and a chain of them (a linked list) is read one block at
/// a time, each read a system call whose access checks cost far more than its copy.
const WINDOWS: usize = 32;
const WINDOW: u64 = 256 << 10;

/// `inner` read through a small cache of `WINDOW`-sized windows (least recently used goes):
/// reads of up to a page are served from the window that holds them.
pub struct CachedMemory<M: Memory> {
    inner: M,
    /// (window start, bytes readable from it, bytes), most recently used last.
    windows: Vec<(u64, usize, Vec<u8>)>,
}

impl<M: Memory> CachedMemory<M> {
    pub fn new(inner: M) -> Self {
        CachedMemory {
            inner,
            windows: Vec::new(),
        }
    }

    fn window(&mut self, start: u64) -> &(u64, usize, Vec<u8>) {
        if let Some(i) = self.windows.iter().position(|w| w.0 == start) {
            let w = self.windows.remove(i);
            self.windows.push(w);
        } else {
            let mut bytes = if self.windows.len() >= WINDOWS {
                self.windows.remove(0).2
            } else {
                vec![0; WINDOW as usize]
            };
            let readable = self.inner.read(start, &mut bytes);
            self.windows.push((start, readable, bytes));
        }
        &self.windows[self.windows.len() - 1]
    }
}

impl<M: Memory> Memory for CachedMemory<M> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let start = addr - addr % WINDOW;
        let offset = (addr - start) as usize;
        if buf.len() > 4096 || offset + buf.len() > WINDOW as usize {
            return self.inner.read(addr, buf);
        }
        let (_, readable, bytes) = self.window(start);
        if offset + buf.len() <= *readable {
            buf.copy_from_slice(&bytes[offset..offset + buf.len()]);
            return buf.len();
        }
        // The window stops at a page that cannot be read: ask for the range itself.
        self.inner.read(addr, buf)
    }
}

/// A buffer standing for memory at `base` (tests).
#[cfg(test)]
pub struct BufferMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

#[cfg(test)]
impl Memory for BufferMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        let Some(start) = addr.checked_sub(self.base).map(|s| s as usize) else {
            return 0;
        };
        if start >= self.bytes.len() {
            return 0;
        }
        let avail = (self.bytes.len() - start).min(buf.len());
        buf[..avail].copy_from_slice(&self.bytes[start..start + avail]);
        avail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_reads_are_the_memorys_bytes_up_to_what_is_readable() {
        let bytes: Vec<u8> = (0..300 << 10).map(|i: u32| (i % 251) as u8).collect();
        let direct = |addr: usize, len: usize| {
            let end = (addr + len).min(bytes.len());
            bytes[addr.min(end)..end].to_vec()
        };
        let mut cached = CachedMemory::new(BufferMemory {
            base: 0,
            bytes: bytes.clone(),
        });
        // Within a window, across two windows, and across the end of what can be read.
        for (addr, len) in [
            (100, 8),
            (WINDOW as usize - 8, 16),
            ((300 << 10) - 8, 16),
            (5, 4096),
        ] {
            let mut buf = vec![0u8; len];
            let n = cached.read(addr as u64, &mut buf);
            assert_eq!(buf[..n], direct(addr, len)[..], "at {addr}");
        }
    }
}
