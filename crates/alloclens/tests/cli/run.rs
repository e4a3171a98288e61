//! `alloclens run` end to end: real child trees, real allocators via LD_PRELOAD, real /proc readings.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use runner::AllocatorCheck;

use testkit::{alloclens, alloclens_exe, csv_rows};

/// Runs `alloclens run` with `args` into a fresh directory; returns (exit code, stderr, dir).
fn run(args: &[&str]) -> (i32, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let out = alloclens()
        .arg("run")
        // Python's buffering must be its default for the pty test (some machines export this).
        .env_remove("PYTHONUNBUFFERED")
        .arg("-o")
        .arg(&out_dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    )
}

fn results(dir: &Path) -> runner::RunResults {
    testkit::results(&dir.join("results"))
}

#[test]
fn every_fork_worker_is_sampled() {
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "1",
        "--interval",
        "20ms",
        "--program-output",
        "save",
        "--",
        &alloclens_exe(),
        "workload",
        "forkworkers",
        "--workers",
        "4",
        "--events",
        "300",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // The workers announce their own pids; each must appear in the samples.
    let output = std::fs::read_to_string(dir.path().join("results/output/run-0.log")).unwrap();
    let announced: BTreeSet<String> = output
        .lines()
        .filter_map(|l| {
            l.split_once(" started pid ")
                .map(|(_, pid)| pid.trim().to_string())
        })
        .collect();
    assert_eq!(announced.len(), 4, "{output}");
    let samples = csv_rows(dir.path().join("results/samples.csv"));
    let sampled: BTreeSet<String> = samples
        .iter()
        .filter(|r| r["scope"] == "process")
        .map(|r| r["pid"].clone())
        .collect();
    for pid in &announced {
        assert!(
            sampled.contains(pid),
            "worker {pid} never sampled; sampled {sampled:?}"
        );
    }
    let r = results(dir.path());
    assert!(r.runs[0].memory.distinct_processes >= 5);
}

#[test]
fn tree_totals_are_the_sum_of_the_process_rows() {
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "1",
        "--",
        &alloclens_exe(),
        "workload",
        "tree",
        "--procs",
        "3",
        "--mb",
        "8",
        "--seconds",
        "0.6",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let samples = csv_rows(dir.path().join("results/samples.csv"));
    let mut by_time: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for row in &samples {
        let entry = by_time.entry(row["t_s"].clone()).or_default();
        let pss: u64 = row["pss"].parse().unwrap();
        if row["scope"] == "total" {
            entry.1 = pss;
        } else {
            entry.0 += pss;
            entry.2 += 1;
        }
    }
    assert!(
        by_time.values().any(|v| v.2 == 3),
        "the three processes were never sampled together"
    );
    for (t, (sum, total, _)) in by_time {
        assert_eq!(sum, total, "at t={t}");
    }
    // Each process holds 8 MiB resident: the peak total PSS must show at least 3 x 8 MiB.
    let peak = results(dir.path()).runs[0].memory.pss.peak;
    assert!(peak >= 3 * 8 * 1024 * 1024, "peak PSS {peak}");
}

#[test]
fn preloaded_allocator_is_verified_in_the_maps() {
    testkit::require!(allocator "jemalloc");
    let (code, stderr, dir) = run(&["-a", "glibc,jemalloc", "-r", "1", "--", "sleep", "0.4"]);
    assert_eq!(code, 0, "{stderr}");
    let r = results(dir.path());
    let check = |variant: &str| {
        r.runs
            .iter()
            .find(|x| x.variant == variant)
            .unwrap()
            .allocator_check
            .clone()
    };
    assert_eq!(check("jemalloc"), AllocatorCheck::Loaded);
    assert_eq!(check("glibc"), AllocatorCheck::NotApplicable);
}

