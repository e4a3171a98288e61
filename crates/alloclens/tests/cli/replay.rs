//! `alloclens replay`: traces recorded from the built-in workloads replayed under real allocators;
//! a damaged trace, a trace of a newer format, an allocator that crashes or hangs.

use std::path::{Path, PathBuf};

use serde_json::Value;
use testkit::{
    alloclens, alloclens_exe, event, installed, json_stdout, process_info, Calls, TraceFile,
};

/// Records `alloclens workload ARGS` into DIR/NAME.alt (phases marked from `phase: NAME` lines).
fn record(dir: &Path, name: &str, workload: &[&str]) -> PathBuf {
    let trace = dir.join(format!("{name}.alt"));
    let mut cmd = alloclens();
    cmd.arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--marker", "phase: (\\S+)", "--"])
        .arg(alloclens_exe())
        .arg("workload")
        .args(workload);
    testkit::succeeded(&mut cmd);
    trace
}

/// `alloclens replay TRACE ARGS --json`: every replay's figures.
fn replay(trace: &Path, dir: &Path, args: &[&str]) -> Vec<Value> {
    let out = dir.join(format!(
        "out-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let mut all = vec![
        "replay".to_string(),
        trace.display().to_string(),
        "--json".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    json_stdout(all).as_array().unwrap().clone()
}

/// The trace's calls per entry point, as `analyze` counts them (one process).
fn analysed_calls(trace: &Path) -> Value {
    let a = json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    a["processes"][0]["stats"]["calls"].clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn every_call_of_a_trace_is_performed_under_glibc_and_jemalloc() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(
        dir.path(),
        "churn",
        &["churn", "--ops", "20000", "--slots", "512"],
    );
    let calls = analysed_calls(&trace);
    let mut variants = vec!["glibc"];
    if installed("jemalloc") {
        variants.push("jemalloc");
    }
    let runs = replay(&trace, dir.path(), &["-a", &variants.join(",")]);
    assert_eq!(runs.len(), variants.len());
    for r in &runs {
        assert_eq!(r["ending"], "ok", "{r}");
        let image = &r["images"][0];
        assert_eq!(image["calls_by_op"], calls, "{}", r["variant"]);
        let total: u64 = calls.as_object().unwrap().values().map(u).sum();
        assert_eq!(u(&image["calls"]), total);
        assert_eq!(u(&image["calls_performed"]), total);
        assert_eq!(u(&image["failed_in_replay"]), 0);
        // The allocator received them: the watch agent counted at least the replayed mallocs and
        // frees (the driver's own few allocations come on top).
        let got = &image["allocator_calls"];
        let mallocs = u(&calls["malloc"]) + calls.get("calloc").map_or(0, u);
        assert!(
            u(&got["allocs"]) >= mallocs && u(&got["allocs"]) < mallocs + 200,
            "{got}"
        );
        assert!(u(&got["frees"]) >= u(&calls["free"]), "{got}");
        assert_eq!(
            image["allocator_stats"]["allocator"], r["allocator"],
            "the variant's allocator served the replay"
        );
        // Figures: the RSS peak covers what was live; the ideal peak is the trace's.
        let f = &r["figures"];
        assert!(u(&f["peak_rss"]) >= u(&f["ideal_peak"]), "{f}");
        assert!(u(&f["ideal_peak"]) > 0);
        assert!(f["fragmentation_at_peak"].as_f64().unwrap() >= 1.0, "{f}");
    }
}

#[test]
fn cross_thread_frees_wait_for_their_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(
        dir.path(),
        "xthread",
        &["xthread", "--threads", "2", "--objects", "20000"],
    );
    let calls = analysed_calls(&trace);
    let total: u64 = calls.as_object().unwrap().values().map(u).sum();
    let mut variants = vec!["glibc"];
    if installed("jemalloc") {
        variants.push("jemalloc");
    }
    for args in [
        vec!["-a", "glibc,jemalloc"],
        vec!["-a", "glibc", "--serial"],
    ] {
        let mut args = args;
        if !installed("jemalloc") {
            args[1] = "glibc";
        }
        for r in replay(&trace, dir.path(), &args) {
            assert_eq!(r["ending"], "ok", "{r}");
            let image = &r["images"][0];
            assert_eq!(u(&image["calls_performed"]), total);
            assert_eq!(image["calls_by_op"], calls);
            // Every free reached the allocator with its block (a free performed before its
            // allocation would free nothing, or crash): what is left live at the end is what the
            // trace never frees, plus the driver's own few blocks.
            let live = u(&image["allocator_calls"]["live_blocks"]);
            assert!(
                live < u(&image["never_freed"]) + 100,
                "{live} blocks left live"
            );
            if args.contains(&"--serial") {
                assert_eq!(u(&image["threads"]), 1);
                assert_eq!(u(&image["cross_thread"]), 0);
            } else {
                // Producers and consumers (and main): every object is freed by another thread
                // than the one that made it.
                assert!(u(&image["threads"]) >= 4, "{}", image["threads"]);
                assert!(
                    u(&image["cross_thread"]) >= 2 * 20000,
                    "{}",
                    image["cross_thread"]
                );
            }
        }
    }
}

/// A block freed by another thread is the allocating thread's until its slot is published: the
/// driver writes its pages first. Each round, thread 1 makes a 64 MiB block (above glibc's largest
/// mmap threshold, so free unmaps it) that thread 2, already waiting on its slot, frees at once;
/// thread 2 then makes a small block thread 1 frees before its next round, so one big block is live
/// at a time. Touching the pages after publishing them (the old order) wrote into the unmapped
/// block: SIGSEGV here, "malloc(): unaligned fastbin chunk detected" on small blocks.
#[test]
fn a_cross_thread_free_comes_after_the_blocks_pages_are_written() {
    use trace::Op;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handoff.alt");
    let rounds = 8u64;
    let mut records = Vec::new();
    let mut call = |tid: u32, op: Op, addr: u64, size: u64| {
        records.push(event(records.len() as u64, tid, op, addr, size, 0));
    };
    for r in 0..rounds {
        let (big, small) = (0x1000_0000 + r * (128 << 20), 0x10_0000 + r * 64);
        call(1, Op::Malloc, big, 64 << 20);
        call(2, Op::Free, big, 0);
        call(2, Op::Malloc, small, 32);
        call(1, Op::Free, small, 0);
    }
    TraceFile::new()
        .process(process_info(11, "handoff"), records)
        .write(&path);

    let runs = replay(&path, dir.path(), &["-a", "glibc", "--no-allocator-stats"]);
    let r = &runs[0];
    assert_eq!(r["ending"], "ok", "{r}");
    let image = &r["images"][0];
    assert_eq!(u(&image["threads"]), 2);
    assert_eq!(u(&image["cross_thread"]), 2 * rounds);
    assert_eq!(u(&image["calls_performed"]), 4 * rounds);
}

/// Venice's pattern: wave A freed under wave B. glibc keeps A's pages (its heap cannot shrink
/// below B); jemalloc with dirty_decay_ms=0 returns them at once.
#[test]
fn glibc_retains_the_freed_wave_where_jemalloc_without_decay_returns_it() {
    testkit::require!(allocator "jemalloc");
    let dir = tempfile::tempdir().unwrap();
    let trace = record(
        dir.path(),
        "twowave",
        &["twowave", "--wave-mb", "16", "--hold-ms", "5"],
    );
    let runs = replay(
        &trace,
        dir.path(),
        &["-a", "glibc,jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0"],
    );
    // The phase that frees wave A is the one opened by the `wave-b` line (wave B complete).
    let retained = |r: &Value| {
        let phases = r["images"][0]["phases"].as_array().unwrap();
        let p = phases.iter().find(|p| p["label"] == "wave-b").unwrap();
        (u(&p["figures"]["retained"]), u(&p["figures"]["end_live"]))
    };
    let (glibc, live) = retained(&runs[0]);
    let (jemalloc, _) = retained(&runs[1]);
    let mib = 1 << 20;
    assert!(live > 12 * mib, "wave B is live: {live}");
    assert!(glibc > 10 * mib, "glibc keeps wave A's pages: {glibc}");
    assert!(
        jemalloc < glibc / 2,
        "jemalloc returns them: {jemalloc} vs glibc {glibc}"
    );
}

/// A trace written with the trace crate: mallocs, a free of a block it never allocated, a double
/// free, a block never freed, and a realloc of an unknown block.
fn damaged_trace(path: &Path) {
    use trace::{Event, Op, Record};
    let ev = |seq: u64, op: Op, addr: u64, size: u64, old_addr: u64| {
        Record::Event(Event {
            seq,
            t_ns: seq * 10,
            tid: 42,
            stack: 0,
            op,
            addr,
            size,
            old_addr,
        })
    };
    let records = vec![
        ev(0, Op::Malloc, 0x1000, 100, 0),
        ev(1, Op::Malloc, 0x2000, 200, 0),
        ev(2, Op::Free, 0x1000, 0, 0),
        ev(3, Op::Free, 0x1000, 0, 0),          // double free
        ev(4, Op::Free, 0x9000, 0, 0),          // unknown block
        ev(5, Op::Realloc, 0x3000, 50, 0x8000), // realloc of an unknown block
        ev(6, Op::Free, 0, 0, 0),               // free(NULL)
        ev(7, Op::Malloc, 0, 1 << 40, 0),       // failed in the program
    ];
    TraceFile::new()
        .chunk_records(4)
        .process(process_info(42, "damaged"), records)
        .write(path);
}

#[test]
fn a_damaged_trace_is_replayed_with_its_bad_calls_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("damaged.alt");
    damaged_trace(&trace);
    let runs = replay(&trace, dir.path(), &["-a", "glibc"]);
    let image = &runs[0]["images"][0];
    assert_eq!(runs[0]["ending"], "ok");
    let s = &image["skipped"];
    assert_eq!(u(&s["double_frees"]), 1, "{s}");
    assert_eq!(u(&s["unknown_frees"]), 1, "{s}");
    assert_eq!(u(&s["failed_in_trace"]), 1, "{s}");
    assert_eq!(u(&s["unknown_reallocs_as_malloc"]), 1, "{s}");
    // malloc x2, free, free(NULL), the realloc as malloc.
    assert_eq!(u(&image["calls_performed"]), 5);
    assert_eq!(u(&image["never_freed"]), 2);
    assert_eq!(u(&image["never_freed_bytes"]), 250);

    // The table says what was left out.
    let out = alloclens()
        .args(["replay", "-a", "glibc", "-o"])
        .arg(dir.path().join("table"))
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Left out: 1 frees of unknown blocks, 1 double frees, 1 calls that failed"),
        "{text}"
    );
}

