//! Files mapped into a process, from /proc/PID/maps.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Distinct paths of the files mapped by process `pid`, sorted. Used to check that a preloaded
/// allocator library really is mapped. Read through a live thread when the main thread has exited
/// ([`crate::process_dir`]). Pseudo-mappings ([heap], [stack], anonymous) are left out;
/// a file deleted since it was mapped is listed without the kernel's " (deleted)" suffix.
pub fn mapped_files(pid: u32) -> Result<Vec<PathBuf>> {
    let path = crate::process_dir(pid).join("maps");
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let files: BTreeSet<PathBuf> = text
        .lines()
        .filter_map(mapping_path)
        .map(PathBuf::from)
        .collect();
    Ok(files.into_iter().collect())
}

/// One line of /proc/PID/maps that maps a file: "start-end perms offset dev inode    path".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping<'a> {
    pub start: u64,
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: &'a str,
    /// The file offset of `start`.
    pub offset: u64,
    /// Everything after the fifth field (it may contain spaces), without the kernel's
    /// " (deleted)" suffix.
    pub path: &'a str,
}

impl FileMapping<'_> {
    pub fn executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }
}

/// The file mapping of one maps line, None for a pseudo-mapping ([heap], [stack], anonymous) or a
/// line it does not understand: the one parser of that file.
pub fn parse_file_mapping(line: &str) -> Option<FileMapping<'_>> {
    let mut fields = [""; 5];
    let mut rest = line;
    for field in &mut fields {
        rest = rest.trim_start();
        let end = rest.find(' ')?;
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.trim_start();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    if !path.starts_with('/') {
        return None;
    }
    let (start, end) = fields[0].split_once('-')?;
    Some(FileMapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        perms: fields[1],
        offset: u64::from_str_radix(fields[2], 16).ok()?,
        path,
    })
}

fn mapping_path(line: &str) -> Option<&str> {
    parse_file_mapping(line).map(|m| m.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_maps_lines() {
        let file = "7f1c2a000000-7f1c2a022000 r--p 00000000 08:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            mapping_path(file),
            Some("/usr/lib/x86_64-linux-gnu/libc.so.6")
        );
        let spaced =
            "7f1c2a000000-7f1c2a022000 r--p 00000000 08:01 99     /tmp/my lib.so (deleted)";
        assert_eq!(mapping_path(spaced), Some("/tmp/my lib.so"));
        assert_eq!(
            mapping_path("55d0-55e0 rw-p 00000000 00:00 0          [heap]"),
            None
        );
        assert_eq!(mapping_path("7f00-7f10 rw-p 00000000 00:00 0 "), None);
        assert_eq!(mapping_path("garbage"), None);
        let m = parse_file_mapping(file).unwrap();
        assert_eq!(
            (m.start, m.end, m.offset),
            (0x7f1c2a000000, 0x7f1c2a022000, 0)
        );
        assert_eq!(m.perms, "r--p");
        assert!(!m.executable());
    }

    #[test]
    fn own_executable_is_mapped() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let files = mapped_files(std::process::id()).unwrap();
        assert!(files.contains(&exe), "{exe:?} not in {files:?}");
    }

    #[test]
    fn missing_process_is_an_error_naming_the_file() {
        let err = mapped_files(u32::MAX - 1).unwrap_err().to_string();
        assert!(err.contains("/proc/4294967294/maps"), "{err}");
    }
}
