//! `alloclens merge` and `alloclens report DATASET` (issue 28, docs/dataset.md) on real results of
//! `run`, a real `watch` and a real trace: read back with the parquet crate, appended to, duplicates
//! skipped, and each bad input (not a result, a newer version, a damaged trace, a full disk) one line
//! with nothing written half.
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;

use dataset::{read_table, Cell, Dataset};

use testkit::{alloclens, alloclens_exe as exe, record, succeeded};

struct Fixtures {
    _dir: tempfile::TempDir,
    /// Two runs of the same command (two hosts in the report test), one of another command.
    run_a: PathBuf,
    run_b: PathBuf,
    run_other: PathBuf,
    trace: PathBuf,
    /// The trace's calls, as `analyze --json` counts them.
    trace_calls: u64,
}

fn run_dir(dir: &Path, name: &str, ops: &str) -> PathBuf {
    let out = dir.join(name);
    succeeded(
        alloclens()
            .args(["run", "-a", "glibc,glibc:arena_max=1", "-r", "1"])
            .args(["--interval", "20ms", "-o"])
            .arg(&out)
            .args(["--", &exe(), "workload", "churn", "--ops", ops])
            .stdout(Stdio::null()),
    );
    out
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("churn.alt");
        // About 600 k calls: more than one events chunk (512 Ki records) however fast the
        // recorder drains, so a cut inside the last one leaves whole chunks before it. (60 k ops
        // made one chunk on an idle machine: nothing was left to merge.)
        record(
            &trace,
            &[],
            &[
                &exe(),
                "workload",
                "churn",
                "--ops",
                "150000",
                "--threads",
                "2",
            ],
        );
        let analysis =
            testkit::json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
        let trace_calls = analysis["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["stats"]["calls_total"].as_u64().unwrap())
            .sum();
        // Runs of about 0.1 s or more (several samples at 20 ms) on any machine: every run must
        // have a peak PSS. 20 k ops took 10-25 ms, and a run can end before its first sample.
        Fixtures {
            run_a: run_dir(dir.path(), "run-a", "150000"),
            run_b: run_dir(dir.path(), "run-b", "150000"),
            run_other: run_dir(dir.path(), "run-other", "200000"),
            trace,
            trace_calls,
            _dir: dir,
        }
    })
}

fn merge(args: &[&Path], out: &Path, extra: &[&str]) -> Output {
    alloclens()
        .arg("merge")
        .args(extra)
        .args(args)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn error_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("alloclens: error:"))
        .map(str::to_string)
        .collect()
}

fn text(rows: &dataset::Rows, i: usize, name: &str) -> String {
    rows.text(i, name).unwrap_or_default().to_string()
}

/// Every file under `dir` whose name starts with `.` (a temporary file left behind).
fn hidden_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                out.push(e.path());
            } else if e.path().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

fn hostname_of(run: &Path) -> String {
    testkit::results(run).host.hostname
}

