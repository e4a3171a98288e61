//! `alloclens analyze` end to end: the real binary on trace files written with the trace crate's
//! writer (crafted sequences whose figures are computed by hand) and on a real recorded program.
use std::path::Path;

use trace::{Event, Marker, Op, ProcessInfo, Record, TraceHeader, Trailer};

use testkit::{alloclens, json_stdout, process_info, record, succeeded, TraceFile};

fn ev(seq: u64, tid: u32, op: Op, addr: u64, size: u64, old_addr: u64) -> Record {
    Record::Event(Event {
        seq,
        t_ns: 100 * (seq + 1),
        tid,
        stack: 0,
        op,
        addr,
        size,
        old_addr,
    })
}

fn info(pid: u32) -> ProcessInfo {
    process_info(pid, &format!("prog{pid}"))
}

/// pid 10: the study's lifetime examples one after another, a marker, a leak, an unmatched free.
/// pid 11: a realloc chain (100 -> 200 -> 50), never freed.
fn crafted() -> Vec<(ProcessInfo, Vec<Record>)> {
    let a = vec![
        ev(0, 1, Op::Malloc, 0x10, 42, 0),
        ev(1, 1, Op::Free, 0x10, 0, 0), // lifetime 0
        ev(2, 1, Op::Malloc, 0x10, 42, 0),
        ev(3, 2, Op::Malloc, 0x20, 42, 0),
        ev(4, 1, Op::Free, 0x10, 0, 0), // lifetime 1
        Record::Marker(Box::new(Marker {
            seq: 5,
            t_ns: 550,
            tid: 1,
            label: "resize".into(),
        })),
        ev(5, 1, Op::Malloc, 0x30, 42, 0),
        ev(6, 1, Op::Realloc, 0x40, 84, 0x30),
        ev(7, 1, Op::Free, 0x40, 0, 0),   // lifetime 1
        ev(8, 1, Op::Free, 0xdead, 0, 0), // unmatched
    ];
    let b = vec![
        ev(0, 5, Op::Malloc, 0x10, 100, 0),
        ev(1, 5, Op::Realloc, 0x20, 200, 0x10),
        ev(2, 5, Op::Realloc, 0x30, 50, 0x20),
    ];
    vec![(info(10), a), (info(11), b)]
}

fn write_trace(path: &Path, procs: &[(ProcessInfo, Vec<Record>)]) {
    let header = TraceHeader {
        command: vec!["crafted".into()],
        allocator: "glibc".into(),
        ..Default::default()
    };
    let trailer = Trailer {
        exit: "exit 0".into(),
        ..Default::default()
    };
    let mut file = TraceFile::new()
        .header(header)
        .trailer(trailer)
        .chunk_records(4);
    for (info, records) in procs {
        file = file.process(info.clone(), records.clone());
    }
    file.write(path);
}

fn json_of(args: &[&str]) -> serde_json::Value {
    json_stdout(["analyze"].iter().chain(args).chain(&["--json"]))
}

