//! Progress of long work (issue 20): drawn on stderr when it is a terminal (here a pseudo-terminal
//! from util-linux's `script`), never when it is a pipe or a file, so logs stay clean.
use std::path::Path;
use std::process::{Command, Stdio};

use testkit::{alloclens, alloclens_exe};

/// A real trace of about 40 k calls (the churn workload).
fn recorded(dir: &Path) -> std::path::PathBuf {
    let trace = dir.join("churn.alt");
    let out = alloclens()
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .args([
            "--",
            &alloclens_exe(),
            "workload",
            "churn",
            "--ops",
            "20000",
        ])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    trace
}

/// What a progress bar leaves: carriage returns, erase-line sequences, its words.
fn has_progress(stderr: &str) -> bool {
    stderr.contains('\r') || stderr.contains("\x1b[") || stderr.contains("records (")
}

#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recorded(dir.path());
    let record = alloclens()
        .arg("record")
        .arg("-o")
        .arg(dir.path().join("again.alt"))
        .args([
            "--",
            &alloclens_exe(),
            "workload",
            "churn",
            "--ops",
            "20000",
        ])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let analyze = alloclens().arg("analyze").arg(&trace).output().unwrap();
    let report = alloclens()
        .arg("report")
        .arg(&trace)
        .arg("-o")
        .arg(dir.path().join("t.html"))
        .output()
        .unwrap();
    let export = alloclens()
        .arg("export")
        .arg(&trace)
        .arg("--parquet")
        .arg(dir.path().join("pq"))
        .output()
        .unwrap();
    for (what, out) in [
        ("record", record),
        ("analyze", analyze),
        ("report", report),
        ("export", export),
    ] {
        assert!(out.status.success(), "{what}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!has_progress(&stderr), "{what}: {stderr:?}");
        assert!(!stderr.contains("recording ["), "{what}: {stderr:?}");
    }
}

/// `script -qec CMD /dev/null`: CMD with a pseudo-terminal as stdin, stdout and stderr; what it
/// wrote to the terminal. None when util-linux's script is not installed.
fn on_a_terminal(cmd: &str) -> Option<String> {
    let out = Command::new("script")
        .args(["-qec", cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// 401370 -> "401,370", as indicatif's {human_pos} writes it.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn progress_is_drawn_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let trace_path = recorded(dir.path());
    let bin = assert_cmd::cargo::cargo_bin("alloclens");
    let (bin, trace) = (bin.display(), trace_path.display());
    testkit::require!(program "script");
    let analyze = on_a_terminal(&format!("{bin} analyze {trace} > /dev/null"))
        .expect("script (util-linux) runs the command on a terminal");
    // Its total is the trace's record count, from the chunk index: every call the analysis counts
    // (the workload prints no marker).
    let json = testkit::json_stdout([
        "analyze".as_ref(),
        trace_path.as_os_str(),
        "--json".as_ref(),
    ]);
    let calls: u64 = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats"]["calls_total"].as_u64().unwrap())
        .sum();
    let total = thousands(calls);
    assert!(
        analyze.contains(&format!("{total}/{total} records (")) && analyze.contains("ETA"),
        "{total}: {analyze:?}"
    );
    let export = on_a_terminal(&format!(
        "{bin} export {trace} --parquet {} > /dev/null",
        dir.path().join("pq").display()
    ))
    .unwrap();
    assert!(
        export.contains("exporting") && export.contains("records ("),
        "{export:?}"
    );
    let record = on_a_terminal(&format!(
        "{bin} record -o {} -- {bin} workload churn --ops 200000 > /dev/null",
        dir.path().join("r.alt").display()
    ))
    .unwrap();
    assert!(
        record.contains("recording [") && record.contains(" events ("),
        "{record:?}"
    );
    let quiet = on_a_terminal(&format!(
        "{bin} record -q -o {} -- {bin} workload churn --ops 200000 > /dev/null",
        dir.path().join("q.alt").display()
    ))
    .unwrap();
    assert!(!quiet.contains("recording ["), "{quiet:?}");
}
