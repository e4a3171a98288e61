//! How alloclens ends: quietly with status 0 when its stdout's reader went away (`| head`), 2 for a
//! command line clap refuses, 1 for any other failure (docs/cli.md, "Exit status").

use std::path::Path;
use std::process::{Command, Output, Stdio};

use testkit::{alloclens, alloclens_exe, record};

/// Runs `cmd` with a stdout whose reader is already closed, so the first write fails with EPIPE
/// whatever the timing (a `head -c1` reader may or may not have exited when the write comes).
fn with_closed_stdout(cmd: &mut Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    cmd.stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn trace(dir: &Path) -> std::path::PathBuf {
    let t = dir.join("t.alt");
    record(
        &t,
        &[],
        &[&alloclens_exe(), "workload", "events", "--events", "4"],
    );
    t
}

#[test]
fn every_command_ends_quietly_when_its_reader_went_away() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let t = t.to_str().unwrap();
    let quiet: &[&[&str]] = &[
        &["--help"],
        &["allocators"],
        &["allocators", "--json"],
        &["workload", "events", "--events", "4"],
        &["analyze", t],
        &["analyze", t, "--json"],
        &["diff", t, t],
        &["diff", t, t, "--json"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in quiet {
        let out = with_closed_stdout(alloclens().args(*args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
    // `run` still says where its results are and ends with the runs' status.
    for json in [false, true] {
        let results = dir.path().join(format!("r{json}"));
        let mut cmd = alloclens();
        cmd.args(["run", "-a", "glibc", "-r", "1", "-o"])
            .arg(&results)
            .args(json.then_some("--json"))
            .args(["--", "true"]);
        let out = with_closed_stdout(&mut cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "run json={json}: {stderr}");
        assert!(!stderr.contains("error"), "run json={json}: {stderr}");
        assert!(stderr.contains("results in"), "run json={json}: {stderr}");
        assert!(results.join("results.json").is_file());
    }
}

/// A stdout that cannot be written (`> /dev/full`) is an error that says so, in one line, for every
/// command that prints; `run` and `watch` keep their results directory and say where it is.
#[test]
fn every_command_names_standard_output_when_it_cannot_write_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let t = t.to_str().unwrap();
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let error = "cannot write to standard output: No space left on device";
    let one_line: &[&[&str]] = &[
        &["--help"],
        &["--version"],
        &["run", "--help"],
        &["allocators"],
        &["allocators", "--json"],
        &["workload", "events", "--events", "4"],
        &["analyze", t],
        &["analyze", t, "--json"],
        &["diff", t, t],
        &["diff", t, t, "--json"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in one_line {
        let out = alloclens()
            .args(*args)
            .stdin(Stdio::null())
            .stdout(full())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("alloclens: error: ") && stderr.contains(error),
            "{args:?}: {stderr}"
        );
    }
    for command in ["run", "watch"] {
        let results = dir.path().join(command);
        let mut cmd = alloclens();
        cmd.arg(command);
        if command == "run" {
            cmd.args(["-a", "glibc", "-r", "1"]);
        }
        let out = cmd
            .arg("-o")
            .arg(&results)
            .args(["--", "true"])
            .stdin(Stdio::null())
            .stdout(full())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains(error), "{command}: {stderr}");
        assert!(results.is_dir(), "{command}: {stderr}");
        if command == "run" {
            assert!(stderr.contains("alloclens: results in"), "{stderr}");
        }
    }
}

/// The status and stderr of `alloclens ARGS`.
fn status(args: &[&str]) -> (Option<i32>, String) {
    let out = alloclens()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn usage_errors_exit_2_failures_exit_1_and_commands_pass_their_status_through() {
    // What clap refuses: 2, with clap's usage message.
    for args in [
        &["run", "--no-such-option", "--", "true"][..],
        &["allocators", "extra"],
        &["no-such-command"],
        // (`record -- true` was one until -o got a default name: issue 20.)
        &["record", "-o", "x.alt"],
    ] {
        let (code, stderr) = status(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage:"), "{args:?}: {stderr}");
    }
    // Everything else that fails: 1, one line.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.alt");
    let out = dir.path().join("r");
    for args in [
        &["analyze", missing.to_str().unwrap()][..],
        &[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--param",
            "x",
            "--",
            "true",
        ],
    ] {
        let (code, stderr) = status(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("alloclens: error: "), "{stderr}");
    }
    // record ends with the command's status, run with 1 when a run failed.
    let t = dir.path().join("t.alt");
    let (code, stderr) = status(&[
        "record",
        "-q",
        "-o",
        t.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 2",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, stderr) = status(&[
        "run",
        "-a",
        "glibc",
        "-r",
        "1",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
}
