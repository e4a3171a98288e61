//! Which pages of a process's heap are resident, from /proc/PID/pagemap.
//!
//! **What counts as the heap.** The mappings whose `Rss` makes the heap of the smaps split
//! ([`crate::SmapsSplit::heap`], docs/memory-metrics.md "RSS split"): `[heap]` (glibc's brk
//! arena) and the accessible private anonymous mappings that are not a thread stack (glibc's
//! other arenas and mmap'd blocks, jemalloc's extents, mimalloc's segments, tcmalloc's spans).
//! Stacks are left out (they are known by the guard below them: no allocator hands them out),
//! and so are file mappings and shared memory (no malloc returns them), and the inaccessible
//! reserves of arenas (never resident). So the resident bytes here are, up to the moment each
//! was read, the `heap` figure of smaps, page for page.
//!
//! **Two ways to read pagemap.** The `PAGEMAP_SCAN` ioctl (Linux 6.7+) asks the kernel for the
//! runs of present pages, which it gives already merged: a few regions per mapping instead of 8
//! bytes per page, and it can leave out pages that map the shared zero page (read, never
//! written), which smaps does not count in `Rss` either. Older kernels get a plain read, 8 bytes
//! per page (bit 63: present); without the page frame number (hidden from non-root readers) it
//! cannot tell the zero page, so a heap page that was read and never written counts as resident
//! there and not in smaps. Neither needs root: the same access as smaps (ptrace read).
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

use crate::error::{Error, Result};
use crate::smaps_split::heap_ranges;

/// How pagemap is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagemapMethod {
    /// The `PAGEMAP_SCAN` ioctl (Linux 6.7+).
    Scan,
    /// 8 bytes per page, read from the file.
    Read,
}

/// One heap mapping and its resident pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingResidency {
    pub start: u64,
    pub end: u64,
    /// Runs of resident pages, `[start, end)` addresses, ascending and not touching (two runs
    /// always have a non-resident page between them).
    pub runs: Vec<(u64, u64)>,
}

/// The resident pages of a process's heap at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeapResidency {
    pub page_size: u64,
    /// In address order.
    pub mappings: Vec<MappingResidency>,
}

impl HeapResidency {
    /// Resident bytes of all the heap mappings.
    pub fn resident_bytes(&self) -> u64 {
        self.mappings
            .iter()
            .flat_map(|m| &m.runs)
            .map(|(s, e)| e - s)
            .sum()
    }
}

/// Reads heap residency, reusing its buffers between readings.
pub struct ResidencyReader {
    method: PagemapMethod,
    page_size: u64,
    regions: Vec<PageRegion>,
    entries: Vec<u8>,
    /// The zero page's frame number, when this process may see frame numbers (plain read only).
    zero_pfn: Option<u64>,
}

impl Default for ResidencyReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResidencyReader {
    /// Uses `PAGEMAP_SCAN` until the kernel refuses it, then the plain read.
    pub fn new() -> Self {
        Self::with_method(PagemapMethod::Scan)
    }

    /// Reads with `method` (`Read` forces the fallback; `Scan` still falls back when the kernel
    /// lacks the ioctl).
    pub fn with_method(method: PagemapMethod) -> Self {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        ResidencyReader {
            method,
            page_size: u64::try_from(page_size).unwrap_or(4096),
            regions: Vec::new(),
            entries: Vec::new(),
            zero_pfn: None,
        }
    }

    /// The method the next reading will use.
    pub fn method(&self) -> PagemapMethod {
        self.method
    }