#[test]
fn json_has_the_hand_computed_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &crafted());
    let v = json_of(&[path.to_str().unwrap()]);
    assert_eq!(v["schema_version"], 1);
    let p10 = &v["processes"][0];
    assert_eq!(p10["pid"], 10);
    assert_eq!(p10["life_calls"], 9);
    let s = &p10["stats"];
    assert_eq!(s["calls"]["malloc"], 4);
    assert_eq!(s["calls"]["free"], 4);
    assert_eq!(s["calls"]["realloc"], 1);
    assert_eq!(s["unmatched_frees"], 1);
    assert_eq!(s["requested_bytes"], 42 * 4 + 84);
    // Lifetimes 0, 1, 1 (the study's examples).
    assert_eq!(s["lifetimes"]["count"], 3);
    assert_eq!(s["lifetimes"]["max_calls"], 1);
    assert!((s["lifetimes"]["share_zero"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    assert_eq!(s["leaks"]["count"], 1);
    assert_eq!(s["leaks"]["bytes"], 42);
    // Peak: 126 bytes (42 of 0x20 + 84 after the realloc at call 6); 2 allocations first at call 3.
    assert_eq!(s["peak_live_bytes"]["value"], 126);
    assert_eq!(s["peak_live_bytes"]["call"], 6);
    assert_eq!(s["peak_live_bytes"]["t_ns"], 700);
    assert_eq!(s["peak_live_allocations"]["value"], 2);
    assert_eq!(s["peak_live_allocations"]["call"], 3);
    let phases: Vec<&str> = p10["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["start", "resize"]);
    let threads: Vec<u64> = p10["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, [1, 2]);

    let p11 = &v["processes"][1]["stats"];
    assert_eq!(p11["requested_bytes"], 350, "upper bound: 100 + 200 + 50");
    assert_eq!(
        p11["cumulated_lower_bytes"], 50,
        "lower bound: the final size of the chain"
    );
    assert_eq!(p11["allocations"], 1);
}

#[test]
fn filters_restrict_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &crafted());
    let p = path.to_str().unwrap();
    let v = json_of(&[p, "--process", "11"]);
    assert_eq!(v["processes"].as_array().unwrap().len(), 1);
    assert_eq!(v["filters"]["process"], 11);
    let v = json_of(&[p, "--process", "10", "--phase", "resize"]);
    let s = &v["processes"][0]["stats"];
    assert_eq!(s["calls_total"], 4);
    assert_eq!(s["lifetimes"]["count"], 1);
    // Unknown names are errors that list what exists, on one line, exit status 1.
    let out = alloclens()
        .args(["analyze", p, "--phase", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nope") && err.contains("resize") && err.lines().count() == 1,
        "{err}"
    );
    let out = alloclens()
        .args(["analyze", p, "--process", "99"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("10, 11"));
}

/// Issue 20: the whole trace first, then the biggest process images (peak live bytes), the rest
/// behind --all. Process 10+i allocates (i+1) × 100 bytes, never freed.
#[test]
fn text_summary_shows_the_whole_trace_then_the_top_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.alt");
    let procs: Vec<(ProcessInfo, Vec<Record>)> = (0..8u32)
        .map(|i| {
            let size = (i as u64 + 1) * 100;
            (info(10 + i), vec![ev(0, 1, Op::Malloc, 0x10, size, 0)])
        })
        .collect();
    write_trace(&path, &procs);
    let text = |args: &[&str]| {
        let out = succeeded(alloclens().arg("analyze").arg(&path).args(args));
        String::from_utf8(out.stdout).unwrap()
    };
    let sections = |t: &str| -> Vec<String> {
        t.lines()
            .filter_map(|l| l.strip_prefix("== process "))
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let default = text(&[]);
    let whole = default
        .find("whole trace: 8 process image(s)")
        .expect(&default);
    assert!(whole < default.find("== process").unwrap(), "{default}");
    // 100 + 200 + ... + 800 = 3600 B = 3.5 KiB requested, all of it never freed.
    assert!(
        default.contains("calls: 8; allocations: 8; requested: 3.5 KiB"),
        "{default}"
    );
    assert!(
        default.contains("never freed: 8 allocations, 3.5 KiB"),
        "{default}"
    );
    assert_eq!(sections(&default), ["17", "16", "15", "14", "13"]);
    assert!(
        default.contains("3 more process image(s) not shown"),
        "{default}"
    );
    assert_eq!(sections(&text(&["--top", "2"])), ["17", "16"]);
    let all = text(&["--all"]);
    assert_eq!(
        sections(&all),
        ["10", "11", "12", "13", "14", "15", "16", "17"]
    );
    assert!(!all.contains("not shown"), "{all}");
}

#[test]
fn text_summary_and_csv_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &crafted());
    let out_dir = dir.path().join("csv");
    let out = succeeded(
        alloclens()
            .arg("analyze")
            .arg(&path)
            .arg("-o")
            .arg(&out_dir),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("== process 10"), "{text}");
    assert!(text.contains("lifetime 0: 33.3%"), "{text}");
    assert!(
        text.contains("upper bound 350 B, lower bound 50 B"),
        "{text}"
    );
    assert!(text.contains("resize"), "{text}");
    for f in analyze::output::csv::FILES {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
    let mut rdr = csv::Reader::from_path(out_dir.join("per_process.csv")).unwrap();
    let headers = rdr.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 2);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    assert_eq!(&rows[1][col("pid")], "11");
    assert_eq!(&rows[1][col("requested_bytes")], "350");
    assert_eq!(&rows[1][col("cumulated_lower_bytes")], "50");
    let sizes = std::fs::read_to_string(out_dir.join("sizes_16.csv")).unwrap();
    assert!(sizes.contains("10,0,process,,,32,47,4"), "{sizes}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["processes"][1]["stats"]["requested_bytes"], 350);
}

#[test]
fn a_foreign_file_gets_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.bin");
    std::fs::write(&path, b"\x7fELF not a trace at all").unwrap();
    let out = alloclens().arg("analyze").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("foreign.bin") && err.contains("not an alloclens trace"),
        "{err}"
    );
}

#[test]
fn a_directory_gets_a_one_line_error_naming_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["analyze", "export"] {
        let mut cmd = alloclens();
        cmd.arg(command);
        if command == "export" {
            cmd.arg("--parquet").arg(dir.path().join("out"));
        }
        let err = cmd.arg(dir.path()).fails_with(1);
        assert_eq!(err.lines().count(), 1, "{command}: {err}");
        assert!(
            err.contains("is a directory, not a trace") && err.contains("alloclens record -o"),
            "{command}: {err}"
        );
    }
}