#[test]
fn a_trace_of_a_newer_format_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("new.alt");
    damaged_trace(&trace);
    let mut bytes = std::fs::read(&trace).unwrap();
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&trace, bytes).unwrap();
    let out = alloclens()
        .args(["replay", "-a", "glibc"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("alloclens: error: ") && err.contains("format version 99, newer"),
        "{err}"
    );
}

/// The driver's decoded calls and block table are shared memfd mappings, not in the RSS measured:
/// 400 k malloc/free pairs (6.4 MiB of calls, 3.2 MiB of block table) replay in a heap that
/// never holds more than one 16-byte block.
#[test]
fn the_drivers_own_memory_is_not_in_the_figures() {
    use trace::{Op, Record};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pairs.alt");
    let n = 800_000u64;
    let records: Vec<Record> = (0..n)
        .map(|seq| {
            let addr = 0x10_0000 + (seq / 2) * 32;
            match seq % 2 {
                0 => event(seq, 7, Op::Malloc, addr, 16, 0),
                _ => event(seq, 7, Op::Free, addr, 0, 0),
            }
        })
        .collect();
    TraceFile::new()
        .chunk_records(1 << 18)
        .process(process_info(7, "pairs"), records)
        .write(&path);

    let runs = replay(&path, dir.path(), &["-a", "glibc", "--no-allocator-stats"]);
    let image = &runs[0]["images"][0];
    assert_eq!(u(&image["calls_performed"]), n);
    let before = u(&image["rss_before"]);
    let peak = u(&runs[0]["figures"]["peak_rss"]);
    assert!(
        peak < before + (1 << 20),
        "RSS grew by {} B over the driver's {before} B: the calls mapping is being counted",
        peak - before
    );
    // The driver and the allocator at start: the RSS of an empty replay.
    assert!(before < 16 << 20, "{before}");
}

