//! Kernel samepage merging (KSM) counters: system-wide from /sys/kernel/mm/ksm, per process from
//! /proc/PID/ksm_merging_pages and /proc/PID/ksm_stat. Counts are in pages of `page_size` bytes.

use std::io;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::procfile::{parse_stat, parse_u64, read_stat, stat_comm, trim};

const KSM_DIR: &str = "/sys/kernel/mm/ksm";

/// System-wide KSM state (see the kernel's admin-guide/mm/ksm).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KsmCounters {
    /// 0 stopped, 1 running, 2 stopped and unmerged everything.
    pub run: u64,
    /// Shared pages in use (one physical page each).
    pub pages_shared: u64,
    /// Extra mappings of shared pages: roughly the pages saved.
    pub pages_sharing: u64,
    /// Pages checked but unique.
    pub pages_unshared: u64,
    /// Pages changing too fast to be merged.
    pub pages_volatile: u64,
    /// Number of completed scans of all mergeable areas.
    pub full_scans: u64,
    /// Pages scanned per wake-up.
    pub pages_to_scan: u64,
    /// Pause between scans (milliseconds).
    pub sleep_millisecs: u64,
    /// Bytes per page, to convert the counts.
    pub page_size: u64,
    /// Bytes saved by KSM, all processes, minus its metadata (Linux >= 6.1); may be negative.
    pub general_profit: Option<i64>,
    /// Zero pages KSM mapped to the kernel's zero page (`use_zero_pages`; Linux >= 6.10).
    pub ksm_zero_pages: Option<u64>,
    /// Stable nodes chained because a page reached `max_page_sharing` (Linux >= 4.13).
    pub stable_node_chains: Option<u64>,
    /// Pages scanned since KSM started (Linux >= 6.7).
    pub pages_scanned: Option<u64>,
}

/// KSM figures of a whole process tree at one sample, with the system's and ksmd's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeKsm {
    /// Per process of the sample (pid, figures), by increasing pid; processes without the files
    /// (exited, kernel < 5.19) are missing.
    pub processes: Vec<(u32, ProcessKsm)>,
    /// Bytes of the tree's pages that are merged: sum of `ksm_merging_pages` × page size.
    pub merging: u64,
    /// Sum of `ksm_process_profit` over the tree (bytes; may be negative).
    pub profit: i64,
    /// Sum of `ksm_rmap_items` over the tree (KSM's per-page metadata entries).
    pub rmap_items: u64,
    /// The system-wide counters (None without KSM).
    pub system: Option<KsmCounters>,
    /// CPU seconds ksmd has used since boot (utime + stime of the kernel thread named `ksmd`).
    pub ksmd_cpu_s: Option<f64>,
    /// Bytes per page, to convert the per-process counts.
    pub page_size: u64,
}

/// Reads the KSM figures of the processes `pids`, the system counters and ksmd's CPU time
/// (`ksmd`: its pid, from [`find_ksmd`]). Never fails: what cannot be read is absent.
pub fn read_tree_ksm(pids: &[u32], ksmd: Option<u32>) -> TreeKsm {
    let page = page_size();
    let mut tree = TreeKsm {
        processes: Vec::with_capacity(pids.len()),
        merging: 0,
        profit: 0,
        rmap_items: 0,
        system: read_ksm().ok().flatten(),
        ksmd_cpu_s: ksmd.and_then(cpu_seconds),
        page_size: page,
    };
    for &pid in pids {
        if let Ok(Some(k)) = read_process_ksm(pid) {
            tree.merging += k.merging_pages * page;
            tree.profit += k.process_profit.unwrap_or(0);
            tree.rmap_items += k.rmap_items.unwrap_or(0);
            tree.processes.push((pid, k));
        }
    }
    tree
}

/// The pid of the `ksmd` kernel thread (a child of kthreadd, pid 2), if it runs.
pub fn find_ksmd() -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Kernel threads have ppid 2.
        let ppid = parse_stat(&text).map(|stat| stat.ppid);
        if stat_comm(&text) == Some(b"ksmd") && ppid == Some(2) {
            return Some(pid);
        }
    }
    None
}

/// utime + stime of process `pid`, seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = read_stat(pid).ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (stat.utime + stat.stime) as f64 / ticks as f64)
}

