//! Sizes are printed in binary units everywhere a user reads them.

use std::process::Stdio;

use testkit::{alloclens, alloclens_exe};

#[test]
fn record_gives_the_trace_size_in_binary_units() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let out = alloclens()
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", &alloclens_exe(), "workload", "churn"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size > 1024, "{size} bytes: too small to need a unit");
    let expected = trace::human_bytes(size);
    assert!(expected.ends_with("iB"), "{expected}");
    assert!(
        stderr.contains(&format!("({expected}, ")),
        "the summary should give {size} bytes as {expected}: {stderr}"
    );
    assert!(!stderr.contains(" MB"), "{stderr}");
}