/// A custom "allocator" whose valloc crashes and whose pvalloc never returns: each is reported
/// with its signal or the timeout, and glibc's replay still runs.
#[test]
fn an_allocator_that_crashes_or_hangs_is_reported_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let lib = testkit::program("libbroken.so");
    for (op, expected) in [("valloc", "signal 11 (SIGSEGV)"), ("pvalloc", "timeout")] {
        let path = dir.path().join(format!("{op}.alt"));
        let call = match op {
            "valloc" => trace::Op::Valloc,
            _ => trace::Op::Pvalloc,
        };
        TraceFile::new()
            .chunk_records(8)
            .process(process_info(9, op), [event(0, 9, call, 0x4000, 100, 0)])
            .write(&path);
        let out = alloclens()
            .args(["replay", "--timeout", "2s", "--no-allocator-stats", "-a"])
            .arg(format!("glibc,broken={}", lib.display()))
            .arg("-o")
            .arg(dir.path().join(op))
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        // The replay table's row of the variant, and under it the note that says how it ended.
        let lines: Vec<&str> = stdout.lines().collect();
        let row = lines
            .iter()
            .rposition(|l| l.trim_start().starts_with("broken"))
            .unwrap_or_else(|| panic!("{stdout}"));
        let note = lines.get(row + 1).copied().unwrap_or_default();
        assert!(
            note.trim_start().starts_with('!') && note.contains(expected),
            "{stdout}"
        );
        assert!(
            stderr.contains(&format!("the replay ended with {expected}")),
            "{stderr}"
        );
        let results = testkit::results(&dir.path().join(op));
        let glibc = &results.runs[0];
        assert_eq!(glibc.variant, "glibc");
        let status = glibc.ending.status;
        assert_eq!(status.and_then(|s| s.code), Some(0), "glibc still ran");
    }
}

