//! Kernel samepage merging (KSM) counters: system-wide from /sys/kernel/mm/ksm, per process from
//! /proc/PID/ksm_merging_pages and /proc/PID/ksm_stat. Counts are in pages of `page_size` bytes.

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::procfile::{parse_u64, trim};

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
    }))
}

/// Reads the KSM figures of process `pid`; `Ok(None)` if the kernel does not expose them
/// (before Linux 5.19) or the process has exited.
pub fn read_process_ksm(pid: u32) -> Result<Option<ProcessKsm>> {
    let path = PathBuf::from(format!("/proc/{pid}/ksm_merging_pages"));
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
    let stat_path = PathBuf::from(format!("/proc/{pid}/ksm_stat"));
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
