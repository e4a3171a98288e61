//! `alloclens run` loses nothing and hides nothing: a full disk, output without a final newline,
//! alloclens killed, absurd options. Real processes, a real tmpfs, real signals.
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use testkit::{alloclens, csv_rows, SmallDisk};

fn run_into(out_dir: &Path, args: &[&str]) -> Output {
    alloclens()
        .arg("run")
        .arg("-o")
        .arg(out_dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_full_disk_keeps_the_table_results_json_and_whole_runs() {
    let Some(disk) = SmallDisk::mount("512k") else {
        return;
    };
    let markers = testkit::program("markers");
    let out_dir = disk.path().join("r");
    // About 370 KB of markers.csv per run: the second run does not fit.
    let out = run_into(
        &out_dir,
        &[
            "-a",
            "glibc",
            "-r",
            "2",
            "--marker",
            r"event (\d+)",
            "--program-output",
            "discard",
            "--",
            markers.to_str().unwrap(),
            "10000",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("Summary"), "the table is printed: {stdout}");
    let r = testkit::results(&out_dir);
    assert_eq!(r.runs.len(), 2);
    assert_eq!(r.runs[1].markers, 10000, "the measurement is all there");
    let problems: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("alloclens: error: "))
        .collect();
    assert!(!problems.is_empty(), "{stderr}");
    assert_eq!(
        problems, r.incomplete_files,
        "the same lines in results.json"
    );
    assert!(
        problems
            .iter()
            .all(|p| p.contains("are missing (No space left on device")),
        "{stderr}"
    );
    // markers.csv holds whole runs only (10000 rows each, in run order), still parses, and when it
    // misses a run (its rows alone, 33 to 60 bytes each, cannot all fit) its line says which.
    let rows = csv_rows(out_dir.join("markers.csv"));
    assert_eq!(rows.len() % 10000, 0, "whole runs: {} rows", rows.len());
    let kept = rows.len() / 10000;
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["run"], (i / 10000).to_string());
        assert_eq!(row["label"], (i % 10000).to_string());
    }
    assert!(kept < 2, "two runs of markers cannot fit in 512 KiB");
    let line = problems
        .iter()
        .find(|p| p.starts_with("markers.csv"))
        .expect("markers.csv says what it misses");
    let missing = if kept == 0 { "runs 0-1" } else { "run 1" };
    assert!(
        line.starts_with(&format!("markers.csv: the rows of {missing} are missing")),
        "{line}"
    );
    // samples.csv parses and holds whole runs from run 0 on.
    let samples = csv_rows(out_dir.join("samples.csv"));
    assert!(samples.windows(2).all(|w| w[0]["run"] <= w[1]["run"]));
}