/// A trace of a script: the shells' images are small, the workload's is not. The original run shown
/// beside the replay (whose row is the image that held the most) is the workload's, not the first
/// shell's the trace lists.
#[test]
fn the_original_run_beside_the_replay_is_the_image_that_held_the_most() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("script.alt");
    let exe = alloclens_exe();
    let script = format!(
        "sh -c 'sleep 0.2; true'; {} workload churn --ops 50000 --slots 4096; true",
        exe
    );
    testkit::succeeded(
        alloclens()
            .arg("record")
            .arg("-o")
            .arg(&trace)
            .args(["--", "sh", "-c", &script]),
    );
    let analysed = json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let peaks: Vec<(u64, u64)> = analysed["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let rss = &p["memory"]["rss"];
            Some((rss["peak"].as_u64()?, rss["samples"].as_u64()?))
        })
        .collect();
    assert!(peaks.len() >= 2, "images with memory readings: {peaks:?}");
    let (most, readings) = *peaks.iter().max().unwrap();
    let out = testkit::succeeded(
        alloclens()
            .args(["replay", "-a", "glibc", "-o"])
            .arg(dir.path().join("out"))
            .arg(&trace),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Original run"))
        .unwrap_or_else(|| panic!("no original run in:\n{text}"));
    let expected = format!("RSS peak {:.1} MiB", most as f64 / (1u64 << 20) as f64);
    assert!(line.contains(&expected), "{line}\nwanted {expected}");
    // How many readings the figure rests on.
    let expected = format!("(recorded with the trace, {readings} readings)");
    assert!(line.contains(&expected), "{line}\nwanted {expected}");
}