#[test]
fn two_runs_and_a_trace_read_back_with_the_parquet_crate() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let out = merge(&[&f.run_a, &f.run_other, &f.trace], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dataset = Dataset::open(&ds).unwrap();

    // The calls: every one once, over the files the writer threads made (one per core at most).
    let files = dataset.files("calls");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        !files.is_empty() && files.len() <= cores.max(1),
        "{files:?}"
    );
    let mut rows = 0u64;
    let mut ops = std::collections::BTreeSet::new();
    let mut seqs = std::collections::HashSet::new();
    let mut trace_ids = std::collections::BTreeSet::new();
    for (file, _) in &files {
        let calls = dataset::read::read_file(file).unwrap();
        rows += calls.len() as u64;
        for i in 0..calls.len() {
            let op = text(&calls, i, "op");
            // A plain free has no size (null); every other call has one.
            assert_eq!(
                matches!(calls.get(i, "size"), Cell::Null),
                op == "free",
                "{op}: size {:?}",
                calls.get(i, "size")
            );
            let key = (
                calls.number(i, "pid").unwrap() as i64,
                calls.number(i, "exec_index").unwrap() as i64,
                calls.number(i, "seq").unwrap() as i64,
            );
            assert!(seqs.insert(key), "call {key:?} twice");
            ops.insert(op);
            trace_ids.insert(text(&calls, i, "trace_id"));
        }
    }
    assert_eq!(rows, f.trace_calls);
    assert!(ops.contains("malloc") && ops.contains("free"), "{ops:?}");
    assert_eq!(trace_ids.len(), 1, "{trace_ids:?}");

    let sources = read_table(&dataset, "sources").unwrap();
    assert_eq!(sources.len(), 3);
    let trace_source = (0..3)
        .find(|&i| text(&sources, i, "source_kind") == "trace")
        .unwrap();
    assert_eq!(
        trace_ids.first().unwrap(),
        &text(&sources, trace_source, "source_id")
    );

    // Runs: one row per run of each results.json, host from the results.
    let runs = read_table(&dataset, "runs").unwrap();
    assert_eq!(runs.len(), 4, "two variants, one repeat, two directories");
    let host = hostname_of(&f.run_a);
    for i in 0..runs.len() {
        assert_eq!(text(&runs, i, "host"), dataset::layout::sanitize(&host));
        assert_eq!(text(&runs, i, "outcome"), "ok");
        assert!(runs.number(i, "peak_pss").unwrap() > 0.0);
    }
    // Samples: every row of both samples.csv files.
    let csv_rows = |run: &Path| testkit::csv_rows(run.join("samples.csv")).len();
    let samples = read_table(&dataset, "samples").unwrap();
    assert_eq!(samples.len(), csv_rows(&f.run_a) + csv_rows(&f.run_other));
    let summary = read_table(&dataset, "summary").unwrap();
    let base = (0..summary.len())
        .find(|&i| text(&summary, i, "variant") == "glibc")
        .unwrap();
    assert_eq!(summary.number(base, "mean_pss_ratio"), Some(1.0));
    let machines = read_table(&dataset, "machines").unwrap();
    assert_eq!(machines.len(), 2);
    assert_eq!(text(&machines, 0, "hostname"), host);
    assert!(text(&machines, 0, "allocators").starts_with("glibc "));
    assert!(hidden_files(&ds).is_empty(), "{:?}", hidden_files(&ds));
    let kinds = read_table(&dataset, "samples").unwrap();
    let first = text(&kinds, 0, "sample_kind");
    assert!(first == "interval" || first == "marker", "{first}");
    // No file column is named like a partition: DuckDB and Spark would give it the partition's value.
    for kind in [
        "runs", "summary", "samples", "machines", "sources", "calls", "traces",
    ] {
        for (file, _) in dataset.files(kind) {
            let names = dataset::read::read_file(&file).unwrap().names;
            for key in ["kind", "host", "command"] {
                assert!(!names.iter().any(|n| n == key), "{kind}: {names:?}");
            }
        }
    }
}

#[test]
fn an_append_adds_only_what_is_new_and_a_duplicate_is_skipped_with_one_line() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    assert!(merge(&[&f.run_a], &ds, &[]).status.success());
    // The same directory again, a copy of it, and the same file under another host name.
    let copy = dir.path().join("copy-of-a");
    std::fs::create_dir(&copy).unwrap();
    for name in ["results.json", "samples.csv", "markers.csv"] {
        std::fs::copy(f.run_a.join(name), copy.join(name)).unwrap();
    }
    let out = merge(&[&f.run_a, &f.run_b, &copy], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let skipped: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("alloclens: skipped"))
        .collect();
    assert_eq!(skipped.len(), 2, "{}", stderr(&out));
    assert!(skipped[0].contains("already in the dataset"), "{skipped:?}");
    let out = merge(&[&f.run_a], &ds, &["--host", "elsewhere"]);
    assert!(stderr(&out).contains("skipped"), "{}", stderr(&out));

    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!(read_table(&dataset, "sources").unwrap().len(), 2);
    assert_eq!(read_table(&dataset, "runs").unwrap().len(), 4);
}

/// The byte offsets of the trace's chunks and of its last events chunk (the layout:
/// docs/trace-format.md, as tests/damaged.rs reads it).
fn chunk_offsets(bytes: &[u8]) -> (Vec<usize>, usize) {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut offset = 20 + u32_at(12);
    let (mut chunks, mut last_events) = (Vec::new(), None);
    while offset < bytes.len() {
        assert_eq!(&bytes[offset..offset + 4], b"ALCK", "a chunk at {offset}");
        if bytes[offset + 4] == 2 {
            last_events = Some(offset);
        }
        chunks.push(offset);
        offset += 24 + u32_at(offset + 12);
    }
    (chunks, last_events.unwrap())
}

/// The copy of the fixture's trace cut inside its last events chunk, at `dir/cut.alt`.
fn cut_trace(dir: &Path) -> PathBuf {
    let bytes = std::fs::read(&fixtures().trace).unwrap();
    let (_, last_events) = chunk_offsets(&bytes);
    let cut = dir.join("cut.alt");
    std::fs::write(&cut, &bytes[..last_events + 40]).unwrap();
    cut
}

