//! `alloclens record` end to end: the real binary on real programs.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use trace::{EndReason, Op, Record, TraceReader};

mod common;
use common::alloclens;

fn traced() -> &'static Path {
    static P: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("traced");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/tests/progs/traced.c");
        let ok = Command::new("cc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-ldl")
            .status()
            .unwrap();
        assert!(ok.success());
        (dir, exe)
    });
    path
}

fn count(path: &Path, op: Op, size: u64) -> usize {
    let mut r = TraceReader::open(path).unwrap();
    let mut n = 0;
    for s in 0..r.streams().len() {
        for rec in r.records(s).unwrap() {
            if let Record::Event(e) = rec.unwrap() {
                n += usize::from(e.op == op && e.size == size);
            }
        }
    }
    n
}

#[test]
fn output_and_exit_status_are_the_programs() {
    let dir = tempfile::tempdir().unwrap();
    let plain = Command::new(traced())
        .args(["ops", "300"])
        .output()
        .unwrap();
    let out = dir.path().join("ops.alt");
    let traced_run = alloclens()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["ops", "300"])
        .output()
        .unwrap();
    assert_eq!(traced_run.stdout, plain.stdout);
    assert_eq!(
        traced_run.stderr, plain.stderr,
        "-q: nothing of ours on stderr"
    );
    assert_eq!(traced_run.status.code(), Some(0));
    assert_eq!(count(&out, Op::Pvalloc, 1107), 300);

    let code = alloclens()
        .args(["record", "-q", "-o"])
        .arg(dir.path().join("e.alt"))
        .arg("--")
        .arg(traced())
        .args(["exitcode", "10"])
        .status()
        .unwrap();
    assert_eq!(code.code(), Some(42));
}

#[test]
fn death_by_signal_becomes_128_plus_n_and_the_trace_says_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kill.alt");
    let run = alloclens()
        .args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["sigkill", "2000"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(128 + 9));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("signal 9 (SIGKILL)"), "{stderr}");
    assert!(stderr.contains("1 truncated"), "{stderr}");
    let r = TraceReader::open(&out).unwrap();
    assert_eq!(r.streams()[0].end, Some(EndReason::Lost));
    assert!(r.streams()[0].info.truncated);
    assert_eq!(r.trailer().unwrap().exit, "signal 9 (SIGKILL)");
    assert_eq!(count(&out, Op::Malloc, 1601), 2000);
}

#[test]
fn marker_lines_pass_through_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.alt");
    let plain = Command::new(traced())
        .args(["mark", "100"])
        .output()
        .unwrap();
    let run = alloclens()
        .args(["record", "-q", "--marker", r"^phase (\w+)", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["mark", "100"])
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(run.stdout, plain.stdout);
    let mut r = TraceReader::open(&out).unwrap();
    let labels: Vec<String> = r
        .records(0)
        .unwrap()
        .filter_map(|x| match x.unwrap() {
            Record::Marker(m) => Some(m.label),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["first", "second", "third"]);
}

#[test]
fn allocator_variant_runs_behind_the_shim() {
    if !Path::new("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2").exists() {
        eprintln!("skipped: jemalloc not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("je.alt");
    let run = alloclens()
        .args(["record", "-q", "-a", "jemalloc", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["threads", "1000", "2"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let r = TraceReader::open(&out).unwrap();
    assert_eq!(r.header().allocator, "jemalloc");
    assert_eq!(count(&out, Op::Malloc, 2001), 1000);
}

#[test]
fn unwritable_output_is_a_one_line_error() {
    let run = alloclens()
        .args(["record", "-o", "/nonexistent-dir/x.alt", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("cannot create the trace file '/nonexistent-dir/x.alt'"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);
}

#[test]
fn a_missing_command_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = alloclens()
        .args(["record", "-o"])
        .arg(dir.path().join("x.alt"))
        .args(["--", "no-such-command-xyz"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("command not found: 'no-such-command-xyz'"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // The cause is not repeated after the message that already quotes it.
    assert_eq!(stderr.matches("os error").count(), 0, "{stderr}");
}