/// A real C program with known calls, recorded by `alloclens record`, then analysed.
#[test]
fn a_recorded_program_has_its_known_figures() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("lifetimes");
    let trace = dir.path().join("prog.alt");
    record(&trace, &[], &[&exe]);
    let v = json_of(&[trace.to_str().unwrap()]);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1);
    let s = &procs[0]["stats"];
    let bucket = |low: u64| {
        s["sizes"]["buckets_16"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["low"] == low)
            .map_or(0, |b| b["count"].as_u64().unwrap())
    };
    assert_eq!(bucket(12345 / 16 * 16), 2);
    assert_eq!(bucket(23456 / 16 * 16), 1);
    assert_eq!(bucket(30001 / 16 * 16), 1);
    assert_eq!(bucket(30017 / 16 * 16), 1);
    let leaks = s["leaks"]["top_sizes"].as_array().unwrap();
    let big = leaks
        .iter()
        .find(|l| l["size"] == 31337)
        .expect("the 3 leaks of 31337 bytes");
    assert_eq!(big["count"], 3);
    assert!(s["null_frees"].as_u64().unwrap() >= 1);
    assert!(s["calls"]["realloc"].as_u64().unwrap() >= 1);
    // The program's own lifetimes are 0, 1, 1 and 1 (libc may add allocations of its own, never
    // between these calls since the program is single-threaded and calls nothing else in between).
    let zero = s["lifetimes"]["share_zero"].as_f64().unwrap();
    assert!(zero > 0.0, "the malloc/free pair has lifetime 0");
}

/// A shell that kills itself with SIGKILL after running `ls`: its image is marked truncated, and the
/// text says once what the mark means (the child `ls` ended cleanly and is not counted).
#[test]
fn a_killed_image_is_marked_and_the_mark_explained() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.alt");
    let out = alloclens()
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", "ls / >/dev/null; kill -9 $$"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(137),
        "record ends with the command's status"
    );
    let text = String::from_utf8(succeeded(alloclens().arg("analyze").arg(&trace)).stdout).unwrap();
    assert!(text.contains("[TRUNCATED]: sh -c"), "{text}");
    assert!(
        text.contains(
            "[TRUNCATED]: 1 process image(s) ended without the shim's goodbye (killed by a signal"
        ),
        "{text}"
    );
}

/// An argument with a newline (a `python3 -c` script of several lines) stays on its line in the
/// heading, the whole-trace table and the process sections: escaped, as `\n`.
#[test]
fn a_command_line_with_a_newline_keeps_the_text_in_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("newline.alt");
    record(
        &trace,
        &[],
        &["sh", "-c", "ls / >/dev/null; true", "sh", "first\nsecond"],
    );
    let text = String::from_utf8(succeeded(alloclens().arg("analyze").arg(&trace)).stdout).unwrap();
    assert!(
        !text.lines().any(|l| l.starts_with("second")),
        "a line broken by the argument: {text}"
    );
    // The trace's heading, the shell's row in the table and its section.
    assert!(text.matches("first\\nsecond").count() >= 3, "{text}");
}