fn dataset_calls(ds: &Path) -> u64 {
    let dataset = Dataset::open(ds).unwrap();
    dataset
        .files("calls")
        .iter()
        .map(|(file, _)| dataset::read::read_file(file).unwrap().len() as u64)
        .sum()
}

fn lines_with<'a>(out: &'a str, word: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.contains(word)).collect()
}

/// Issue 35 item 6: a trace merged while it was recorded (or a cut copy) is replaced by a more
/// complete copy of the same recording, never by a less complete one, and each step says so.
#[test]
fn issue_35_a_more_complete_copy_of_a_recording_replaces_the_partial_one() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&f.trace).unwrap();
    let cut = cut_trace(dir.path());
    // Every chunk but the trailer: all the calls, the recorder "did not finish".
    let (chunks, _) = chunk_offsets(&bytes);
    let unfinished = dir.path().join("unfinished.alt");
    std::fs::write(&unfinished, &bytes[..*chunks.last().unwrap()]).unwrap();
    let ds = dir.path().join("ds");
    let sources = || read_table(&Dataset::open(&ds).unwrap(), "sources").unwrap();

    let out = merge(&[&cut], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cut_calls = dataset_calls(&ds);
    assert!(
        cut_calls < f.trace_calls,
        "{cut_calls} of {}",
        f.trace_calls
    );

    // More of the recording: replaces the cut copy, said in one line.
    let out = merge(&[&unfinished], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        lines_with(&err, "alloclens: replaced source").len(),
        1,
        "{err}"
    );
    assert_eq!(dataset_calls(&ds), f.trace_calls, "{err}");
    assert_eq!(sources().len(), 1);
    assert!(text(&sources(), 0, "losses").contains("did not finish"));

    // Less of it: skipped, the dataset keeps the more complete copy.
    let out = merge(&[&cut], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(lines_with(&err, "alloclens: skipped").len(), 1, "{err}");
    assert!(err.contains("holds more of"), "{err}");
    assert_eq!(dataset_calls(&ds), f.trace_calls);
    assert!(text(&sources(), 0, "path").ends_with("unfinished.alt"));

    // The finished recording: replaces the unfinished copy; `losses` is empty.
    let out = merge(&[&f.trace], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(lines_with(&stderr(&out), "replaced source").len(), 1);
    assert_eq!(sources().len(), 1);
    assert!(matches!(sources().get(0, "losses"), Cell::Null));
    assert_eq!(dataset_calls(&ds), f.trace_calls);
    // A whole copy is never replaced: a partial one is "already in the dataset".
    let out = merge(&[&unfinished], &ds, &[]);
    assert!(
        stderr(&out).contains("already in the dataset"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sources().len(), 1);
    assert!(hidden_files(&ds).is_empty(), "{:?}", hidden_files(&ds));
}

/// Issue 35 item 6: damaged lines of samples.csv and markers.csv are left out of the dataset and
/// named, one warning per file and in the source's `losses`; the readable rows are merged.
#[test]
fn issue_35_damaged_csv_lines_are_left_out_and_named_in_losses() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("run");
    std::fs::create_dir(&copy).unwrap();
    for name in ["results.json", "samples.csv", "markers.csv"] {
        std::fs::copy(f.run_a.join(name), copy.join(name)).unwrap();
    }
    let samples = std::fs::read_to_string(copy.join("samples.csv")).unwrap();
    let header: Vec<&str> = samples.lines().next().unwrap().split(',').collect();
    let last: Vec<&str> = samples.lines().last().unwrap().split(',').collect();
    let good_rows = samples.lines().count() - 1;
    let with = |column: &str, value: &str| {
        let i = header.iter().position(|h| *h == column).unwrap();
        let mut row = last.clone();
        row[i] = value;
        row.join(",")
    };
    let damaged = format!(
        "{samples}garbage\n{}\n{}\n{}",
        with("t_s", "abc"),
        with("pss", "-5"),
        &last.join(",")[..20]
    );
    std::fs::write(copy.join("samples.csv"), damaged).unwrap();
    let markers = std::fs::read_to_string(copy.join("markers.csv")).unwrap();
    std::fs::write(copy.join("markers.csv"), format!("{markers}1,2\n")).unwrap();

    let ds = dir.path().join("ds");
    let out = merge(&[&copy], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings = lines_with(&err, "alloclens: warning:");
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains("samples.csv left out 4 damaged lines")
            && warnings[0].contains("`t_s` holds 'abc'")
            && warnings[0].contains("`pss` holds -5, below 0"),
        "{err}"
    );
    assert!(
        warnings[1].contains("markers.csv left out 1 damaged line"),
        "{err}"
    );
    let dataset = Dataset::open(&ds).unwrap();
    let rows = read_table(&dataset, "samples").unwrap();
    assert_eq!(rows.len(), good_rows);
    assert!((0..rows.len()).all(|i| rows.number(i, "t_s").is_some()));
    assert!(read_table(&dataset, "markers").unwrap().len() == markers.lines().count() - 1);
    let sources = read_table(&dataset, "sources").unwrap();
    assert!(text(&sources, 0, "losses").contains("samples.csv left out 4"));
}

/// Issue 35 item 6: temporary files a stopped merge left (its own names, a pid that no longer
/// runs) are removed by the next merge; anything else in the dataset is left alone.
#[test]
fn issue_35_the_next_merge_removes_what_an_interrupted_merge_left() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    assert!(merge(&[&f.run_a], &ds, &[]).status.success());
    let dataset = Dataset::open(&ds).unwrap();
    let (runs_file, _) = dataset.files("runs").remove(0);
    let partition = runs_file.parent().unwrap();
    // pid_max is at most 2^22: this pid never runs.
    let gone = 99_999_999;
    let stale = [
        partition.join(format!(".0123456789abcdef.parquet.{gone}.partial")),
        partition.join(format!(".0123456789abcdef-3.parquet.{gone}.partial")),
        ds.join(format!(".dataset.json.{gone}.partial")),
    ];
    let kept = [
        // a running merge's (this process's pid)
        partition.join(format!(
            ".0123456789abcdef.parquet.{}.partial",
            std::process::id()
        )),
        // not alloclens's names
        partition.join(format!(".notes.parquet.{gone}.partial")),
        partition.join(format!(".0123456789ABCDEF.parquet.{gone}.partial")),
        ds.join(format!(".0123456789abcdef.parquet.{gone}.partial")),
        partition.join("notes.partial"),
        ds.join("README"),
    ];
    for p in stale.iter().chain(&kept) {
        std::fs::write(p, "x").unwrap();
    }
    let out = merge(&[&f.run_b], &ds, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed 3 files an interrupted merge left"),
        "{}",
        stderr(&out)
    );
    for p in &stale {
        assert!(!p.exists(), "{} is left", p.display());
    }
    for p in &kept {
        assert!(p.exists(), "{} was removed", p.display());
    }
}

/// Issue 35 item 6: a damaged trace is merged up to its damage with a warning and status 0, as
/// analyze reads it (docs/cli.md#exit-status).
#[test]
fn a_damaged_trace_is_merged_up_to_its_last_whole_chunk_and_the_loss_named() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let cut = cut_trace(dir.path());
    let ds = dir.path().join("ds");
    let out = merge(&[&cut], &ds, &[]);
    let analyze = alloclens().arg("analyze").arg(&cut).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        out.status.code(),
        analyze.status.code(),
        "merge and analyze"
    );
    assert!(error_lines(&out).is_empty(), "{}", stderr(&out));
    let errors = lines_with(&stderr(&out), "alloclens: warning:")
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert!(
        errors[0].contains("damaged") && errors[0].contains("last whole chunk"),
        "{errors:?}"
    );
    let dataset = Dataset::open(&ds).unwrap();
    let calls: usize = dataset
        .files("calls")
        .iter()
        .map(|(file, _)| dataset::read::read_file(file).unwrap().len())
        .sum();
    assert!(
        calls > 0 && (calls as u64) < f.trace_calls,
        "{calls} of {} calls: {}",
        f.trace_calls,
        stderr(&out)
    );
    assert!(errors[0].contains(&format!("merged its {calls} calls")));
    let sources = read_table(&dataset, "sources").unwrap();
    assert!(matches!(sources.get(0, "losses"), Cell::Text(t) if !t.is_empty()));
    let traces = read_table(&dataset, "traces").unwrap();
    assert_eq!(traces.number(0, "complete"), Some(0.0));
}

