//! Heap residency of a real child process read both ways (PAGEMAP_SCAN and the plain pagemap
//! read) agrees, and with the heap `Rss` of its smaps.

mod common;

use common::Tree;
use procmem::{smaps_split, PagemapMethod, ResidencyReader};

/// A python3 holding 24 MiB it wrote (malloc'd: `bytearray` goes through the allocator), then
/// blocked on stdin, so that the readings see the same heap.
fn holding_child() -> Tree {
    let mut tree = Tree::spawn(
        "data = bytearray(24 << 20)\n\
         for i in range(0, len(data), 4096): data[i] = 1\n\
         say(f'pid {os.getpid()}')\n\
         sys.stdin.readline()\n",
    );
    tree.next_pid();
    tree
}

#[test]
fn scan_and_plain_read_agree_on_a_child_and_sum_to_smaps_heap() {
    let tree = holding_child();
    let mut scan = ResidencyReader::new();
    let scanned = scan.read(tree.root).unwrap();
    let mut plain = ResidencyReader::with_method(PagemapMethod::Read);
    let read = plain.read(tree.root).unwrap();
    let split = smaps_split(tree.root).unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let (major, minor) = kernel_version(&release);
    if (major, minor) >= (6, 7) {
        assert_eq!(scan.method(), PagemapMethod::Scan, "kernel {release}");
    }
    assert_eq!(plain.method(), PagemapMethod::Read);
    // python3 has heap pages it read and never wrote (the zero page): the plain read tells them
    // by their frame number, visible to root only; without, it counts them as resident.
    if is_root() {
        assert_eq!(scanned, read);
    } else {
        assert!(read.resident_bytes() >= scanned.resident_bytes());
        assert_eq!(read.mappings.len(), scanned.mappings.len());
    }
    assert!(scanned.resident_bytes() >= 24 << 20, "{scanned:?}");
    // The same mappings as smaps's heap, page for page (python3 touches nothing while it waits).
    assert_eq!(scanned.resident_bytes(), split.heap, "{split:?}");
    assert_eq!(scanned.mappings.len() as u32, split.heap_mappings);
}

#[test]
fn a_missing_process_names_the_file() {
    let err = ResidencyReader::new()
        .read(u32::MAX - 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/proc/4294967294/maps"), "{err}");
}

fn kernel_version(release: &str) -> (u32, u32) {
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (next(), next())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
