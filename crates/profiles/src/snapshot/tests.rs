use super::*;
use crate::table::test_writer::TestTable;

const S: u64 = 4096;

fn p(n: u64) -> f64 {
    1.0 - (-(n as f64) / S as f64).exp()
}

/// A table of a process gone without its final update: 3 live blocks of 100 bytes and 1 of
/// 1 MiB on two stacks, and a stack that only allocated.
fn table() -> TestTable {
    let mut t = TestTable::new(S, 4_000_000, "/bin/prog");
    let a = t.stack(&[0x1010, 0x2020], 5, [50.0, 5000.0, 40.0, 4e5]);
    let b = t.stack(&[0x3030], 1, [1.0, 1048576.0, 0.0, 0.0]);
    t.stack(&[0x4040], 2, [20.0, 2000.0, 16.0, 1.6e5]);
    for slot in 0..3 {
        t.live(slot * 3, 2, a, 0x7000 + slot as u64 * 0x100, 100);
    }
    t.live(1000, 6, b, 0x9000_0000, 1 << 20);
    t.put64(crate::table::test_writer::LIVE_BYTES, 1 << 21);
    t.module(0x1000, 0x5000, &[0xab, 0xcd], "/bin/prog");
    t
}

fn taken(t: &TestTable) -> (tempfile::TempDir, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("4000000-0.prof");
    t.write(&path);
    let s = take(&path).unwrap();
    (dir, s)
}

#[test]
fn in_use_is_estimated_from_live_entries_and_allocated_from_stack_records() {
    let (_dir, s) = taken(&table());
    assert_eq!(s.state, ProcessState::Killed, "nothing maps it");
    assert_eq!(s.counters.live_bytes, 1 << 21);
    assert_eq!(s.stacks.len(), 3);
    // Largest in use first: the 1 MiB block, always sampled, stands for itself.
    let big = &s.stacks[0];
    assert_eq!(big.frames, [0x3030]);
    assert_eq!(
        big.inuse_space,
        Estimate {
            value: (1 << 20) as f64,
            stderr: 0.0
        }
    );
    let small = &s.stacks[1];
    assert_eq!(small.live_samples, 3);
    let p = p(100);
    assert!((small.inuse_objects.value - 3.0 / p).abs() < 1e-9);
    assert!((small.inuse_space.value - 300.0 / p).abs() < 1e-6);
    let se = (3.0 * (1.0 - p) * 100.0 * 100.0 / (p * p)).sqrt();
    assert!((small.inuse_space.stderr - se).abs() < 1e-6);
    assert_eq!(
        small.alloc_space,
        Estimate {
            value: 5000.0,
            stderr: 400_000f64.sqrt()
        }
    );
    let only_allocated = &s.stacks[2];
    assert_eq!(
        (
            only_allocated.live_samples,
            only_allocated.inuse_space.value
        ),
        (0, 0.0)
    );
    let totals = s.totals();
    assert!((totals.inuse_space.value - ((1 << 20) as f64 + 300.0 / p)).abs() < 1e-6);
    assert!((totals.alloc_space.stderr - 560_000f64.sqrt()).abs() < 1e-9);
}

#[test]
fn an_exited_process_is_said_so() {
    let mut t = table();
    t.put32(crate::table::test_writer::STATE, crate::table::STATE_EXITED);
    assert_eq!(taken(&t).1.state, ProcessState::Exited);
}

/// A live entry whose stack record is not committed yet is in use under the empty stack.
#[test]
fn a_block_of_an_uncommitted_stack_is_under_the_empty_stack() {
    let mut t = table();
    let c = t.stack(&[0x5050], 1, [1.0, 64.0, 0.0, 0.0]);
    t.put32(crate::table::test_writer::STACKS_AREA + c as usize * 8, 0);
    t.live(2000, 2, c, 0xa000, 5000);
    let (_dir, s) = taken(&t);
    let empty = s
        .stacks
        .iter()
        .find(|s| s.stack == 0)
        .expect("the empty stack");
    assert_eq!((empty.live_samples, empty.frames.len()), (1, 0));
}

/// The pprof profile: a sample per stack with the rounded estimates, the standard errors and
/// the pid as labels; the executable's mapping first, with its build-id.
#[test]
fn the_profile_carries_estimates_and_their_errors() {
    let (_dir, mut s) = taken(&table());
    let made = s.to_pprof(&SnapshotOptions::default());
    let p = &made.profile;
    let str_of = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(p.sample.len(), 3);
    assert_eq!(str_of(p.mapping[0].filename), "/bin/prog");
    assert_eq!(str_of(p.mapping[0].build_id), "abcd");
    let big = &p.sample[0];
    assert_eq!(big.value, [1, 1 << 20, 1, 1 << 20]);
    let labels: Vec<(&str, i64)> = big.label.iter().map(|l| (str_of(l.key), l.num)).collect();
    assert_eq!(
        labels,
        [
            ("pid", 4_000_000),
            ("alloc_objects_stderr", 0),
            ("alloc_space_stderr", 0),
            ("inuse_objects_stderr", 0),
            ("inuse_space_stderr", 0)
        ]
    );
    let small = &p.sample[1];
    let stderr = small
        .label
        .iter()
        .find(|l| str_of(l.key) == "inuse_space_stderr")
        .unwrap();
    assert_eq!(stderr.num, s.stacks[1].inuse_space.stderr.round() as i64);
    assert!(stderr.num > 0);
    let sum: i64 = p.sample.iter().map(|x| x.value[3]).sum();
    assert_eq!(made.totals[3], sum);
    assert!(p
        .comment
        .iter()
        .any(|&c| str_of(c).contains("sampled once per 4096 bytes")));
    assert!(s.stacks.iter().all(|st| st.site.is_some()), "sites named");
}

/// In a directory, the newest table of each process; one that cannot be read is said, not fatal.
#[test]
fn a_directory_gives_the_newest_table_of_each_process() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    std::fs::create_dir(&agent).unwrap();
    let mut old = table();
    old.put64(crate::table::test_writer::START, 10);
    old.write(&agent.join("4000000-0.prof"));
    table().write(&agent.join("4000000-1.prof"));
    TestTable::new(S, 4_000_001, "/bin/other").write(&agent.join("4000001-0.prof"));
    std::fs::write(agent.join("4000002-0.prof"), b"junk").unwrap();
    let taken = take_all(&Target::Path(dir.path().to_path_buf())).unwrap();
    let files: Vec<String> = taken
        .snapshots
        .iter()
        .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["4000000-1.prof", "4000001-0.prof"]);
    assert_eq!(taken.warnings.len(), 1);
    assert!(
        taken.warnings[0].contains("4000002-0.prof"),
        "{:?}",
        taken.warnings
    );

    let empty = tempfile::tempdir().unwrap();
    let e = take_all(&Target::Path(empty.path().to_path_buf()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("holds no heap profile table") && e.contains("watch --profile"),
        "{e}"
    );
}