/// With one replay per variant the summary says to use `--runs 3 or more`, as `run` does: replay
/// takes that flag too.
#[test]
fn the_runs_flag_the_summary_suggests_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "churn", &["churn", "--ops", "2000"]);
    let out = testkit::succeeded(
        alloclens()
            .args(["replay", "-a", "glibc", "-o"])
            .arg(dir.path().join("one"))
            .arg(&trace),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let hint = text
        .split("use ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no hint in:\n{text}"));
    assert_eq!(hint, "--runs", "{text}");
    let runs = replay(&trace, dir.path(), &["-a", "glibc", hint, "2"]);
    assert_eq!(runs.len(), 2, "two replays of glibc");
}

/// `--process` of a pid the trace lacks lists the trace's processes, each once, even when a process
/// has several images that are not next to each other in the file (a shell that ran a child, then
/// exec'd).
#[test]
fn a_missing_process_is_refused_with_each_pid_listed_once() {
    use trace::Op;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("images.alt");
    let calls = || {
        vec![
            event(0, 1, Op::Malloc, 0x1000, 64, 0),
            event(1, 1, Op::Free, 0x1000, 0, 0),
        ]
    };
    let mut exec = process_info(10, "after exec");
    exec.exec_index = 1;
    TraceFile::new()
        .process(process_info(10, "sh"), calls())
        .process(process_info(11, "child"), calls())
        .process(exec, calls())
        .write(&trace);
    let out = alloclens()
        .args(["replay", "-a", "glibc", "--process", "99"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(its processes: 10, 11)"), "{err}");
}

/// Ctrl-C (SIGINT) in the middle of many replays: the ones that ended are kept in the results
/// directory, marked interrupted, and the exit status is 130, as for `run`.
#[test]
fn an_interrupted_replay_keeps_the_replays_that_ended() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "churn", &["churn", "--ops", "100000"]);
    let out = dir.path().join("out");
    let mut child = alloclens()
        .args(["replay", "-a", "glibc", "--runs", "5000", "-o"])
        .arg(&out)
        .arg(&trace)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The results directory is made once the trace is decoded and Ctrl-C is handled.
    while !out.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("replay ended before its results directory was made: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Ctrl-C once a replay has ended (results.json is rewritten after each), so there is one to
    // keep; it passed before when none was kept.
    replays_in(&out, 1);
    testkit::succeeded(
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .stdout(std::process::Stdio::null()),
    );
    let ended = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&ended.stderr);
    assert_eq!(ended.status.code(), Some(130), "{err}");
    assert!(err.contains("alloclens: interrupted: "), "{err}");
    let results = testkit::results(&out);
    assert!(results.interrupted);
    let runs = &results.runs;
    assert!(
        !runs.is_empty() && runs.len() < 5000,
        "{} replays",
        runs.len()
    );
    let replayed: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("replay.json")).unwrap()).unwrap();
    assert_eq!(replayed.as_array().unwrap().len(), runs.len());
    // The replay that was under way when Ctrl-C came is not among them as a failure.
    for r in runs {
        let status = r.ending.status;
        assert_eq!(status.and_then(|s| s.code), Some(0), "{r:?}");
    }
}

/// A trace cut short is replayed up to the cut with one warning, printed once (it was printed when
/// the trace was decoded and again under the tables) and kept in results.json.
#[test]
fn a_truncated_trace_is_warned_about_once() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "churn", &["churn", "--ops", "100000"]);
    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.path().join("cut.alt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.path().join("out");
    let ran = testkit::succeeded(
        alloclens()
            .args(["replay", "-a", "glibc", "-o"])
            .arg(&out)
            .arg(&cut),
    );
    let err = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(err.matches("is truncated").count(), 1, "{err}");
    let warnings = testkit::results(&out).warnings;
    assert!(
        warnings.iter().any(|w| w.contains("is truncated")),
        "{warnings:?}"
    );
}

