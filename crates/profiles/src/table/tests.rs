use super::test_writer::{TestTable, FILE_BYTES, STACKS_AREA};
use super::*;

fn written(t: &TestTable) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("7-0.prof");
    t.write(&path);
    (dir, path)
}

fn error_of(t: &TestTable) -> String {
    let (_dir, path) = written(t);
    match Table::open(&path) {
        Ok(_) => panic!("opened a bad table"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn header_entries_stacks_and_modules_read_back() {
    let mut t = TestTable::new(4096, 7, "/usr/bin/prog");
    let a = t.stack(&[0x1010, 0x2020], 3, [10.0, 4000.0, 2.5, 1e6]);
    let b = t.stack(&[0x3030], 1, [1.0, 8192.0, 0.0, 0.0]);
    t.live(0, 2, a, 0x7000, 100);
    t.live(5, 0, b, 0x8000, 8192);
    t.live(9, 4, a, 0, 100); // freed: addr 0
    t.module(0x1000, 0x4000, &[0xde, 0xad, 0xbe], "/usr/bin/prog");
    t.module(0x7f00_0000, 0x7f00_1000, &[], "/lib/libc.so.6");
    t.put64(layout::header::LIVE_BYTES, 12345);
    let (_dir, path) = written(&t);

    let table = Table::open(&path).unwrap();
    let h = table.header();
    assert_eq!(
        (h.pid, h.sample_bytes, h.state, h.live_bytes, h.exe.as_str()),
        (7, 4096, STATE_RUNNING, 12345, "/usr/bin/prog")
    );
    let live = table.live_entries();
    assert_eq!(live.torn, 0);
    let addrs: Vec<(u64, u32, u64)> = live
        .entries
        .iter()
        .map(|e| (e.addr, e.stack, e.size))
        .collect();
    assert_eq!(addrs, [(0x7000, a, 100), (0x8000, b, 8192)]);
    let stacks = table.stacks().unwrap();
    assert_eq!(stacks.len(), 3, "the empty stack and two: {stacks:?}");
    assert_eq!((stacks[0].id, stacks[0].frames.len()), (0, 0));
    let sa = stacks.iter().find(|s| s.id == a).unwrap();
    assert_eq!(sa.frames, [0x1010, 0x2020]);
    assert_eq!(
        (
            sa.samples,
            sa.alloc_objects,
            sa.alloc_space,
            sa.alloc_space_var
        ),
        (3, 10.0, 4000.0, 1e6)
    );
    let modules = table.modules().unwrap();
    assert_eq!(modules.len(), 2);
    assert_eq!(modules[0].build_id, [0xde, 0xad, 0xbe]);
    assert_eq!(modules[0].path, "/usr/bin/prog");
    assert_eq!(
        (modules[1].start, modules[1].path.as_str()),
        (0x7f00_0000, "/lib/libc.so.6")
    );
}

/// An entry whose writer is in the middle of it (odd sequence number) is skipped and counted.
#[test]
fn an_entry_being_written_is_skipped() {
    let mut t = TestTable::new(4096, 7, "/p");
    let a = t.stack(&[0x1010], 1, [1.0, 100.0, 0.0, 0.0]);
    t.live(0, 2, a, 0x7000, 100);
    t.live(1, 3, a, 0x7100, 100);
    let (_dir, path) = written(&t);
    let live = Table::open(&path).unwrap().live_entries();
    assert_eq!((live.entries.len(), live.torn), (1, 1));
}

/// A stack record not yet committed (depth_commit 0) is not read.
#[test]
fn an_uncommitted_stack_is_not_read() {
    let mut t = TestTable::new(4096, 7, "/p");
    let a = t.stack(&[0x1010], 1, [1.0, 100.0, 0.0, 0.0]);
    t.put32(STACKS_AREA + a as usize * 8, 0);
    let (_dir, path) = written(&t);
    let table = Table::open(&path).unwrap();
    assert_eq!(table.stack(a).unwrap(), None);
    assert_eq!(table.stacks().unwrap().len(), 1);
}

#[test]
fn a_foreign_file_is_refused_naming_it() {
    let mut t = TestTable::new(4096, 7, "/p");
    t.bytes[..8].copy_from_slice(b"NOTPROF!");
    let e = error_of(&t);
    assert!(
        e.contains("7-0.prof") && e.contains("no ALPROF01 magic"),
        "{e}"
    );
}

#[test]
fn another_version_is_refused() {
    let mut t = TestTable::new(4096, 7, "/p");
    t.put32(layout::header::VERSION, 2);
    let e = error_of(&t);
    assert!(
        e.contains("version 2") && e.contains("reads version 1"),
        "{e}"
    );
}

#[test]
fn a_truncated_file_is_refused() {
    let mut t = TestTable::new(4096, 7, "/p");
    t.bytes.truncate(FILE_BYTES / 2);
    let e = error_of(&t);
    assert!(e.contains("truncated"), "{e}");
    t.bytes.truncate(100);
    let e = error_of(&t);
    assert!(e.contains("too short"), "{e}");
}

/// Offsets that point outside the file are refused before anything is read there.
#[test]
fn offsets_outside_the_file_are_refused() {
    for (field, value, word) in [
        (layout::header::STACKS_OFF, FILE_BYTES as u64, "stack area"),
        (layout::header::INDEX_SLOTS, u64::MAX / 4, "index area"),
        (layout::header::ENTRIES_OFF, 12, "entry area"),
        (layout::header::MODULES_BYTES, 1 << 40, "module area"),
    ] {
        let mut t = TestTable::new(4096, 7, "/p");
        t.put64(field, value);
        let e = error_of(&t);
        assert!(e.contains(word), "{word}: {e}");
    }
    let mut t = TestTable::new(4096, 7, "/p");
    t.put32(layout::header::BUCKET_COUNT, 3);
    assert!(error_of(&t).contains("entries for 3 buckets"));
}

/// A live entry or index slot naming a stack past the area, and a stack deeper than the
/// table's maximum, are errors, not reads outside the file.
#[test]
fn damaged_records_are_errors() {
    let mut t = TestTable::new(4096, 7, "/p");
    let a = t.stack(&[0x1010], 1, [1.0, 100.0, 0.0, 0.0]);
    t.put32(STACKS_AREA + a as usize * 8, 1000);
    let (_dir, path) = written(&t);
    let e = Table::open(&path)
        .unwrap()
        .stacks()
        .unwrap_err()
        .to_string();
    assert!(e.contains("999 frames"), "{e}");
    let table = Table::open(&path).unwrap();
    let e = table.stack(u32::MAX).unwrap_err().to_string();
    assert!(e.contains("outside the stack area"), "{e}");

    let mut t = TestTable::new(4096, 7, "/p");
    t.module(0x1000, 0x2000, &[1; 300], "/p");
    // The build-id's length past the record.
    let modules_off = t.bytes.len() - (512 << 10);
    t.put32(modules_off + 4, 5000);
    let (_dir, path) = written(&t);
    let e = Table::open(&path)
        .unwrap()
        .modules()
        .unwrap_err()
        .to_string();
    assert!(e.contains("module record") && e.contains("damaged"), "{e}");
}