/// A real threaded program with phases marked through the shim's `alloclens_mark`.
#[test]
fn a_recorded_threaded_program_with_markers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("threads");
    let trace = dir.path().join("threads.alt");
    record(&trace, &[], &[&exe]);
    let v = json_of(&[trace.to_str().unwrap()]);
    let p = &v["processes"][0];
    let names: Vec<&str> = p["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ph| ph["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"work") && names.contains(&"cleanup"),
        "{names:?}"
    );
    let bucket_777 = |s: &serde_json::Value| {
        s["sizes"]["buckets_16"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["low"] == 768)
            .map_or(0, |b| b["count"].as_u64().unwrap())
    };
    let threads = p["threads"].as_array().unwrap();
    let worker = threads
        .iter()
        .find(|t| bucket_777(&t["stats"]) == 100)
        .expect("a thread made the 100 mallocs of 777 B");
    assert_ne!(worker["tid"], p["pid"], "the worker is not the main thread");
    let w = &worker["stats"]["lifetimes"];
    let zero = w["share_zero"].as_f64().unwrap() * w["count"].as_f64().unwrap();
    assert!(
        zero >= 99.5,
        "the 100 malloc/free pairs have lifetime 0: {w}"
    );
    // The 4321-byte block belongs to the worker (it allocated it) and is not leaked.
    assert_eq!(
        p["stats"]["leaks"]["top_sizes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["size"] == 4321)
            .count(),
        0
    );
    // --phase work counts the worker's calls; --phase cleanup only main's free.
    let work = json_of(&[trace.to_str().unwrap(), "--phase", "work"]);
    assert_eq!(bucket_777(&work["processes"][0]["stats"]), 100);
    let cleanup = json_of(&[trace.to_str().unwrap(), "--phase", "cleanup"]);
    assert!(
        cleanup["processes"][0]["stats"]["calls"]["free"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_eq!(bucket_777(&cleanup["processes"][0]["stats"]), 0);
}

/// `alloclens analyze TRACE --json` under an address-space limit of `limit_mib` (`ulimit -v`, as
/// batch systems set it).
fn analyze_limited(trace: &Path, limit_mib: u64) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" analyze --json \"$1\"",
            limit_mib << 10
        ))
        .arg(testkit::alloclens_exe())
        .arg(trace)
        .output()
        .unwrap()
}

/// A program whose blocks outlive one another in waves (the analysis's pages of block ids and its
/// table both grow), recorded, then analysed under a limit far below the buffers the analysis would reserve
/// without one (it used to reserve 640 MiB of address space on the first block and abort).
#[test]
fn under_an_address_space_limit_the_figures_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("waves");
    let trace = dir.path().join("waves.alt");
    record(&trace, &[], &[&exe]);
    let unlimited = succeeded(alloclens().arg("analyze").arg("--json").arg(&trace));
    let limited = analyze_limited(&trace, 256);
    assert!(
        limited.status.success(),
        "analyze under a 256 MiB limit: {}",
        String::from_utf8_lossy(&limited.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&limited.stdout),
        String::from_utf8_lossy(&unlimited.stdout)
    );
}

