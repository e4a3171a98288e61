//! A process's resident memory split by kind of mapping, from /proc/PID/smaps: heap, file-backed,
//! stack, other. Used by `alloclens watch` to tell memory the allocator holds from the rest.
//!
//! Reading smaps walks every page table like smaps_rollup and writes one block per mapping: call it
//! at watch rates (about once a second), not at `run`'s 10 Hz. Definitions in
//! docs/memory-metrics.md ("RSS split").

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Resident bytes (`Rss:` of each mapping) by kind. `heap + file + stack + other` is the process's
/// RSS as the same smaps read counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsSplit {
    /// `[heap]` (brk) and private anonymous mappings that are not a thread stack: where malloc's
    /// memory lives (glibc's arenas and large blocks, jemalloc's extents, mimalloc's segments, ...).
    pub heap: u64,
    /// Mappings of a file (executables, libraries, mapped data, memfd and /dev/shm files).
    pub file: u64,
    /// `[stack]` and thread stacks: private anonymous mappings just above a small inaccessible
    /// (`---p`) guard mapping of at most 64 KiB.
    pub stack: u64,
    /// Everything else: shared anonymous mappings, `[vdso]`, `[vvar]`, ...
    pub other: u64,
    /// Accessible mappings counted in `heap` (how many), a hint of the allocator's spread.
    pub heap_mappings: u32,
}

impl SmapsSplit {
    pub fn rss(&self) -> u64 {
        self.heap + self.file + self.stack + self.other
    }

    /// Adds another process's split (tree totals).
    pub fn add(&mut self, other: &SmapsSplit) {
        self.heap += other.heap;
        self.file += other.file;
        self.stack += other.stack;
        self.other += other.other;
        self.heap_mappings += other.heap_mappings;
    }
}

/// Reads and splits /proc/PID/smaps.
pub fn smaps_split(pid: u32) -> Result<SmapsSplit> {
    Ok(smaps_reading(pid)?.split)
}

/// What one read of /proc/PID/smaps says: the split, and sums of other fields of the mappings.
/// Exact (the kernel walks the page tables), where statm's counters are kept per CPU and read
/// without summing them (off by megabytes while a process grows fast).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmapsReading {
    pub split: SmapsSplit,
    /// The `Pss` lines summed; `None` when the kernel shows none.
    pub pss: Option<u64>,
    /// The `Anonymous` lines summed: resident anonymous pages, in any mapping.
    pub anonymous: u64,
}

/// Reads /proc/PID/smaps once: its split, PSS and anonymous memory (through a live thread when
/// the main thread has exited: [`crate::process_dir`]).
pub fn smaps_reading(pid: u32) -> Result<SmapsReading> {
    let path = crate::process_dir(pid).join("smaps");
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Ok(parse_smaps(&String::from_utf8_lossy(&bytes)))
}

/// Thread stacks have a guard page (glibc: one page by default, Rust: one page) below them; a
/// PROT_NONE gap larger than this is rather the unused reserve of a glibc arena heap (64 MiB).
const MAX_GUARD: u64 = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Heap,
    File,
    Stack,
    Other,
}

/// The split of the text of an smaps file.
pub fn split_smaps_text(text: &str) -> SmapsSplit {
    parse_smaps(text).split
}

/// `kB` figure of a field line's rest ("   12 kB"), in bytes.
fn field_bytes(rest: &str) -> u64 {
    rest.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap_or(0)
        * 1024
}