#[test]
fn results_json_gets_room_when_the_disk_is_full_at_the_end() {
    let Some(disk) = SmallDisk::mount("512k") else {
        return;
    };
    let markers = testkit::program("markers");
    let out_dir = disk.path().join("r");
    let filler = disk.path().join("filler");
    let flag = disk.path().join("flag");
    // Run 0 prints 1000 markers; run 1 fills the disk to the last byte. One sample per run (at the
    // start, --interval 1h): run 1 writes no new page after the fill, so nothing of it can be cut
    // to free one, and only giving up earlier runs makes room for results.json.
    let script = format!(
        "if [ -e {f} ]; then cat /dev/zero > {z} 2>/dev/null; else {m} 1000; fi; touch {f}; true",
        m = markers.display(),
        f = flag.display(),
        z = filler.display()
    );
    let out = run_into(
        &out_dir,
        &[
            "-a",
            "glibc",
            "-r",
            "2",
            "--marker",
            r"event (\d+)",
            "--program-output",
            "discard",
            "--interval",
            "1h",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("Summary"), "{stdout}");
    let r = testkit::results(&out_dir);
    assert_eq!(r.runs.len(), 2);
    assert!(
        stderr.contains("to make room for results.json"),
        "our own rows were given up, not the user's file: {stderr}"
    );
    assert!(filler.exists());
    // One line per file that lost something, and results.json names them too.
    let problems = stderr
        .lines()
        .filter(|l| l.starts_with("alloclens: error:"))
        .count();
    assert_eq!(problems, r.incomplete_files.len(), "{stderr}");
    let _ = csv_rows(out_dir.join("markers.csv"));
}

fn every_byte_expected() -> Vec<u8> {
    let mut expected = Vec::new();
    for _ in 0..4 * 8 {
        expected.extend(0..=255u8);
    }
    expected.extend_from_slice(b"last line");
    expected
}

#[test]
fn pty_output_is_byte_exact_in_save_mode() {
    let work = tempfile::tempdir().unwrap();
    let bytes = testkit::program("bytes");
    for extra in [&["--pty"][..], &[][..]] {
        let out_dir = work.path().join(format!("r{}", extra.len()));
        let mut args = vec!["-a", "glibc", "-r", "1", "--program-output", "save"];
        args.extend_from_slice(extra);
        args.extend(["--", bytes.to_str().unwrap()]);
        let out = run_into(&out_dir, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let saved = std::fs::read(out_dir.join("output/run-0.log")).unwrap();
        assert!(
            saved == every_byte_expected(),
            "{extra:?}: {} bytes saved, {} written; tail {:?}",
            saved.len(),
            every_byte_expected().len(),
            String::from_utf8_lossy(&saved[saved.len().saturating_sub(12)..])
        );
    }
}

#[test]
fn pty_output_is_byte_exact_in_pass_mode() {
    let work = tempfile::tempdir().unwrap();
    let bytes = testkit::program("bytes");
    let out = run_into(
        &work.path().join("r"),
        &[
            "-a",
            "glibc",
            "-r",
            "1",
            "--pty",
            "--",
            bytes.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let expected = every_byte_expected();
    assert!(out.stdout.len() > expected.len());
    let (passed, ours) = out.stdout.split_at(expected.len());
    assert!(
        passed == expected,
        "the command's bytes come first, unchanged"
    );
    assert!(
        ours.starts_with(b"\nSummary"),
        "the table starts on a line of its own: {:?}",
        String::from_utf8_lossy(&ours[..ours.len().min(20)])
    );
}

/// The start time (field 22 of /proc/PID/stat) of a live process, None when it is gone or a zombie
/// (in a container whose init does not reap, killed orphans stay zombies).
fn live_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[test]
fn sigkill_of_alloclens_kills_the_whole_tree() {
    let work = tempfile::tempdir().unwrap();
    let pids_file = work.path().join("pids");
    // The shell, a child in its group, and one that left the group with setsid.
    let script = format!(
        "sleep 300 & echo $! >> {f}; setsid sleep 300 & echo $! >> {f}; echo $$ >> {f}; wait",
        f = pids_file.display()
    );
    let mut alloclens_run = alloclens()
        .args([
            "run",
            "-a",
            "glibc",
            "-r",
            "1",
            "--program-output",
            "discard",
            "-o",
        ])
        .arg(work.path().join("r"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let read_pids = || -> Vec<i32> {
        std::fs::read_to_string(&pids_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    assert!(
        testkit::poll_until(Duration::from_secs(20), || read_pids().len() == 3),
        "the command did not start its tree"
    );
    // Identify each process by pid and start time, so a reused pid does not count as alive.
    let tree: Vec<(i32, u64)> = read_pids()
        .into_iter()
        .map(|pid| (pid, live_start_time(pid).expect("tree member alive")))
        .collect();
    // Let a few samples see the tree (the watchdog learns the members from them).
    std::thread::sleep(Duration::from_millis(800));
    alloclens_run.kill().unwrap(); // SIGKILL
    alloclens_run.wait().unwrap();
    let alive = || -> Vec<i32> {
        tree.iter()
            .filter(|(pid, start)| live_start_time(*pid) == Some(*start))
            .map(|(pid, _)| *pid)
            .collect()
    };
    testkit::poll_until(Duration::from_secs(10), || alive().is_empty());
    let survivors = alive();
    for pid in &survivors {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        survivors.is_empty(),
        "still running after alloclens was killed: {survivors:?}"
    );
}

#[test]
fn huge_durations_get_one_line_naming_the_option_and_its_maximum() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("r");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "run",
                "-o",
                out,
                "--interval",
                "99999999999999999999s",
                "--",
                "true",
            ],
            "--interval '99999999999999999999s' is too long: at most 1h",
        ),
        (
            &["run", "-o", out, "--timeout", "1e300s", "--", "true"],
            "--timeout '1e300s' is too long: at most 365 days",
        ),
        (
            &["run", "-o", out, "--timeout", "1e300", "--", "true"],
            "--timeout '1e300' is too long: at most 365 days",
        ),
        (
            &["workload", "twowave", "--hold-ms", "18446744073709551615"],
            "hold_ms: must be at most 86400000",
        ),
        (
            &["record", "-o", out, "--linger", "1e300", "--", "true"],
            "--linger must be a number of seconds from 0 to 604800",
        ),
    ];
    for (args, needle) in cases {
        let o = alloclens()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn a_repeated_param_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let out = run_into(
        &work.path().join("r"),
        &["--param", "a=1", "--param", "a=2", "--", "echo", "{a}"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "alloclens: error: --param a is given twice (give all its values in one: --param a=V1,V2,...)"
    );
}

#[test]
fn a_baseline_that_is_not_a_variant_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let out = run_into(
        &work.path().join("r"),
        &["-a", "glibc", "--baseline", "tcmalloc", "--", "true"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--baseline 'tcmalloc' is not one of the variants (glibc)"),
        "{stderr}"
    );
    assert!(!work.path().join("r").exists(), "nothing ran");
}

#[test]
fn force_leaves_only_this_sessions_files_and_never_a_users_file() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("r");
    let session = |repeats: &str, force: bool| {
        let mut args = vec!["-a", "glibc", "-r", repeats, "--program-output", "save"];
        if force {
            args.push("--force");
        }
        args.extend(["--", "echo", "hello"]);
        run_into(&dir, &args)
    };
    assert_eq!(session("3", false).status.code(), Some(0));
    std::fs::write(dir.join("report.html"), "an earlier report").unwrap();
    let out = session("1", true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut logs: Vec<String> = std::fs::read_dir(dir.join("output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    logs.sort();
    assert_eq!(logs, ["run-0.log"], "the logs of runs 1 and 2 are gone");
    assert!(!dir.join("report.html").exists(), "the old report is gone");
    let runs: Vec<String> = csv_rows(dir.join("samples.csv"))
        .into_iter()
        .map(|r| r["run"].clone())
        .collect();
    assert!(runs.iter().all(|r| r == "0"), "{runs:?}");

    // Something alloclens did not write: refused, and nothing is removed.
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let out = session("1", true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'notes.txt'"), "{stderr}");
    assert!(dir.join("notes.txt").exists());
    assert!(dir.join("results.json").exists());
    assert!(dir.join("output/run-0.log").exists());
}

/// `alloclens run ARGS` with `input` on its stdin (a pipe).
fn run_with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = alloclens()
        .arg("run")
        .arg("-o")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn stdin_reaches_a_single_run_and_several_runs_are_warned() {
    let work = tempfile::tempdir().unwrap();
    let out = run_with_stdin(
        &work.path().join("one"),
        &["-a", "glibc", "-r", "1", "--", "wc", "-c"],
        b"data\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout.lines().next(), Some("5"), "{stdout}");
    assert!(!stderr.contains("warning"), "{stderr}");

    let out = run_with_stdin(
        &work.path().join("two"),
        &["-a", "glibc", "-r", "2", "--", "wc", "-c"],
        b"data\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let counts: Vec<&str> = stdout.lines().take(2).collect();
    assert_eq!(counts, ["0", "0"], "each run reads /dev/null: {stdout}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("stdin")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].starts_with("alloclens: warning: stdin is not passed on"));
}

/// Issue 24: `--export-json DIR/results.json -o DIR` replaced results.json with the summary (exit 0,
/// `report` and `diff` failed after). Exports onto the run's own files (also through a symbolic
/// link, or onto a file that does not exist yet), onto the results directory, two exports onto one
/// file, a directory, a missing folder: each is one error line before anything runs (the command,
/// which would leave a file behind, never starts) and nothing is created.
#[test]
fn issue_24_export_paths_are_refused_before_any_run_when_they_would_lose_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("D");
    let ran = dir.path().join("RAN");
    std::fs::create_dir(dir.path().join("E")).unwrap();
    std::os::unix::fs::symlink("../D/samples.csv", dir.path().join("E/link.csv")).unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--export-json".into(), p("D/results.json")],
            "results.json",
        ),
        (
            vec!["--export-csv".into(), p("D/./markers.csv")],
            "markers.csv",
        ),
        (vec!["--export-csv".into(), p("E/link.csv")], "samples.csv"),
        (
            vec!["--export-markdown".into(), p("D/output/run-1.log")],
            "run-1.log",
        ),
        (
            vec!["--export-json".into(), p("D")],
            "is the results directory",
        ),
        (
            vec![
                "--export-json".into(),
                p("x.txt"),
                "--export-csv".into(),
                p("E/../x.txt"),
            ],
            "both write",
        ),
        (vec!["--export-csv".into(), p("E")], "is a directory"),
        (
            vec!["--export-csv".into(), p("nowhere/x.csv")],
            "does not exist",
        ),
    ];
    for (exports, says) in cases {
        let out = alloclens()
            .args(["run", "-a", "glibc", "-r", "1", "-o"])
            .arg(&d)
            .args(&exports)
            .args(["--", "sh", "-c", &format!("touch '{}'", ran.display())])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{exports:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{exports:?}: {stderr}");
        assert!(
            stderr.starts_with("alloclens: error: --export-") && stderr.contains(says),
            "{exports:?}: {stderr}"
        );
        assert!(!ran.exists(), "{exports:?}: the command ran");
        assert!(
            !d.exists(),
            "{exports:?}: the results directory was created"
        );
        assert!(!dir.path().join("x.txt").exists());
    }
    // An export of its own in the results directory is fine, and results.json stays the run's.
    let out = alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "-o"])
        .arg(&d)
        .arg("--export-json")
        .arg(d.join("summary.json"))
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(testkit::results(&d).runs.len(), 1);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    assert!(summary.is_array(), "{summary}");
    let report = alloclens().arg("report").arg(&d).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    // Beside a results directory whose parents do not exist yet: they are created with it.
    let nested = dir.path().join("new/runs/first");
    let out = alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "-o"])
        .arg(&nested)
        .arg("--export-json")
        .arg(nested.with_extension("json"))
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(nested.with_extension("json").is_file());
}

/// Issue 24: `--throughput` with a regex that has no capture group, or that never matches, gave no
/// column, no word, and a table still "ranked by throughput". The first is a one-line usage error
/// before anything runs; the second a warning naming the regex, and the table says what it is
/// really ranked by. Runs where it did not match get no markers-per-second figure in its place.
#[test]
fn issue_24_a_throughput_regex_that_cannot_give_a_figure_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("RAN");
    let out = alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "--throughput", "ops/s"])
        .arg("-o")
        .arg(dir.path().join("a"))
        .args(["--", "sh", "-c", &format!("touch '{}'", ran.display())])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "alloclens: error: --throughput 'ops/s' has no capture group: put the number in parentheses, e.g. 'ops/s ([0-9.]+)'"
    );
    assert!(!ran.exists() && !dir.path().join("a").exists());

    let runs = |regex: &str, name: &str| {
        alloclens()
            .args(["run", "-a", "glibc", "-r", "2", "--marker", "^event (\\d+)"])
            .args(["--throughput", regex, "--program-output", "discard"])
            .arg("-o")
            .arg(dir.path().join(name))
            .args([
                "--",
                "sh",
                "-c",
                "echo event 1; echo event 2; echo done 250 ops",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = runs("^never (\\d+)", "b");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("(ranked by median wall time;"), "{stdout}");
    assert!(!stdout.contains("throughput"), "{stdout}");
    let warning = stderr
        .lines()
        .find(|l| l.contains("--throughput"))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert!(
        warning
            .starts_with("alloclens: warning: --throughput '^never (\\d+)' matched no output line")
            && warning.contains("ranked by median wall time"),
        "{warning}"
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("b/results.json")).unwrap())
            .unwrap();
    assert!(results["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["throughput"].is_null()));
    // ranked_by is left out when it is the wall time (results-format.md).
    assert!(results["summary"][0]["ranked_by"].is_null(), "{results}");
    // A regex that matches: ranked by it, with its figure.
    let out = runs("^done (\\d+) ops", "c");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        stdout.contains("(ranked by throughput, highest first;"),
        "{stdout}"
    );
    assert!(stdout.contains(" 250 /s "), "{stdout}");
}

/// Waits for `child` at most `limit`; kills it (SIGKILL) and returns None when it did not end.
fn wait_at_most(child: &mut std::process::Child, limit: Duration) -> Option<Output> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return Some(Output {
                status: child.wait().unwrap(),
                stdout: Vec::new(),
                stderr: stderr.into_bytes(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether `pid` is still a running `sleep` (not gone, not a zombie).
fn sleeping(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.contains("(sleep)") && !s.contains(") Z "))
}

/// Issue 24: SIGTERM was ignored while a `--prepare` command ran (alloclens waited for it to end,
/// 30 s here). Now the prepare command is stopped and alloclens ends as on SIGTERM during a run:
/// 130, a warning naming --prepare, results.json marked interrupted.
#[test]
fn issue_24_sigterm_during_prepare_stops_it_and_ends_as_during_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("prepare.pid");
    let mut child = alloclens()
        .args(["run", "-a", "glibc", "-r", "2", "-o"])
        .arg(dir.path().join("d"))
        .arg("--prepare")
        .arg(format!("echo $$ > '{}'; exec sleep 30", pidfile.display()))
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let pid = loop {
        match std::fs::read_to_string(&pidfile) {
            Ok(p) if p.ends_with('\n') => break p.trim().to_string(),
            _ if started.elapsed() > Duration::from_secs(20) => panic!("--prepare never ran"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // The shell has exec'd sleep (before, a slow machine could still be in the shell after a fixed
    // 200 ms, and the check below that sleep was stopped could not fail).
    testkit::wait_until(
        "the prepare shell to exec sleep",
        Duration::from_secs(20),
        || sleeping(&pid),
    );
    // SAFETY: kill with the pid of a child this test started and a signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_at_most(&mut child, Duration::from_secs(10))
        .expect("alloclens still waited for --prepare 10 s after SIGTERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("run 0: --prepare `echo")
            && stderr.contains("was stopped: alloclens was interrupted"),
        "{stderr}"
    );
    assert!(!sleeping(&pid), "the prepare command outlived alloclens");
    let results = testkit::results(&dir.path().join("d"));
    assert!(results.interrupted);
    assert_eq!(results.runs.len(), 0);
}

/// Issue 24: `--timeout` did not bound `--prepare`. A prepare command that outlasts it is stopped,
/// and the run counts as failed (not run), as when it fails.
#[test]
fn issue_24_timeout_bounds_prepare() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "--timeout", "1s", "-o"])
        .arg(dir.path().join("d"))
        .args(["--prepare", "sleep 30", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_at_most(&mut child, Duration::from_secs(15))
        .expect("--prepare ran on past --timeout 1s");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not run: --prepare `sleep 30` was stopped after --timeout 1s"),
        "{stderr}"
    );
}