#[test]
fn a_program_that_drops_ld_preload_is_reported() {
    testkit::require!(allocator "jemalloc");
    let (code, stderr, dir) = run(&[
        "-a",
        "jemalloc",
        "-r",
        "1",
        "--",
        "env",
        "-u",
        "LD_PRELOAD",
        "sleep",
        "0.5",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        results(dir.path()).runs[0].allocator_check,
        AllocatorCheck::NotLoaded
    );
    assert!(stderr.contains("NOT mapped"), "{stderr}");
}

#[test]
fn each_marker_line_gets_one_sample() {
    // 100 ms between events: each marker's PSS comes from a full sample the main thread takes
    // after the line, and is left empty ("late") once the next line has arrived; on a loaded
    // 2-core machine that sample took longer than the 30 ms this test used to leave.
    let script = "import time\nfor i in range(12):\n    print(f'event {i}', flush=True)\n    time.sleep(0.1)\ntime.sleep(0.3)\n";
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "2",
        "--marker",
        r"^event (\d+)",
        "--",
        "python3",
        "-c",
        script,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let markers = csv_rows(dir.path().join("results/markers.csv"));
    assert_eq!(markers.len(), 24);
    for run in ["0", "1"] {
        let labels: Vec<String> = markers
            .iter()
            .filter(|m| m["run"] == run)
            .map(|m| m["label"].clone())
            .collect();
        assert_eq!(labels, (0..12).map(|i| i.to_string()).collect::<Vec<_>>());
        assert!(markers
            .iter()
            .filter(|m| m["run"] == run)
            .all(|m| !m["pss"].is_empty()));
    }
    let samples = csv_rows(dir.path().join("results/samples.csv"));
    let marker_totals = samples
        .iter()
        .filter(|r| r["kind"] == "marker" && r["scope"] == "total")
        .count();
    assert_eq!(marker_totals, 24);
    let r = results(dir.path());
    assert_eq!(r.runs[0].markers, 12);
    assert_eq!(r.runs[0].throughput_source.as_deref(), Some("markers"));
}

#[test]
fn twowave_shows_glibc_keeping_what_jemalloc_returns() {
    testkit::require!(allocator "jemalloc");
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc,jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0",
        "-r",
        "1",
        "--marker",
        r"phase: (\S+)",
        "--program-output",
        "discard",
        "--",
        &alloclens_exe(),
        "workload",
        "twowave",
        "--wave-mb",
        "48",
        "--hold-ms",
        "600",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let markers = csv_rows(dir.path().join("results/markers.csv"));
    let rss_at = |variant: &str, label: &str| -> f64 {
        markers
            .iter()
            .find(|m| m["variant"] == variant && m["label"] == label)
            .unwrap()["rss"]
            .parse()
            .unwrap()
    };
    // Retention: resident memory at the end of the hold over resident memory with both waves live.
    let retained = |variant: &str| {
        rss_at(variant, "end") / rss_at(variant, "freed-a").max(rss_at(variant, "wave-b"))
    };
    let glibc = retained("glibc");
    let jemalloc = retained("jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0");
    assert!(glibc > 0.85, "glibc retained {glibc:.2} of its peak");
    assert!(
        jemalloc < 0.75,
        "jemalloc retained {jemalloc:.2} of its peak"
    );
}

#[test]
fn braces_that_name_no_param_are_left_alone_with_a_note() {
    let (code, stderr, _dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "1",
        "--",
        "sh",
        "-c",
        "test '{threads}' = '{threads}'",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("{threads} in the command is not a --param"),
        "{stderr}"
    );
}

#[test]
fn params_are_substituted_and_summarised_per_point() {
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "1",
        "--param",
        "n=1,3",
        "--env",
        "COUNT={n}",
        "--throughput",
        r"rate (\d+)",
        "--",
        "sh",
        "-c",
        "echo rate {n}; test \"$COUNT\" = {n}",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let r = results(dir.path());
    let runs = &r.runs;
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].params["n"], "3");
    assert_eq!(runs[1].throughput, Some(3.0));
    assert_eq!(r.summary.len(), 2);
}