/// The split of the text of an smaps file, and the sums of its `Pss` and `Anonymous` lines.
pub fn parse_smaps(text: &str) -> SmapsReading {
    let mut split = SmapsSplit::default();
    let mut pss: Option<u64> = None;
    let mut anonymous = 0;
    let mut classifier = Classifier::default();
    let mut current: Option<Kind> = None;
    for line in text.lines() {
        if let Some(header) = mapping_header(line) {
            current = classifier.kind_of(&header);
            if current == Some(Kind::Heap) && !header.perms.starts_with("---") {
                split.heap_mappings += 1;
            }
        } else if current.is_none() {
            // Fields of a repeated mapping (or before the first one).
        } else if let Some(rest) = line.strip_prefix("Pss:") {
            *pss.get_or_insert(0) += field_bytes(rest);
        } else if let Some(rest) = line.strip_prefix("Anonymous:") {
            anonymous += field_bytes(rest);
        } else if let Some(rest) = line.strip_prefix("Rss:") {
            let bytes = field_bytes(rest);
            match current {
                Some(Kind::Heap) => split.heap += bytes,
                Some(Kind::File) => split.file += bytes,
                Some(Kind::Stack) => split.stack += bytes,
                Some(Kind::Other) => split.other += bytes,
                None => {}
            }
        }
    }
    SmapsReading {
        split,
        pss,
        anonymous,
    }
}

/// Classifies the mappings of a maps or smaps text, in the order listed: a thread stack is known
/// by the guard mapping just below it, so each mapping's kind depends on the previous one.
#[derive(Default)]
struct Classifier {
    /// (end address, whether a small private inaccessible anonymous mapping) of the previous mapping.
    previous: Option<(u64, bool)>,
}

impl Classifier {
    /// The kind of the next mapping, `None` for a repeat. The kernel lists mappings in address
    /// order, but a process that changes its mappings while the file is read (brk growing
    /// `[heap]`) can have one listed again when the kernel resumes after the changed one: a
    /// python3 growing its heap read as twice its size. A mapping that starts below the previous
    /// one's end is such a repeat.
    fn kind_of(&mut self, header: &Header) -> Option<Kind> {
        if self.previous.is_some_and(|(end, _)| header.start < end) {
            return None;
        }
        let guard_below = matches!(self.previous, Some((end, true)) if end == header.start);
        let size = header.end.saturating_sub(header.start);
        let is_guard = header.anonymous_private() && header.perms.starts_with("---");
        self.previous = Some((header.end, is_guard && size <= MAX_GUARD));
        Some(header.kind(guard_below))
    }
}

/// The accessible heap mappings (start, end) of a maps or smaps text, in address order: the
/// mappings whose `Rss` makes [`SmapsSplit::heap`].
pub(crate) fn heap_ranges(text: &str) -> Vec<(u64, u64)> {
    let mut classifier = Classifier::default();
    text.lines()
        .filter_map(mapping_header)
        .filter(|h| classifier.kind_of(h) == Some(Kind::Heap) && !h.perms.starts_with("---"))
        .map(|h| (h.start, h.end))
        .collect()
}

struct Header<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    name: &'a str,
}

impl Header<'_> {
    fn anonymous_private(&self) -> bool {
        (self.name.is_empty() || self.name.starts_with("[anon:")) && self.perms.ends_with('p')
    }

    fn kind(&self, guard_below: bool) -> Kind {
        match self.name {
            "[heap]" => Kind::Heap,
            "[stack]" => Kind::Stack,
            n if n.starts_with('/') => Kind::File,
            _ if self.anonymous_private() && guard_below && !self.perms.starts_with("---") => {
                Kind::Stack
            }
            _ if self.anonymous_private() => Kind::Heap,
            _ => Kind::Other,
        }
    }
}