    /// The heap mappings of process `pid` (from /proc/PID/maps) and their resident pages.
    pub fn read(&mut self, pid: u32) -> Result<HeapResidency> {
        let dir = crate::process_dir(pid);
        let maps_path = dir.join("maps");
        let maps = std::fs::read(&maps_path).map_err(|e| Error::io(&maps_path, e))?;
        let ranges = heap_ranges(&String::from_utf8_lossy(&maps));
        let pagemap_path = dir.join("pagemap");
        let pagemap = File::open(&pagemap_path).map_err(|e| Error::io(&pagemap_path, e))?;
        let mut mappings = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            let mut runs = Vec::new();
            if self.method == PagemapMethod::Scan {
                match self.scan(&pagemap, start, end, &mut runs) {
                    Ok(()) => {}
                    // ENOTTY: a kernel before 6.7; EINVAL: one that does not know these fields.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                        self.method = PagemapMethod::Read;
                        runs.clear();
                    }
                    Err(e) => return Err(Error::io(&pagemap_path, e)),
                }
            }
            if self.method == PagemapMethod::Read {
                if self.zero_pfn.is_none() {
                    self.zero_pfn = zero_page_frame();
                }
                self.read_entries(&pagemap, start, end, &mut runs)
                    .map_err(|e| Error::io(&pagemap_path, e))?;
            }
            mappings.push(MappingResidency { start, end, runs });
        }
        Ok(HeapResidency {
            page_size: self.page_size,
            mappings,
        })
    }

    /// The present, non-zero-page runs of `[start, end)` from the kernel, in as many calls as the
    /// region buffer needs.
    fn scan(
        &mut self,
        pagemap: &File,
        start: u64,
        end: u64,
        runs: &mut Vec<(u64, u64)>,
    ) -> std::io::Result<()> {
        self.regions.resize(REGIONS_PER_CALL, PageRegion::default());
        let mut from = start;
        while from < end {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: 0,
                start: from,
                end,
                walk_end: 0,
                vec: self.regions.as_mut_ptr() as u64,
                vec_len: self.regions.len() as u64,
                max_pages: 0,
                // Present and not the zero page, as smaps counts `Rss`.
                category_inverted: PAGE_IS_PFNZERO,
                category_mask: PAGE_IS_PRESENT | PAGE_IS_PFNZERO,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_PRESENT,
            };
            // SAFETY: `arg` is a valid pm_scan_arg for the call's duration, and `vec` points to
            // `vec_len` writable page_regions owned by `self.regions`, not touched meanwhile.
            let filled = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if filled < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for r in &self.regions[..filled as usize] {
                // Only what was asked about: a region past `end` would be another mapping's.
                push_run(runs, r.start.max(start), r.end.min(end));
            }
            if arg.walk_end <= from {
                break; // no progress: nothing more to learn
            }
            from = arg.walk_end;
        }
        Ok(())
    }

    /// The present runs of `[start, end)` from 8-byte pagemap entries, read in slices.
    fn read_entries(
        &mut self,
        pagemap: &File,
        start: u64,
        end: u64,
        runs: &mut Vec<(u64, u64)>,
    ) -> std::io::Result<()> {
        let mut page = start / self.page_size;
        let last = end / self.page_size;
        while page < last {
            let count = (last - page).min(ENTRIES_PER_READ);
            self.entries.resize(count as usize * 8, 0);
            let read = read_full(pagemap, &mut self.entries, page * 8)?;
            if read < 8 {
                break; // the mapping went away while being read
            }
            for (i, entry) in self.entries[..read / 8 * 8].chunks_exact(8).enumerate() {
                let entry = u64::from_le_bytes(entry.try_into().expect("8 bytes"));
                let zero = self.zero_pfn.is_some_and(|z| entry & PM_PFN == z);
                if entry & PM_PRESENT != 0 && !zero {
                    let at = (page + i as u64) * self.page_size;
                    push_run(runs, at, at + self.page_size);
                }
            }
            page += (read / 8) as u64;
        }
        Ok(())
    }
}

/// The frame number of the zero page as this process's pagemap shows it: a fresh private page,
/// read and not written, maps it. `None` when frame numbers are hidden (they read 0 without
/// CAP_SYS_ADMIN) or the reading fails.
fn zero_page_frame() -> Option<u64> {
    let page = 4096;
    // SAFETY: a fresh anonymous mapping, unmapped below; no other reference to it.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: within the mapping, readable.
    let _ = unsafe { std::ptr::read_volatile(base as *const u8) };
    let mut entry = [0u8; 8];
    let pagemap = File::open("/proc/self/pagemap").ok();
    let read = pagemap.and_then(|f| f.read_exact_at(&mut entry, base as u64 / 4096 * 8).ok());
    // SAFETY: our own mapping, no reference to it remains.
    unsafe { libc::munmap(base, page) };
    read?;
    let entry = u64::from_le_bytes(entry);
    let pfn = entry & PM_PFN;
    (entry & PM_PRESENT != 0 && pfn != 0).then_some(pfn)
}