/// A live set that does not fit the limit: one line that says so and which limit, exit status 1, no
/// abort, no backtrace, no figures (they would be wrong, not short).
#[test]
fn a_live_set_larger_than_the_limit_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    // 1 Mi blocks, none freed: the analysis's table grows to 2 Mi slots of 24 bytes (48 MiB, and
    // 72 while it doubles), beside the record buffers.
    let records: Vec<Record> = (0..1u64 << 20)
        .map(|i| ev(i, 1, Op::Malloc, 0x1000 + 16 * i, 8, 0))
        .collect();
    let trace = dir.path().join("big.alt");
    write_trace(&trace, &[(info(7), records)]);
    let out = analyze_limited(&trace, 80);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("out of memory analysing process 7") && err.contains("ulimit -v) is 80 MiB"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// A short process whose calls all fall between two of the recorder's time anchors has every event
/// at the same interpolated time: its life has no measured length, and the text must not claim "over
/// 0 ns" (seen on `cat` in a real trace).
#[test]
fn a_life_shorter_than_the_time_resolution_is_not_called_0_ns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    let same_time = |seq: u64, op: Op, addr: u64, size: u64| {
        Record::Event(Event {
            seq,
            t_ns: 0,
            tid: 1,
            op,
            addr,
            size,
            old_addr: 0,
            stack: 0,
        })
    };
    let records = vec![
        same_time(0, Op::Malloc, 0x10, 64),
        same_time(1, Op::Malloc, 0x20, 64),
        same_time(2, Op::Free, 0x10, 0),
    ];
    write_trace(&path, &[(info(12), records)]);
    let out = succeeded(alloclens().arg("analyze").arg(&path));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("over 0 ns"), "{text}");
    assert!(
        text.contains("life: 3 allocator calls, all between two time anchors"),
        "{text}"
    );
}

/// A trace of many short processes (a shell running `ls` 40 times, a few hundred calls each):
/// the JSON of each image stays proportionate to its calls. It was about 200 KB per image, most
/// of it two timelines of one point (about 290 bytes) per call; a trace of 803 such images gave
/// 137 MB. Then about 45-60 KB, half of it indentation and a third the timelines' names repeated
/// per point (issue 35 item 9: 42 KB per image); compact, with the timelines one array per column,
/// about 19 KB, most of it the figures of the image, its thread and its phase. The bound is in
/// docs/metrics.md (Timelines) and docs/results-format.md.
#[test]
fn the_json_of_short_images_is_proportionate_to_their_calls() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("short.alt");
    record(
        &trace,
        &[],
        &["sh", "-c", "for i in $(seq 40); do ls / >/dev/null; done"],
    );
    let out = succeeded(alloclens().arg("analyze").arg("--json").arg(&trace));
    let analysis: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let processes = analysis["processes"].as_array().unwrap();
    assert!(processes.len() > 40, "{} images", processes.len());
    for p in processes {
        let calls = p["life_calls"].as_u64().unwrap();
        let bound = calls.div_ceil(16).max(16) as usize;
        for axis in ["timeline_by_calls", "timeline_by_time"] {
            let points = p[axis]["calls"].as_array().unwrap().len();
            assert!(points <= bound, "{axis}: {points} points for {calls} calls");
        }
    }
    let per_image = out.stdout.len() / processes.len();
    let calls: u64 = processes
        .iter()
        .map(|p| p["life_calls"].as_u64().unwrap())
        .sum();
    let calls_per_image = calls / processes.len() as u64;
    assert!(
        (100..2000).contains(&calls_per_image),
        "{calls_per_image} calls per image: not the short images this test is about"
    );
    assert!(
        per_image <= 20_000,
        "{per_image} bytes of JSON per image of {calls_per_image} calls (the goal: 20 KB)"
    );
}

/// A program that keeps 24 MiB: `analyze` shows the original run's memory from the recorder's
/// samples (docs/trace-format.md, "Memory samples"), and `report` draws it against the calls; a
/// trace recorded without samples has none and reads as before.
#[test]
fn the_original_runs_memory_is_in_analyze_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("keep");
    let trace = dir.path().join("keep.alt");
    record(&trace, &[], &[&exe]);
    let v = json_of(&[trace.to_str().unwrap()]);
    let m = &v["processes"][0]["memory"];
    let mib = (1u64 << 20) as f64;
    let heap_peak = m["heap"]["peak"].as_f64().unwrap() / mib;
    assert!(
        (23.5..28.0).contains(&heap_peak),
        "heap peak {heap_peak} MiB: {m}"
    );
    let rss_peak = m["rss"]["peak"].as_f64().unwrap() / mib;
    assert!(rss_peak >= heap_peak, "{m}");
    let heap_mean = m["heap"]["mean"].as_f64().unwrap() / mib;
    assert!(heap_mean > 0.0 && heap_mean < heap_peak, "{m}");
    assert!(m["non_heap"]["peak"].as_f64().unwrap() > 0.0, "{m}");
    let text = succeeded(alloclens().args(["analyze"]).arg(&trace));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("memory as recorded ("), "{text}");
    assert!(text.contains("heap (private anonymous, "), "{text}");
    let svg = dir.path().join("svg");
    succeeded(alloclens().arg("report").arg(&trace).arg("--svg").arg(&svg));
    assert!(svg.join("p0-memory-by-calls.svg").exists());

    let bare = dir.path().join("bare.alt");
    record(&bare, &["--memory-interval", "0"], &[&exe]);
    let v = json_of(&[bare.to_str().unwrap()]);
    assert!(
        v["processes"][0]["memory"].is_null(),
        "{}",
        v["processes"][0]["memory"]
    );
    let text = succeeded(alloclens().args(["analyze"]).arg(&bare));
    assert!(!String::from_utf8_lossy(&text.stdout).contains("memory as recorded"));
    let svg = dir.path().join("svg-bare");
    succeeded(alloclens().arg("report").arg(&bare).arg("--svg").arg(&svg));
    assert!(!svg.join("p0-memory-by-calls.svg").exists());
}