/// A mapping's first line ("start-end perms offset dev inode [name]"); None for the field lines
/// ("Rss:   12 kB"), whose first word ends with ':'.
fn mapping_header(line: &str) -> Option<Header<'_>> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let name = fields.next().unwrap_or("").trim();
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    Some(Header {
        start,
        end,
        perms,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d000000000-55d000001000 r--p 00000000 08:01 1835 /usr/bin/prog
Size:                  4 kB
Rss:                   4 kB
55d000100000-55d000300000 rw-p 00000000 00:00 0          [heap]
Size:               2048 kB
Rss:                1000 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Rss:                 512 kB
7f0000100000-7f0004000000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f1000000000-7f1000001000 ---p 00000000 00:00 0 
Rss:                   0 kB
7f1000001000-7f1000801000 rw-p 00000000 00:00 0 
Rss:                  16 kB
7f2000000000-7f2000010000 rw-s 00000000 00:01 77 /dev/shm/x (deleted)
Rss:                  64 kB
7f3000000000-7f3000010000 rw-s 00000000 00:01 78 
Rss:                   8 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0          [stack]
Rss:                  20 kB
7ffd10000000-7ffd10002000 r-xp 00000000 00:00 0          [vdso]
Rss:                   4 kB
";

    #[test]
    fn each_mapping_lands_in_its_kind() {
        let s = split_smaps_text(SMAPS);
        // [heap] 1000 + the arena's used part 512; its 63 MiB PROT_NONE reserve is no guard.
        assert_eq!(s.heap, (1000 + 512) * 1024);
        // the program's text + the /dev/shm file
        assert_eq!(s.file, (4 + 64) * 1024);
        // [stack] + the thread stack above its one-page guard
        assert_eq!(s.stack, (20 + 16) * 1024);
        // shared anonymous + [vdso]
        assert_eq!(s.other, (8 + 4) * 1024);
        assert_eq!(s.rss(), (4 + 1000 + 512 + 16 + 64 + 8 + 20 + 4) * 1024);
        // [heap] and the arena (reserves and guards are not accessible)
        assert_eq!(s.heap_mappings, 2);
        // No Pss lines: none read.
        assert_eq!(parse_smaps(SMAPS).pss, None);
    }

    #[test]
    fn a_mapping_listed_again_is_counted_once() {
        // `[heap]` grew by brk while the file was read: the kernel resumed at the old end, inside
        // the grown mapping, and listed it again with its new size.
        let text = SMAPS.replace(
            "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n",
            "55d000100000-55d000500000 rw-p 00000000 00:00 0          [heap]\nRss:                3000 kB\nPss:                3000 kB\nAnonymous:          3000 kB\n7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n",
        );
        assert_ne!(text, SMAPS);
        let r = parse_smaps(&text);
        assert_eq!(r.split, split_smaps_text(SMAPS));
        assert_eq!((r.pss, r.anonymous), (None, 0));
    }

    #[test]
    fn pss_and_anonymous_are_summed_beside_the_split() {
        let text = SMAPS
            .replace(
                "Rss:                1000 kB\n",
                "Rss:                1000 kB\nPss:                 700 kB\nPss_Dirty:           9 kB\nAnonymous:          1000 kB\n",
            )
            .replace(
                "Rss:                  20 kB\n",
                "Rss:                  20 kB\nPss:                  20 kB\nAnonymous:            12 kB\n",
            );
        let r = parse_smaps(&text);
        assert_eq!(r.split, split_smaps_text(SMAPS));
        assert_eq!((r.pss, r.anonymous), (Some(720 * 1024), 1012 * 1024));
        let own = smaps_reading(std::process::id()).unwrap();
        let rss = own.split.rss();
        assert!(own.pss.is_some_and(|p| p > 0 && p <= rss), "{own:?}");
        assert!(own.anonymous > 0 && own.anonymous <= rss, "{own:?}");
    }

    #[test]
    fn own_split_adds_up_to_own_rss() {
        let s = smaps_split(std::process::id()).unwrap();
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap();
        let rss_kb: u64 = rollup
            .lines()
            .find_map(|l| l.strip_prefix("Rss:"))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap();
        assert!(s.heap > 0 && s.file > 0 && s.stack > 0, "{s:?}");
        // Two reads a moment apart: equal within what the test harness may touch meanwhile.
        let diff = s.rss().abs_diff(rss_kb * 1024);
        assert!(
            diff < 8 << 20,
            "split {} vs rollup {}",
            s.rss(),
            rss_kb * 1024
        );
    }

    #[test]
    fn missing_process_names_the_file() {
        let err = smaps_split(u32::MAX - 1).unwrap_err().to_string();
        assert!(err.contains("/proc/4294967294/smaps"), "{err}");
    }
}