/// KSM figures of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessKsm {
    /// Pages of this process currently merged (ksm_merging_pages).
    pub merging_pages: u64,
    /// Fields of /proc/PID/ksm_stat (Linux >= 6.1), when present.
    pub rmap_items: Option<u64>,
    pub zero_pages: Option<u64>,
    /// Bytes saved minus metadata cost; may be negative.
    pub process_profit: Option<i64>,
    pub merge_any: Option<bool>,
    pub mergeable: Option<bool>,
}

/// Reads the system-wide counters; `Ok(None)` if the kernel has no KSM.
pub fn read_ksm() -> Result<Option<KsmCounters>> {
    if !Path::new(KSM_DIR).is_dir() {
        return Ok(None);
    }
    let read = |name: &str| -> Result<u64> {
        let path = Path::new(KSM_DIR).join(name);
        let text = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        parse_u64(trim(&text)).ok_or_else(|| Error::parse(&path, "expected a decimal number"))
    };
    let optional = |name: &str| -> Result<Option<u64>> {
        Ok(read_optional(&Path::new(KSM_DIR).join(name))?.and_then(|t| parse_u64(trim(&t))))
    };
    Ok(Some(KsmCounters {
        run: read("run")?,
        pages_shared: read("pages_shared")?,
        pages_sharing: read("pages_sharing")?,
        pages_unshared: read("pages_unshared")?,
        pages_volatile: read("pages_volatile")?,
        full_scans: read("full_scans")?,
        pages_to_scan: read("pages_to_scan")?,
        sleep_millisecs: read("sleep_millisecs")?,
        page_size: page_size(),
        general_profit: read_optional(&Path::new(KSM_DIR).join("general_profit"))?
            .and_then(|t| parse_i64(trim(&t))),
        ksm_zero_pages: optional("ksm_zero_pages")?,
        stable_node_chains: optional("stable_node_chains")?,
        pages_scanned: optional("pages_scanned")?,
    }))
}

/// Reads the KSM figures of process `pid`; `Ok(None)` if the kernel does not expose them
/// (before Linux 5.19) or the process has exited.
pub fn read_process_ksm(pid: u32) -> Result<Option<ProcessKsm>> {
    let dir = crate::process_dir(pid);
    let path = dir.join("ksm_merging_pages");
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let merging_pages =
        parse_u64(trim(&text)).ok_or_else(|| Error::parse(&path, "expected a decimal number"))?;
    let mut ksm = ProcessKsm {
        merging_pages,
        rmap_items: None,
        zero_pages: None,
        process_profit: None,
        merge_any: None,
        mergeable: None,
    };
    let stat_path = dir.join("ksm_stat");
    if let Some(stat) = read_optional(&stat_path)? {
        // Lines are "key value" or "key: value" depending on the field.
        for line in stat.split(|&b| b == b'\n') {
            let line = trim(line);
            let Some(split) = line.iter().position(|&b| b == b' ' || b == b':') else {
                continue;
            };
            let (key, value) = (&line[..split], trim(&line[split + 1..]));
            let value = trim(value.strip_prefix(b":").unwrap_or(value));
            match key {
                b"ksm_rmap_items" => ksm.rmap_items = parse_u64(value),
                b"ksm_zero_pages" => ksm.zero_pages = parse_u64(value),
                b"ksm_process_profit" => ksm.process_profit = parse_i64(value),
                b"ksm_merge_any" => ksm.merge_any = parse_yes_no(value),
                b"ksm_mergeable" => ksm.mergeable = parse_yes_no(value),
                _ => {}
            }
        }
    }
    Ok(Some(ksm))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

fn parse_i64(value: &[u8]) -> Option<i64> {
    match value.strip_prefix(b"-") {
        Some(digits) => i64::try_from(parse_u64(digits)?).ok().map(|v| -v),
        None => i64::try_from(parse_u64(value)?).ok(),
    }
}

fn parse_yes_no(value: &[u8]) -> Option<bool> {
    match value {
        b"yes" => Some(true),
        b"no" => Some(false),
        _ => None,
    }
}

fn page_size() -> u64 {
    // sysconf(_SC_PAGESIZE) cannot fail on Linux; 4096 is the fallback of every x86 machine.
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_and_flags() {
        assert_eq!(parse_i64(b"-8192"), Some(-8192));
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"x"), None);
        assert_eq!(parse_yes_no(b"yes"), Some(true));
        assert_eq!(parse_yes_no(b"maybe"), None);
    }
}