#[test]
fn failures_are_reported_not_hidden() {
    let (code, stderr, dir) = run(&["-a", "glibc", "-r", "1", "--", "sh", "-c", "exit 3"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("exit 3"), "{stderr}");
    let status = results(dir.path()).runs[0].ending.status;
    assert_eq!(status.and_then(|s| s.code), Some(3), "{status:?}");
    let (_, stderr, dir) = run(&["-a", "glibc", "-r", "1", "--", "sh", "-c", "kill -SEGV $$"]);
    assert!(stderr.contains("signal 11"), "{stderr}");
    let status = results(dir.path()).runs[0].ending.status;
    assert_eq!(status.and_then(|s| s.signal), Some(11), "{status:?}");
}

#[test]
fn bad_input_gets_one_line_errors() {
    let cases: [(&[&str], &str); 4] = [
        (&["-a", "nosuchalloc", "--", "true"], "nosuchalloc"),
        (
            &["-a", "jemalloc:no_such_setting=1", "--", "true"],
            "no_such_setting",
        ),
        (
            &["-a", "glibc", "--", "no-such-command-xyz"],
            "command not found",
        ),
        (
            &["-a", "glibc", "--marker", "event (", "--", "true"],
            "not a valid regular expression",
        ),
    ];
    for (args, needle) in cases {
        let (code, stderr, _dir) = run(args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn an_existing_output_directory_is_refused_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "-o"])
        .arg(dir.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    let out = alloclens()
        .args(["run", "--force", "-a", "glibc", "-r", "1", "-o"])
        .arg(dir.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_timeout_stops_the_whole_tree() {
    let started = Instant::now();
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc",
        "-r",
        "1",
        "--timeout",
        "500ms",
        "--",
        "sh",
        "-c",
        "sleep 30 & sleep 30; wait",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(15));
    let r = results(dir.path());
    assert!(r.runs[0].ending.timed_out);
}

#[test]
fn ctrl_c_keeps_the_results_gathered_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let marker_file = dir.path().join("grandchild.pid");
    let script = format!("sleep 60 & echo $! > {}; wait", marker_file.display());
    let mut child = alloclens()
        .args([
            "run",
            "-a",
            "glibc",
            "-r",
            "3",
            "--program-output",
            "discard",
            "-o",
        ])
        .arg(&out_dir)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !marker_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let r = testkit::results(&out_dir);
    assert!(r.interrupted);
    assert_eq!(r.runs.len(), 1);
    assert!(r.runs[0].memory.samples > 0);
    let grandchild: i32 = std::fs::read_to_string(&marker_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false);
    assert!(
        !alive,
        "the grandchild {grandchild} outlived the interrupted run"
    );
}

#[test]
fn pty_delivers_the_markers_of_a_program_that_buffers_pipes() {
    // No flush: into a pipe Python buffers every line until exit; on a terminal it writes each line.
    let script = "import time\nfor i in range(5):\n    print(f'event {i}')\n    time.sleep(0.15)\n";
    let marker_spread = |extra: &[&str]| -> f64 {
        let mut args = vec!["-a", "glibc", "-r", "1", "--marker", r"^event (\d+)"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "python3", "-c", script]);
        let (code, stderr, dir) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        let markers = csv_rows(dir.path().join("results/markers.csv"));
        assert_eq!(markers.len(), 5, "every marker line is recorded either way");
        let t = |m: &BTreeMap<String, String>| m["t_s"].parse::<f64>().unwrap();
        t(&markers[4]) - t(&markers[0])
    };
    let with_pty = marker_spread(&["--pty"]);
    let with_pipe = marker_spread(&[]);
    assert!(
        with_pty > 0.45,
        "with a pty the lines arrive as printed, 0.15 s apart: spread {with_pty:.3} s"
    );
    assert!(
        with_pipe < 0.1,
        "into a pipe they arrive together at exit: spread {with_pipe:.3} s"
    );
}

/// A program whose main thread calls pthread_exit (another thread runs on, holding 16 MiB): its
/// memory is sampled through the live thread, and the preloaded allocator is verified, where
/// /proc/PID shows the zombie leader (no memory, no exe) and its samples were silently missing.
#[test]
fn a_program_whose_main_thread_exited_is_sampled() {
    testkit::require!(allocator "jemalloc");
    let program = testkit::program("leader_exit");
    let program = program.to_str().unwrap();
    let (code, stderr, dir) = run(&[
        "-a",
        "glibc,jemalloc",
        "-r",
        "1",
        "--interval",
        "50ms",
        "--",
        program,
        "16",
        "1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let samples = csv_rows(dir.path().join("results/samples.csv"));
    for variant in ["glibc", "jemalloc"] {
        let held = samples
            .iter()
            .filter(|r| r["variant"] == variant && r["scope"] == "process")
            .filter(|r| r["comm"] == "leader_exit")
            .filter(|r| r["rss"].parse::<u64>().unwrap() >= 16 << 20)
            .count();
        assert!(held >= 5, "{variant}: {held} samples of the 16 MiB held");
    }
    let r = results(dir.path());
    for run in &r.runs {
        let peak = run.memory.pss.peak;
        assert!(peak >= 16 << 20, "{}: peak PSS {peak}", run.variant);
    }
    let jemalloc = r.runs.iter().find(|x| x.variant == "jemalloc").unwrap();
    assert_eq!(jemalloc.allocator_check, AllocatorCheck::Loaded);
}