#[test]
fn a_path_that_is_not_a_result_is_refused_before_anything_is_written() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a trace\n").unwrap();
    for bad in [&empty, &notes] {
        let ds = dir.path().join("ds");
        let out = merge(&[&f.run_a, bad], &ds, &[]);
        assert_eq!(out.status.code(), Some(1));
        let errors = error_lines(&out);
        assert_eq!(errors.len(), 1, "{}", stderr(&out));
        assert!(
            errors[0].contains("is not an alloclens result"),
            "{errors:?}"
        );
        assert!(!ds.exists(), "nothing is written when a PATH is wrong");
    }
    // A directory with files that is not a dataset is not written into.
    let out = merge(&[&f.run_a], dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not an alloclens dataset"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_newer_schema_version_is_refused_naming_both_versions() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let newer = dir.path().join("newer");
    std::fs::create_dir(&newer).unwrap();
    let text = std::fs::read_to_string(f.run_a.join("results.json")).unwrap();
    let text = text.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
    assert!(text.contains("99"));
    std::fs::write(newer.join("results.json"), text).unwrap();
    let ds = dir.path().join("ds");
    let out = merge(&[&newer], &ds, &[]);
    assert_eq!(out.status.code(), Some(1));
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert!(errors[0].contains("99") && errors[0].contains("upgrade alloclens"));
    assert!(!ds.exists());

    // A dataset written by a newer alloclens: neither appended to nor reported.
    assert!(merge(&[&f.run_a], &ds, &[]).status.success());
    let meta = ds.join("dataset.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replace("\"schema_version\": 1", "\"schema_version\": 2"),
    )
    .unwrap();
    let out = merge(&[&f.run_b], &ds, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        error_lines(&out)[0].contains("schema version 2"),
        "{}",
        stderr(&out)
    );
    let out = alloclens().arg("report").arg(&ds).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        error_lines(&out)[0].contains("schema version 2"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_full_disk_leaves_the_dataset_readable_with_whole_sources_only() {
    let f = fixtures();
    let Some(disk) = testkit::SmallDisk::mount("256k") else {
        return;
    };
    let ds = disk.path().join("ds");
    let out = merge(&[&f.run_a, &f.trace], &ds, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let errors = error_lines(&out);
    assert_eq!(errors.len(), 1, "{}", stderr(&out));
    assert!(
        errors[0].contains("No space left on device") && errors[0].contains("was not merged"),
        "{errors:?}"
    );
    assert!(hidden_files(&ds).is_empty(), "{:?}", hidden_files(&ds));
    // What is there is whole: the run, its rows all readable, and no calls of the trace.
    let dataset = Dataset::open(&ds).unwrap();
    let sources = read_table(&dataset, "sources").unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(text(&sources, 0, "source_kind"), "run");
    assert!(dataset.files("calls").is_empty());
    assert_eq!(read_table(&dataset, "runs").unwrap().len(), 2);
}

#[test]
fn report_of_a_dataset_puts_hosts_and_variants_side_by_side() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    assert!(merge(&[&f.run_a], &ds, &["--host", "node-a"])
        .status
        .success());
    let page = dir.path().join("page.html");
    // One host: no ranking to compare (it said "every host ranks the variants the same way").
    let html = testkit::report_page(&ds, &page);
    assert!(
        html.contains("Each command ran on one host only: no ranking to compare across hosts.")
            && !html.contains("Every host ranks"),
        "one host's dataset"
    );
    assert!(merge(&[&f.run_b], &ds, &["--host", "node-b"])
        .status
        .success());
    let html = testkit::report_page(&ds, &page);
    assert!(!html.contains("one host only"), "two hosts compared");
    for needle in [
        "Variants across hosts",
        "Hosts where the ranking differs",
        "node-a",
        "node-b",
        "glibc:arena_max=1",
    ] {
        assert!(html.contains(needle), "{needle} missing from the page");
    }
    // The two hosts are one group: each variant's row counts both.
    let rows: Vec<&str> = html
        .match_indices("<td>2</td>")
        .map(|(i, _)| &html[i..i + 4])
        .collect();
    assert!(rows.len() >= 2, "each variant over 2 hosts");
}

/// A dataset of traces alone (no `run` results): the page lists each trace with its calls as
/// `analyze` counts them, and claims no agreement between hosts' rankings, since nothing was ranked.
#[test]
fn report_of_a_dataset_of_traces_lists_them_and_ranks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("pipe.alt");
    record(&trace, &[], &["sh", "-c", "ls / | sort >/dev/null"]);
    let analysis = testkit::json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let calls: u64 = analysis["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats"]["calls_total"].as_u64().unwrap())
        .sum();
    let ds = dir.path().join("ds");
    assert!(merge(&[&trace], &ds, &["--host", "node-t"])
        .status
        .success());
    let page = dir.path().join("page.html");
    let html = testkit::report_page(&ds, &page);
    assert!(
        !html.contains("Every host ranks the variants"),
        "no run was ranked"
    );
    assert!(html.contains("No results of `alloclens run` to rank."));
    let traces = &html[html
        .find("<section id=\"traces\"")
        .expect("a Traces section")..];
    for needle in [
        "node-t".to_string(),
        "sh -c ls / | sort &gt;/dev/null".to_string(),
        format!("<td>{calls}</td>"),
    ] {
        assert!(traces.contains(&needle), "{needle} missing from {traces}");
    }
}