/// Issue 35: a process image that made no allocator call (`/bin/true` recorded) showed
/// "calls: 0 ()", an empty breakdown.
#[test]
fn a_process_without_calls_shows_no_empty_breakdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &[(process_info(10, "quiet"), vec![])]);
    let text = alloclens().arg("analyze").arg(&path).ok_stdout();
    assert!(text.contains("\ncalls: 0\n"), "{text}");
    assert!(!text.contains("()"), "{text}");
}

/// Issue 41: process images analysed on several threads print what the serial path
/// (`--threads 1`) prints, byte for byte: the text of every image, the JSON, the call sites as
/// text and JSON, and the warnings. On real traces with stacks: a program whose four threads
/// allocate, which forks and execs a shell (three images of very different sizes), and two
/// processes allocating side by side (two images of one size), whole and with two bytes flipped
/// (damaged streams: the warnings must come in stream order whatever finished first).
#[test]
fn every_thread_count_prints_what_the_serial_path_prints() {
    let dir = tempfile::tempdir().unwrap();
    let forker = dir.path().join("forker.alt");
    // The shell it execs exits with 3, which `record` passes on.
    alloclens()
        .args(["record", "-q", "--stacks=all", "-o"])
        .arg(&forker)
        .arg("--")
        .arg(testkit::program("forker"))
        .fails_with(3);
    let noisy = dir.path().join("noisy.alt");
    let program = testkit::program("noisy_forking").to_str().unwrap();
    record(&noisy, &["--stacks=all"], &[program, "300000"]);
    let mut bytes = std::fs::read(&noisy).unwrap();
    for at in [bytes.len() * 2 / 5, bytes.len() * 7 / 10] {
        bytes[at] ^= 0xff;
    }
    let flipped = dir.path().join("flipped.alt");
    std::fs::write(&flipped, bytes).unwrap();

    let views: [&[&str]; 4] = [
        &["--all"],
        &["--json"],
        &["--sites", "--all"],
        &["--sites", "--json"],
    ];
    for trace in [&forker, &noisy, &flipped] {
        let images = json_stdout([Path::new("analyze"), trace, Path::new("--json")]);
        assert!(
            images["processes"].as_array().unwrap().len() >= 2,
            "{}",
            trace.display()
        );
        for view in views {
            let analyse = |threads: &str| {
                let out = alloclens()
                    .arg("analyze")
                    .arg(trace)
                    .args(view)
                    .args(["--threads", threads])
                    .ok();
                (
                    out.stdout,
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            };
            let serial = analyse("1");
            // Fewer threads than images (the forker's three), and more.
            for threads in ["2", "8"] {
                let parallel = analyse(threads);
                assert!(
                    parallel.0 == serial.0,
                    "{} {view:?} --threads {threads}: stdout differs from --threads 1",
                    trace.display()
                );
                assert_eq!(parallel.1, serial.1, "{} {view:?}", trace.display());
            }
            if trace == &flipped {
                assert!(serial.1.contains("alloclens: warning"), "{}", serial.1);
            }
        }
    }
}