/// Appends `[start, end)`, merged with the last run when they touch or overlap: successive
/// `PAGEMAP_SCAN` calls may return a region again from where the previous call's walk stopped,
/// inside its last region. Runs stay ascending and disjoint, as the trace format encodes them
/// (an overlapping run was written shifted past its mapping's end, and the reader refused the
/// rest of the file).
fn push_run(runs: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if end <= start {
        return;
    }
    match runs.last_mut() {
        Some(last) if start <= last.1 => last.1 = last.1.max(end),
        _ => runs.push((start, end)),
    }
}

fn read_full(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Pagemap entries read at once (512 KiB of entries, 256 MiB of address space).
const ENTRIES_PER_READ: u64 = 64 * 1024;
/// Regions the kernel may fill per `PAGEMAP_SCAN` call.
const REGIONS_PER_CALL: usize = 4096;
/// Pagemap entry bit: the page is present in RAM.
const PM_PRESENT: u64 = 1 << 63;
/// Pagemap entry bits 0-54: the page frame number (0 when hidden from the reader).
const PM_PFN: u64 = (1 << 55) - 1;

// Linux's uapi <linux/fs.h>, not in the libc crate.
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_PFNZERO: u64 = 1 << 5;
/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: libc::c_ulong = (3 << 30)
    | ((std::mem::size_of::<PmScanArg>() as libc::c_ulong) << 16)
    | ((b'f' as libc::c_ulong) << 8)
    | 16;

/// `struct page_region`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct pm_scan_arg`.
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_number_is_the_kernels() {
        // PAGEMAP_SCAN as <linux/fs.h> defines it on 64-bit Linux.
        assert_eq!(PAGEMAP_SCAN, 0xC060_6610);
    }

    #[test]
    fn touching_runs_merge() {
        let mut runs = Vec::new();
        push_run(&mut runs, 0x1000, 0x2000);
        push_run(&mut runs, 0x2000, 0x3000);
        push_run(&mut runs, 0x5000, 0x6000);
        assert_eq!(runs, vec![(0x1000, 0x3000), (0x5000, 0x6000)]);
    }

    /// A region returned again by the next PAGEMAP_SCAN call, from inside the last run, merges:
    /// an overlapping run was written shifted past its mapping's end.
    #[test]
    fn overlapping_runs_merge_and_empty_ones_are_dropped() {
        let mut runs = Vec::new();
        push_run(&mut runs, 0x1000, 0x4000);
        push_run(&mut runs, 0x3000, 0x5000);
        push_run(&mut runs, 0x3000, 0x4000);
        push_run(&mut runs, 0x8000, 0x8000);
        assert_eq!(runs, vec![(0x1000, 0x5000)]);
    }

    #[test]
    fn pages_written_here_are_resident_and_pages_never_touched_are_not() {
        let page = 4096usize;
        // Private anonymous memory, as an allocator maps it; every other page written.
        // SAFETY: a fresh anonymous mapping, unmapped below; no other reference to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                16 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        for i in (0..16).step_by(2) {
            // SAFETY: within the mapping.
            unsafe { *(base as *mut u8).add(i * page) = 1 };
        }
        // Read, never written: the zero page, not resident for smaps.
        // SAFETY: within the mapping.
        let _ = unsafe { std::ptr::read_volatile((base as *const u8).add(page)) };
        let start = base as u64;
        let expected: Vec<(u64, u64)> = (0..16)
            .step_by(2)
            .map(|i| (start + (i * page) as u64, start + ((i + 1) * page) as u64))
            .collect();
        let mut reader = ResidencyReader::new();
        let heap = reader.read(std::process::id()).unwrap();
        // SAFETY: our own mapping, no reference to it remains.
        unsafe { libc::munmap(base, 16 * page) };
        let runs_in = |heap: &HeapResidency| -> Vec<(u64, u64)> {
            heap.mappings
                .iter()
                .flat_map(|m| m.runs.iter().copied())
                .filter(|r| r.0 >= start && r.1 <= start + 16 * page as u64)
                .collect()
        };
        assert_eq!(runs_in(&heap), expected);
    }
}