/// On a full disk, replay's own files that could not be written (replay.json, replay.csv, ...) are
/// named on stderr and in results.json's `incomplete_files`, which readers of the directory see.
#[test]
fn a_full_disk_lists_the_replay_files_it_could_not_write_in_results_json() {
    let Some(disk) = testkit::SmallDisk::mount("256k") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "churn", &["churn", "--ops", "200000"]);
    let out_dir = disk.path().join("r");
    let out = alloclens()
        .args(["replay", "-a", "glibc", "-o"])
        .arg(&out_dir)
        .arg(&trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let not_written: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("alloclens: error: replay"))
        .collect();
    assert!(!not_written.is_empty(), "{stderr}");
    let incomplete = testkit::results(&out_dir).incomplete_files;
    for line in not_written {
        let problem = line.trim_start_matches("alloclens: error: ");
        assert!(
            incomplete.iter().any(|i| i == problem),
            "{problem} not in {incomplete:?}"
        );
    }
    // The page made from what is there says what is not (it said nothing).
    let html = testkit::report_page(&out_dir, &dir.path().join("page.html"));
    for problem in &incomplete {
        let shown = format!("not in this directory: {problem}");
        let escaped = shown.replace('&', "&amp;").replace('\'', "&#39;");
        assert!(html.contains(&escaped), "{shown} not on the page");
    }
}

/// Waits (at most a minute) until DIR/results.json holds at least `n` replays.
fn replays_in(dir: &Path, n: usize) {
    for _ in 0..3000 {
        let runs = std::fs::read_to_string(dir.join("results.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["runs"].as_array().map(Vec::len));
        if runs.unwrap_or(0) >= n {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A replay killed (SIGKILL) in the middle leaves a directory `report` reads, whose page says the
/// replay was cut and how many replays it holds (report could not read it).
#[test]
fn a_killed_replay_leaves_a_directory_report_reads() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "churn", &["churn", "--ops", "100000"]);
    let out = dir.path().join("out");
    // SIGKILL leaves the replay's scratch directory behind: in this test's directory.
    let mut child = alloclens()
        .env("TMPDIR", dir.path())
        .args(["replay", "-a", "glibc", "--runs", "5000", "-o"])
        .arg(&out)
        .arg(&trace)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    replays_in(&out, 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let html = testkit::report_page(&out, &dir.path().join("page.html"));
    assert!(
        html.contains("the replay was cut before its end: "),
        "no cut warning"
    );
    assert!(
        html.contains(" of 5000 replays are in this directory"),
        "no count"
    );
}

/// 16 MiB of blocks made in a moment, then 20 s of the original's time with a few calls, then
/// freed in a moment: the mean RSS weighs the quiet phase by its 20 s, not by its 40 calls (or
/// by the microseconds the replay takes to perform them).
#[test]
fn a_quiet_phase_weighs_its_time_not_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let trace = quiet_trace(dir.path());
    let runs = replay(&trace, dir.path(), &["-a", "glibc", "-r", "2"]);
    let f = |r: &Value, k: &str| r["figures"][k].as_f64().unwrap();
    for r in &runs {
        let (mean, over_calls, peak) = (
            f(r, "mean_rss"),
            f(r, "mean_rss_over_calls"),
            f(r, "peak_rss"),
        );
        assert!(
            mean > 0.9 * peak,
            "time-weighted {mean} against peak {peak}"
        );
        assert!(
            over_calls < 0.8 * peak,
            "over calls {over_calls} against peak {peak}"
        );
        assert!(f(r, "original_seconds") >= 20.0, "{}", r["figures"]);
    }
}

/// `tune TRACE` screens with the mean `replay` shows, weighted by the original's time (it
/// screened with the mean over calls).
#[test]
fn tune_screens_a_trace_with_the_time_weighted_mean() {
    let dir = tempfile::tempdir().unwrap();
    let trace = quiet_trace(dir.path());
    let space = dir.path().join("space.txt");
    std::fs::write(&space, "glibc\nglibc:arena_max=1\n").unwrap();
    let out = dir.path().join("tuned");
    alloclens()
        .arg("tune")
        .arg(&trace)
        .arg("--space")
        .arg(&space)
        .args(["--budget", "20s", "--max-runs", "2", "-o"])
        .arg(&out)
        .ok_stdout();
    let tune = testkit::results(&out)
        .tune
        .expect("results.json of tune has `tune`");
    let glibc = tune.candidates.iter().find(|c| c.label == "glibc").unwrap();
    let (mean, peak) = (glibc.mean_pss.unwrap().mean, glibc.peak_pss.unwrap().mean);
    assert!(
        mean > 0.9 * peak,
        "screened mean {mean} against peak {peak}"
    );
}

/// 2000 blocks of 8 KiB made in a moment, 20 s of the original's time with 40 calls, then the
/// blocks freed in a moment, from the top, so glibc returns the pages as it goes.
fn quiet_trace(dir: &Path) -> PathBuf {
    let trace = dir.join("quiet.alt");
    let mut calls = Calls::new();
    let block = |i: u64| 0x1000_0000 + i * 0x10_000;
    for i in 0..2000 {
        calls.malloc(block(i), 8192);
    }
    for i in 0..20 {
        calls.wait(1_000_000_000);
        calls.malloc(0x9000_0000 + i * 64, 64);
        calls.free(0x9000_0000 + i * 64);
    }
    for i in (0..2000).rev() {
        calls.free(block(i));
    }
    TraceFile::new()
        .process(process_info(1, "quiet"), calls.records)
        .write(&trace);
    trace
}

/// `start`, the calls before the first marker as `analyze` names them, is a phase `--phase` takes.
#[test]
fn the_phase_before_the_first_marker_is_start() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("phases.alt");
    let mut calls = Calls::new();
    calls.malloc(0x1000, 64);
    calls.malloc(0x2000, 64);
    calls.mark("second");
    calls.free(0x1000);
    calls.free(0x2000);
    TraceFile::new()
        .process(process_info(1, "phases"), calls.records)
        .write(&trace);
    let runs = replay(&trace, dir.path(), &["-a", "glibc", "--phase", "start"]);
    let image = &runs[0]["images"][0];
    assert_eq!(image["window"], serde_json::json!([0, 2]), "{image}");
    assert_eq!(u(&image["calls_performed"]), 2);
}

/// A 512 MiB block the program never filled: `--touch pages` writes its first 64 MiB only, and
/// says so (it made all of it resident, unbounded).
#[test]
fn touch_is_bounded_per_block_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("big.alt");
    let mut calls = Calls::new();
    calls.malloc(0x1000_0000, 512 << 20);
    calls.free(0x1000_0000);
    TraceFile::new()
        .process(process_info(1, "big"), calls.records)
        .write(&trace);
    let out = testkit::succeeded(
        alloclens()
            .args(["replay", "-a", "glibc", "--json", "-o"])
            .arg(dir.path().join("out"))
            .arg(&trace),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 block is larger than 64 MiB (the largest 512.0 MiB)"),
        "{err}"
    );
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let peak = u(&runs[0]["figures"]["peak_rss"]);
    assert!(peak < 100 << 20, "peak RSS {peak}");
}

/// A replay's page opened as a `run` of a command called `alloclens replay` ("sampling interval
/// 0 ms", "marker regex —") and reached the replay's answer after six bar charts: it opens with
/// the answer now, and has none of a run's settings.
#[test]
fn the_replay_page_opens_with_the_replays_answer() {
    let dir = tempfile::tempdir().unwrap();
    let trace = quiet_trace(dir.path());
    let out = dir.path().join("out");
    testkit::succeeded(
        alloclens()
            .args(["replay", "-a", "glibc", "-o"])
            .arg(&out)
            .arg(&trace),
    );
    let html = testkit::report_page(&out, &dir.path().join("page.html"));
    assert!(html.contains("<title>alloclens replay: "), "title");
    let answer = html
        .find("Lowest mean RSS over the original&#39;s time: glibc")
        .or_else(|| html.find("Lowest mean RSS over the original's time: glibc"))
        .expect("the answer");
    let first_chart = html.find("replay-rss").expect("the replay's chart");
    assert!(answer < first_chart, "the answer comes after a chart");
    for run_only in ["sampling interval", "marker regex", "throughput regex"] {
        assert!(!html.contains(run_only), "{run_only} on a replay's page");
    }
}
