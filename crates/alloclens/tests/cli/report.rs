//! `alloclens report`, `diff` and `export` end to end: real runs, the HTML page opened in headless
//! Chromium (Debian's `chromium`; the browser tests print a skip note when it is missing).
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use assert_cmd::assert::OutputAssertExt;
use runner::{RunRecord, VariantSummary};
use serde_json::Value;

use testkit::{
    alloclens, alloclens_exe, installed, json_stdout, record, render_status, succeeded,
    unescape_html,
};

/// The browser window of the page checks.
const WINDOW: (u32, u32) = (1400, 2400);

/// glibc plus jemalloc when installed: two variants to overlay.
fn allocators() -> &'static str {
    if installed("jemalloc") {
        "glibc,jemalloc"
    } else {
        "glibc"
    }
}

/// Runs `alloclens run -o DIR ARGS` and returns DIR (inside `root`).
fn run_into(root: &Path, name: &str, args: &[&str]) -> PathBuf {
    let dir = root.join(name);
    succeeded(
        alloclens()
            .arg("run")
            .arg("-o")
            .arg(&dir)
            .args(["--program-output", "discard", "--interval", "20ms"])
            .args(args)
            .stdin(Stdio::null()),
    );
    dir
}

const HOSTILE_ARG: &str = "<script>alert(1)</script>";

/// Results shared by the tests (runs are the slow part): a hostile single-process run with markers and
/// repeats, and a multi-process run sweeping a parameter.
struct Fixtures {
    _root: tempfile::TempDir,
    hostile: PathBuf,
    sweep: PathBuf,
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        // Marker labels carry `</script>`; the command line carries `<script>`.
        let script = "for i in 1 2 3 4 5; do echo \"event </script>$i\"; sleep 0.03; done";
        let hostile = run_into(
            root.path(),
            "hostile",
            &[
                "-a",
                allocators(),
                "-r",
                "2",
                "--marker",
                "event (.*)",
                "--",
                "sh",
                "-c",
                script,
                HOSTILE_ARG,
            ],
        );
        let exe = alloclens_exe();
        let sweep = run_into(
            root.path(),
            "sweep",
            &[
                "-a",
                allocators(),
                "-r",
                "1",
                "--param",
                "workers=1,2",
                "--throughput",
                "throughput: ([0-9.]+)",
                "--",
                &exe,
                "workload",
                "forkworkers",
                "--workers",
                "{workers}",
            ],
        );
        Fixtures {
            _root: root,
            hostile,
            sweep,
        }
    })
}

/// Each call writes its own file: tests run in parallel on the same fixtures, and two of them writing
/// one report.html raced (one read the other's page).
fn report_html(results: &Path, extra: &[&str]) -> (PathBuf, String) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let html = results.join(format!("report-{n}.html"));
    succeeded(
        alloclens()
            .arg("report")
            .arg(results)
            .arg("-o")
            .arg(&html)
            .args(extra),
    );
    let text = std::fs::read_to_string(&html).unwrap();
    (html, text)
}

fn chart_ids(html: &str) -> Vec<String> {
    html.split("data-chart=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

/// Opens the page in headless Chromium: returns the DOM after rendering, and keeps a screenshot
/// named `name.png` under target/test-artifacts/. None (with a note) when Chromium is missing.
fn open_in_browser(html: &Path, name: &str) -> Option<String> {
    testkit::open_in_browser(&format!("file://{}", html.display()), WINDOW, name)
}

/// Every chart placeholder drew a non-empty canvas, nothing failed, nothing was fetched.
fn assert_rendered(dom: &str, html: &str) {
    let status = render_status(dom);
    let expected = chart_ids(html).len() as u64;
    assert!(expected > 0);
    assert_eq!(status["charts"], expected, "{status}");
    assert_eq!(status["rendered"], expected, "{status}");
    assert_eq!(status["nonempty"], expected, "{status}");
    assert_eq!(status["errors"], Value::Array(vec![]), "{status}");
    assert_eq!(status["blocked"], Value::Array(vec![]), "{status}");
}

fn assert_offline(html: &str) {
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page references a URL"
    );
    assert!(
        !html.contains(" src="),
        "the page loads an external resource"
    );
}

/// A page that does not fit on the disk: one error line, no half page under its name, no
/// temporary file left; a page that fits is readable by others (a temporary file's 0600 is not
/// kept).
#[test]
fn a_report_on_a_full_disk_leaves_no_half_page() {
    let results = &fixtures().hostile;
    let (html, _) = report_html(results, &[]);
    let mode = std::os::unix::fs::PermissionsExt::mode(&html.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o644, "{mode:o}");
    let Some(disk) = testkit::SmallDisk::mount("16k") else {
        return;
    };
    let page = disk.path().join("r.html");
    let stderr = alloclens()
        .arg("report")
        .arg(results)
        .arg("-o")
        .arg(&page)
        .fails_with(1);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot write the report") && stderr.contains("No space left"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(disk.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn run_report_renders_every_chart_offline() {
    let f = fixtures();
    let (path, html) = report_html(&f.sweep, &[]);
    assert_offline(&html);
    let ids = chart_ids(&html);
    // What the input implies: a parameter sweep (charts against it), several processes (per-process).
    for id in [
        "pss-over-time-0",
        "rss-over-time-1",
        "throughput-vs-workers",
        "peak-pss-vs-workers",
        "pss-per-process",
    ] {
        assert!(ids.iter().any(|i| i == id), "no chart {id} in {ids:?}");
    }
    let results = testkit::results(&f.sweep);
    for v in &results.variants {
        let version = v.version.as_deref().unwrap_or("");
        assert!(
            html.contains(version),
            "allocator version {version} missing"
        );
    }
    // Against the swept parameter: every figure of the summary, mean RSS among them, one line per
    // variant, its points the summary's medians.
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    let figures: [(&str, Median); 4] = [
        ("mean-rss-vs-workers", |v| v.mean_rss_median),
        ("peak-rss-vs-workers", |v| v.peak_rss_median),
        ("mean-pss-vs-workers", |v| v.mean_pss_median),
        ("wall-vs-workers", |v| v.wall_median),
    ];
    for (id, median) in figures {
        let c = chart(charts, id);
        let x = numbers(&c["x"]);
        assert_eq!(x, [1.0, 2.0], "{id}");
        for s in c["series"].as_array().unwrap() {
            let variant = s["label"].as_str().unwrap();
            let expected: Vec<f64> = results
                .summary
                .iter()
                .map(|g| median(g.variants.iter().find(|v| v.variant == variant).unwrap()).unwrap())
                .collect();
            assert_eq!(numbers(&s["values"]), expected, "{id} {variant}");
        }
    }
    for id in ["vss-over-time-0", "pss-rss-glibc-1"] {
        assert!(ids.iter().any(|i| i == id), "no chart {id} in {ids:?}");
    }
    let dom = open_in_browser(&path, "report-run-sweep");
    assert_round_ticks(&html, dom.as_deref());
    if let Some(dom) = dom {
        assert_rendered(&dom, &html);
    }
}

#[test]
fn hostile_strings_show_as_text() {
    let f = fixtures();
    let (path, html) = report_html(&f.hostile, &[]);
    assert_offline(&html);
    assert!(
        !html.contains(HOSTILE_ARG),
        "the command line became markup"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // Only the page's own four script blocks open and close.
    assert_eq!(html.matches("<script").count(), 4);
    assert_eq!(html.matches("</script>").count(), 4);
    assert!(chart_ids(&html).iter().any(|i| i == "pss-per-event"));
    if let Some(dom) = open_in_browser(&path, "report-run-hostile") {
        assert_rendered(&dom, &html);
        assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!dom.contains(HOSTILE_ARG));
    }
}

/// A trace of a program with phases (markers), shared by the trace tests.
fn trace_fixture() -> &'static Path {
    static T: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.alt");
        record(
            &path,
            &["--marker", "event (\\d+)"],
            &[&alloclens_exe(), "workload", "events", "--events", "8"],
        );
        (dir, path)
    });
    path
}

/// Calls in the trace, counted with the trace reader (markers are not calls).
fn calls_in_trace(path: &Path) -> u64 {
    let mut reader = trace::TraceReader::open(path).unwrap();
    let mut calls = 0;
    for s in 0..reader.streams().len() {
        for r in reader.records(s).unwrap() {
            if matches!(r.unwrap(), trace::Record::Event(_)) {
                calls += 1;
            }
        }
    }
    calls
}

/// A trace recorded with --stacks: its call-site sections' flame graphs and tables are drawn too
/// (docs/reports.md, "Call sites"), offline.
#[test]
fn trace_report_with_stacks_draws_its_flame_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("stacks.alt");
    record(
        &trace,
        &["--stacks=all"],
        &[&alloclens_exe(), "workload", "events", "--events", "4"],
    );
    let html_path = dir.path().join("stacks.html");
    alloclens()
        .arg("report")
        .arg(&trace)
        .arg("-o")
        .arg(&html_path)
        .assert()
        .success();
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert_offline(&html);
    let flames = html.matches("data-flame=\"").count();
    assert!(flames >= 2, "calls and bytes at least: {flames}");
    assert!(html.contains("class=\"sites\""));
    if let Some(dom) = open_in_browser(&html_path, "report-trace-stacks") {
        assert_rendered(&dom, &html);
        let status = render_status(&dom);
        assert_eq!(status["flames"], flames as u64, "{status}");
        assert_eq!(status["flames_drawn"], flames as u64, "{status}");
        assert!(
            status["flame_frames"].as_u64().unwrap() > 2 * flames as u64,
            "{status}"
        );
    }
}

#[test]
fn trace_report_renders_every_chart_offline() {
    let trace = trace_fixture();
    let dir = tempfile::tempdir().unwrap();
    let html_path = dir.path().join("trace.html");
    alloclens()
        .arg("report")
        .arg(trace)
        .arg("-o")
        .arg(&html_path)
        .assert()
        .success();
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert_offline(&html);
    let ids = chart_ids(&html);
    for id in [
        "p0-live-bytes-by-calls",
        "p0-live-allocations-by-time",
        "p0-cumulated-by-calls",
        "p0-sizes-16",
        "p0-sizes-32k",
        "p0-sizes-pow2",
        "p0-lifetime-cdf",
    ] {
        assert!(ids.iter().any(|i| i == id), "no chart {id} in {ids:?}");
    }
    // The markers made phases: they are shaded (bands in the chart data) and listed.
    assert!(html.contains("\"bands\":[{"), "no phase bands");
    assert!(html.contains("Phases (shaded in the charts)"));
    if let Some(dom) = open_in_browser(&html_path, "report-trace") {
        assert_rendered(&dom, &html);
    }
}

fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn png_and_svg_figures_for_every_chart() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let (png, svg) = (dir.path().join("png"), dir.path().join("svg"));
    alloclens()
        .arg("report")
        .arg(&f.sweep)
        .arg("--png")
        .arg(&png)
        .arg("--svg")
        .arg(&svg)
        .assert()
        .success();
    let (_, html) = report_html(&f.sweep, &[]);
    let ids = chart_ids(&html);
    for id in &ids {
        let p = png.join(format!("{id}.png"));
        assert_eq!(png_size(&p), (1200, 700), "{}", p.display());
        // Non-empty: more than a blank canvas compresses to.
        assert!(
            p.metadata().unwrap().len() > 10_000,
            "{} looks blank",
            p.display()
        );
        let s = std::fs::read_to_string(svg.join(format!("{id}.svg"))).unwrap();
        assert!(
            s.contains("width=\"1200\"") && s.contains("<polyline"),
            "{id}.svg"
        );
    }
    assert_eq!(std::fs::read_dir(&png).unwrap().count(), ids.len());
    // A trace's figures too (log-scale histograms).
    let tpng = dir.path().join("trace-png");
    alloclens()
        .arg("report")
        .arg(trace_fixture())
        .arg("--png")
        .arg(&tpng)
        .assert()
        .success();
    assert_eq!(png_size(&tpng.join("p0-sizes-pow2.png")), (1200, 700));
}

fn diff_json(a: &Path, b: &Path) -> Value {
    json_stdout([
        OsStr::new("diff"),
        a.as_os_str(),
        b.as_os_str(),
        OsStr::new("--json"),
    ])
}

#[test]
fn diff_of_runs_shows_every_headline_with_its_change() {
    let f = fixtures();
    let results = testkit::results(&f.sweep);
    // Against itself: every figure found on both sides, no change.
    let same = diff_json(&f.sweep, &f.sweep);
    let rows = same["rows"].as_array().unwrap();
    for group in &results.summary {
        for v in &group.variants {
            let scope = format!("workers={} {}", group.params["workers"], v.variant);
            let row = rows
                .iter()
                .find(|r| r["scope"] == scope.as_str() && r["metric"] == "peak PSS (median)")
                .unwrap_or_else(|| panic!("no peak PSS row for {scope}"));
            assert_eq!(row["a"].as_f64(), v.peak_pss_median);
            assert_eq!(row["change"], 0.0);
        }
    }
    // Two different runs: scopes of one side only have a null on the other, matched ones a change.
    let other = diff_json(&f.hostile, &f.sweep);
    // Of different commands, which is said (issue 20); a run against itself says nothing.
    assert!(
        other["warnings"].to_string().contains("different commands"),
        "{other}"
    );
    assert!(!same["warnings"].to_string().contains("different commands"));
    let rows = other["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["a"].is_null() && !r["b"].is_null()));
    assert!(rows.iter().any(|r| !r["a"].is_null() && r["b"].is_null()));
    // The terminal table.
    alloclens()
        .arg("diff")
        .arg(&f.hostile)
        .arg(&f.hostile)
        .assert()
        .success()
        .stdout(predicates::str::contains("peak PSS (median)"))
        .stdout(predicates::str::contains("+0.0%"));
}

#[test]
fn diff_of_traces_and_mixed_kinds() {
    let trace = trace_fixture();
    let d = diff_json(trace, trace);
    let calls = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scope"] == "all processes" && r["metric"] == "calls")
        .unwrap()
        .clone();
    assert_eq!(calls["a"].as_f64().unwrap() as u64, calls_in_trace(trace));
    assert_eq!(calls["change_percent"], 0.0);
    alloclens()
        .arg("diff")
        .arg(trace)
        .arg(&fixtures().sweep)
        .assert()
        .failure()
        .stderr(predicates::str::contains("same kind"));
}

/// A shell that runs `ls` in a child and then execs a second `ls` is two processes in three or more
/// images (sh and ls in one pid): `diff` and the report's setup count the processes, not the images,
/// which they give apart (as analyze's "N process image(s) in M process(es)").
#[test]
fn diff_and_report_count_processes_apart_from_their_images() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("exec.alt");
    record(
        &trace,
        &[],
        &["sh", "-c", "ls / >/dev/null; exec ls / >/dev/null"],
    );
    let images = json_stdout([
        OsStr::new("analyze"),
        trace.as_os_str(),
        OsStr::new("--json"),
    ])["processes"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        images >= 3,
        "sh, its child's ls and the exec'd ls: {images}"
    );
    let d = diff_json(&trace, &trace);
    let all = |metric: &str| {
        d["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["scope"] == "all processes" && r["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} row: {d}"))["a"]
            .as_f64()
            .unwrap() as usize
    };
    assert_eq!(all("processes"), 2, "the shell and its one child");
    assert_eq!(all("process images"), images);
    let html_path = dir.path().join("exec.html");
    let html = testkit::report_page(&trace, &html_path);
    assert!(
        html.contains(&format!("2 ({images} process images)")),
        "the setup's processes fact"
    );
    assert!(
        html.contains(&format!(
            "Live bytes of all {images} process images together"
        )),
        "the whole tree's chart counts images"
    );
}

#[test]
fn compare_overlays_both_runs() {
    let f = fixtures();
    let b = f.hostile.to_str().unwrap();
    let (path, html) = report_html(&f.sweep, &["--compare", b]);
    assert_offline(&html);
    assert!(html.contains("\"label\":\"A: glibc #1\""), "no A series");
    assert!(html.contains("\"label\":\"B: glibc #1\""), "no B series");
    assert!(!html.contains(HOSTILE_ARG));
    if let Some(dom) = open_in_browser(&path, "report-run-compare") {
        assert_rendered(&dom, &html);
    }
}

/// The JSON chart data embedded in a page.
fn chart_data(html: &str) -> Value {
    let start = html.find("id=\"report-data\">").expect("chart data") + "id=\"report-data\">".len();
    let len = html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..start + len]).unwrap()
}

/// The cells after `<td>SCOPE</td><td>METRIC</td>` in the page's headline table.
fn headline_cells(html: &str, scope: &str, metric: &str) -> Vec<String> {
    // Text cells carry a class (left-aligned, wrapped); the cells' contents are what matters here.
    let html = &html.replace("<td class=\"text\">", "<td>");
    let key = format!("<td>{scope}</td><td>{metric}</td>");
    let start = html.find(&key).unwrap_or_else(|| panic!("no row {key}")) + key.len();
    let row = &html[start..start + html[start..].find("</tr>").unwrap()];
    row.split("<td>")
        .skip(1)
        .map(|c| unescape_html(c.trim_end_matches("</td>")))
        .collect()
}

#[test]
fn compare_overlays_two_traces_with_their_change() {
    let dir = tempfile::tempdir().unwrap();
    let prog = testkit::program("hold");
    let prog = prog.to_str().unwrap();
    // "Version" B holds twice as many blocks as A (same argument length, so libc does the same).
    let (na, nb) = (300_i64, 600_i64);
    let (a, b) = (dir.path().join("a.alt"), dir.path().join("b.alt"));
    record(&a, &[], &[prog, &na.to_string()]);
    record(&b, &[], &[prog, &nb.to_string()]);

    let html_path = dir.path().join("compare.html");
    alloclens()
        .arg("report")
        .arg(&a)
        .arg("--compare")
        .arg(&b)
        .arg("-o")
        .arg(&html_path)
        .assert()
        .success();
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert_offline(&html);
    assert!(html.contains("matched by position in pid order"));

    // Every overlaid chart has A's and B's lines, each with points.
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    let chart = |id: &str| {
        charts
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no chart {id}"))
    };
    let series_max = |id: &str, label: &str| {
        chart(id)["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["label"] == label)
            .unwrap_or_else(|| panic!("no series {label} in {id}"))["values"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .unwrap_or_else(|| panic!("series {label} of {id} is empty"))
    };
    for (id, what) in [
        ("p0-live-bytes-by-calls", "live bytes"),
        ("p0-live-allocations-by-calls", "live allocations"),
        ("p0-cumulated-by-calls", "upper bound (requested)"),
        ("p0-cumulated-by-calls", "lower bound"),
        ("p0-sizes-16", "requests"),
        ("p0-sizes-32k", "requests"),
        ("p0-lifetime-cdf", "fraction"),
    ] {
        series_max(id, &format!("A: {what}"));
        series_max(id, &format!("B: {what}"));
    }
    // B holds twice the blocks: more live at its peak, twice as many 40000-byte requests.
    assert!(
        series_max("p0-live-allocations-by-calls", "B: live allocations")
            > series_max("p0-live-allocations-by-calls", "A: live allocations")
    );
    let big = |label: &str| {
        let c = chart("p0-sizes-32k");
        let x = c["x"].as_array().unwrap();
        let i = x.iter().position(|v| v.as_f64() == Some(32768.0)).unwrap();
        let s = c["series"].as_array().unwrap();
        let s = s.iter().find(|s| s["label"] == label).unwrap();
        s["values"][i].as_f64().unwrap()
    };
    assert_eq!(big("A: requests"), (na / 2) as f64);
    assert_eq!(big("B: requests"), (nb / 2) as f64);

    // The headline table: both figures and the change the programs imply.
    let calls = headline_cells(&html, "process #0", "calls");
    assert_eq!(calls[0], calls_in_trace(&a).to_string());
    assert_eq!(calls[1], calls_in_trace(&b).to_string());
    assert_eq!(calls[2], format!("+{}", 2 * (nb - na)), "{calls:?}");
    let allocations = headline_cells(&html, "all processes", "allocations");
    assert_eq!(allocations[2], format!("+{}", nb - na), "{allocations:?}");

    if let Some(dom) = open_in_browser(&html_path, "report-trace-compare") {
        assert_rendered(&dom, &html);
    }
}

#[test]
fn compare_refuses_a_trace_with_a_results_directory() {
    let trace = trace_fixture();
    let run = &fixtures().hostile;
    let dir = tempfile::tempdir().unwrap();
    for (a, b) in [(trace, run.as_path()), (run.as_path(), trace)] {
        let out = alloclens()
            .arg("report")
            .arg(a)
            .arg("--compare")
            .arg(b)
            .arg("-o")
            .arg(dir.path().join("compare.html"))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(!dir.path().join("compare.html").exists());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("same kind"), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
}

fn csv_rows(path: &Path) -> i64 {
    csv::Reader::from_path(path).unwrap().records().count() as i64
}

/// Row count of a Parquet file with DuckDB (python3 -m pip install duckdb) when it is there; the
/// parquet crate's reader always.
fn parquet_rows(path: &Path) -> i64 {
    let (rows, _) = report::describe_parquet(path).unwrap();
    let query = format!(
        "import duckdb; print(duckdb.sql(\"select count(*) from read_parquet('{}')\").fetchall()[0][0])",
        path.display()
    );
    match Command::new("python3").args(["-c", &query]).output() {
        Ok(out) if out.status.success() => {
            let n: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            assert_eq!(n, rows, "DuckDB and the parquet crate disagree");
        }
        _ => eprintln!(
            "note: python3 with duckdb not available; Parquet checked with the parquet crate only"
        ),
    }
    rows
}

#[test]
fn parquet_of_a_run_has_the_rows_of_its_csv() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    alloclens()
        .arg("report")
        .arg(&f.hostile)
        .arg("--parquet")
        .arg(dir.path())
        .assert()
        .success();
    assert_eq!(
        parquet_rows(&dir.path().join("samples.parquet")),
        csv_rows(&f.hostile.join("samples.csv"))
    );
    let markers = csv_rows(&f.hostile.join("markers.csv"));
    assert!(markers > 0);
    assert_eq!(parquet_rows(&dir.path().join("markers.parquet")), markers);
    let (_, columns) = report::describe_parquet(&dir.path().join("markers.parquet")).unwrap();
    assert!(columns.iter().any(|c| c == "line"));
}

#[test]
fn parquet_of_a_trace_has_its_timelines_and_histograms() {
    let trace = trace_fixture();
    let out = alloclens()
        .arg("analyze")
        .arg(trace)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let analysis: Value = serde_json::from_slice(&out.stdout).unwrap();
    let processes = analysis["processes"].as_array().unwrap();
    let count = |f: &dyn Fn(&Value) -> usize| processes.iter().map(f).sum::<usize>() as i64;
    let timeline = count(&|p| {
        p["timeline_by_calls"]["calls"].as_array().unwrap().len()
            + p["timeline_by_time"]["calls"].as_array().unwrap().len()
    });
    let sizes = count(&|p| {
        ["buckets_16", "buckets_32k", "buckets_pow2"]
            .iter()
            .map(|b| p["stats"]["sizes"][b].as_array().unwrap().len())
            .sum()
    });
    assert!(timeline > 0 && sizes > 0);
    let dir = tempfile::tempdir().unwrap();
    alloclens()
        .arg("report")
        .arg(trace)
        .arg("--parquet")
        .arg(dir.path())
        .assert()
        .success();
    assert_eq!(parquet_rows(&dir.path().join("timeline.parquet")), timeline);
    assert_eq!(parquet_rows(&dir.path().join("sizes.parquet")), sizes);
}

#[test]
fn export_writes_one_row_per_call() {
    let trace = trace_fixture();
    let dir = tempfile::tempdir().unwrap();
    alloclens()
        .arg("export")
        .arg(trace)
        .arg("--parquet")
        .arg(dir.path())
        .assert()
        .success();
    let path = dir.path().join("events.parquet");
    assert_eq!(parquet_rows(&path) as u64, calls_in_trace(trace));
    let (_, columns) = report::describe_parquet(&path).unwrap();
    for c in [
        "pid",
        "tid",
        "seq",
        "t_ns",
        "op",
        "size",
        "addr",
        "lifetime_calls",
    ] {
        assert!(columns.iter().any(|x| x == c), "no column {c}");
    }
}

/// A copy of the results directory `from` whose results.json says `schema_version: VERSION`.
fn with_schema_version(from: &Path, to: &Path, version: u64) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let path = to.join("results.json");
    let mut results: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    results["schema_version"] = version.into();
    std::fs::write(&path, serde_json::to_string(&results).unwrap()).unwrap();
}

#[test]
fn a_newer_results_schema_is_refused_naming_both_versions() {
    let f = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let newer = dir.path().join("newer");
    with_schema_version(&f.hostile, &newer, 99);
    let html = dir.path().join("r.html");
    for args in [
        vec![
            OsStr::new("report"),
            newer.as_os_str(),
            OsStr::new("-o"),
            html.as_os_str(),
        ],
        vec![OsStr::new("diff"), f.hostile.as_os_str(), newer.as_os_str()],
        vec![
            OsStr::new("report"),
            f.hostile.as_os_str(),
            OsStr::new("--compare"),
            newer.as_os_str(),
            OsStr::new("-o"),
            html.as_os_str(),
        ],
    ] {
        let out = alloclens().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("alloclens: error: ")
                && stderr.contains("schema version 99")
                && stderr.contains("version 1)")
                && stderr.contains("upgrade alloclens"),
            "{stderr}"
        );
    }
    assert!(!html.exists(), "no report of a refused results directory");
    // The current version still loads.
    let same = dir.path().join("same");
    with_schema_version(&f.hostile, &same, 1);
    diff_json(&f.hostile, &same);
}

/// `(low, count)` of the process rows of a sizes CSV written by `analyze -o`.
fn process_buckets(path: &Path) -> Vec<(u64, u64)> {
    process_buckets_with_high(path)
        .into_iter()
        .map(|(low, _, count)| (low, count))
        .collect()
}

/// `(low, high, count)` of the process rows of a sizes CSV written by `analyze -o`.
fn process_buckets_with_high(path: &Path) -> Vec<(u64, u64, u64)> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (scope, low, high, count) = (col("scope"), col("low"), col("high"), col("count"));
    reader
        .records()
        .map(Result::unwrap)
        .filter(|r| &r[scope] == "process")
        .map(|r| {
            (
                r[low].parse().unwrap(),
                r[high].parse().unwrap(),
                r[count].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn size_histograms_draw_every_bucket_of_the_csv() {
    // Strings grown by realloc up to 256 KiB: about 16 k non-empty 16 B buckets, the small ones
    // holding most requests (thinning to 2000 points once kept 2 of the 16 below 256 B).
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("realloc.alt");
    record(
        &trace,
        &[],
        &[
            &alloclens_exe(),
            "workload",
            "realloc",
            "--appends",
            "300000",
        ],
    );
    let csv_dir = dir.path().join("csv");
    succeeded(
        alloclens()
            .arg("analyze")
            .arg(&trace)
            .arg("-o")
            .arg(&csv_dir)
            .stdout(Stdio::null()),
    );
    let html_path = dir.path().join("realloc.html");
    succeeded(
        alloclens()
            .arg("report")
            .arg(&trace)
            .arg("-o")
            .arg(&html_path),
    );
    let data = chart_data(&std::fs::read_to_string(&html_path).unwrap());
    let charts = data["charts"].as_array().unwrap();
    for (id, csv) in [
        ("p0-sizes-16", "sizes_16.csv"),
        ("p0-sizes-32k", "sizes_32k.csv"),
        ("p0-sizes-pow2", "sizes_pow2.csv"),
    ] {
        let expected = process_buckets_with_high(&csv_dir.join(csv));
        let chart = charts
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no chart {id}"));
        let xs = chart["x"].as_array().unwrap();
        let ys = chart["series"][0]["values"].as_array().unwrap();
        let ends = chart["bar_to"].as_array().expect("histogram bars");
        // One bar per CSV row, from its low end to its high end + 1 (the [0, 15] bucket at 0, no
        // longer moved to 1), as tall as its count.
        let drawn: Vec<(u64, u64, u64)> = xs
            .iter()
            .zip(ends)
            .zip(ys)
            .map(|((x, e), y)| {
                (
                    x.as_f64().unwrap() as u64,
                    e.as_f64().unwrap() as u64 - 1,
                    y.as_f64().unwrap() as u64,
                )
            })
            .collect();
        assert_eq!(drawn.len(), expected.len(), "{id}: bars drawn vs CSV rows");
        assert_eq!(drawn, expected, "{id}");
        // The log axis has ticks on powers of two only, none inside the bucket that starts at 0.
        let scale = &chart["x_scale"];
        let ticks = numbers(&scale["ticks"]);
        assert!(
            ticks.iter().all(|t| t.log2().fract() == 0.0),
            "{id}: {ticks:?}"
        );
        if expected[0].0 == 0 {
            assert!(ticks[0] > expected[0].1 as f64, "{id}: {ticks:?}");
        }
    }
    let buckets_16 = process_buckets(&csv_dir.join("sizes_16.csv"));
    assert!(buckets_16.len() > 2000, "{} buckets", buckets_16.len());
    let small = buckets_16.iter().filter(|b| b.0 < 256).count();
    assert!(small >= 15, "{small} buckets below 256 B");
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap_or(f64::NAN))
        .collect()
}

/// The value a tick label stands for ("1.5 MiB" -> 1572864, "200 ms" -> 0.2, "2 M/s" -> 2e6).
fn label_value(unit: &str, label: &str) -> f64 {
    let (n, u) = label.split_at(
        label
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .unwrap_or(label.len()),
    );
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("label {label:?}"));
    let m = match (unit, u.trim()) {
        ("bytes", "B") => 1.0,
        ("bytes", "KiB") => 1024.0,
        ("bytes", "MiB") => 1024.0 * 1024.0,
        ("bytes", "GiB") => 1024.0 * 1024.0 * 1024.0,
        ("seconds", "ms") => 1e-3,
        ("seconds", "s") => 1.0,
        ("seconds", "min") => 60.0,
        ("rate", "/s") => 1.0,
        ("rate", "k/s") => 1e3,
        ("rate", "M/s") => 1e6,
        ("count", "") | ("plain", "") => 1.0,
        ("count", "k") => 1e3,
        ("count", "M") => 1e6,
        _ => panic!("unit {unit}: label {label:?}"),
    };
    n * m
}

/// An axis's ticks are round: a constant step of 2^k bytes, or 1, 2, 5 × 10^k (whole minutes past a
/// minute), each tick a whole multiple of it; on a log axis powers of 2 (bytes) or 10; and each label
/// says exactly its tick (no "4.77 MiB").
fn assert_round_scale(id: &str, axis: &Value, scale: &Value) {
    let unit = axis["unit"].as_str().unwrap();
    let ticks = numbers(&scale["ticks"]);
    let labels: Vec<&str> = scale["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(ticks.len(), labels.len(), "{id}");
    assert!(!ticks.is_empty(), "{id}: no ticks");
    for (t, l) in ticks.iter().zip(&labels) {
        let v = label_value(unit, l);
        assert!(
            (v - t).abs() <= 1e-9 * t.abs().max(1e-9),
            "{id}: label {l} for tick {t}"
        );
    }
    if axis["log"] == true {
        let base: f64 = if unit == "bytes" { 2.0 } else { 10.0 };
        for t in &ticks {
            let e = t.log(base);
            assert!((e - e.round()).abs() < 1e-9, "{id}: log tick {t}");
        }
        return;
    }
    if ticks.len() < 2 {
        return;
    }
    let step = ticks[1] - ticks[0];
    let round_step = if unit == "bytes" {
        step >= 1.0 && step.log2().fract() == 0.0
    } else {
        let e = step.log10().floor();
        let m = step / 10f64.powf(e);
        [1.0, 2.0, 5.0, 10.0].iter().any(|r| (m - r).abs() < 1e-6)
            || (unit == "seconds" && step >= 60.0 && step % 60.0 == 0.0)
    };
    assert!(round_step, "{id}: step {step} ({unit}) in {labels:?}");
    for t in &ticks {
        let k = t / step;
        assert!((k - k.round()).abs() < 1e-6, "{id}: tick {t} step {step}");
    }
}

fn chart<'a>(charts: &'a [Value], id: &str) -> &'a Value {
    charts
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no chart {id}"))
}

/// Every chart of a page has round ticks on both axes (categories aside) and, in Chromium, draws
/// exactly the embedded ticks of its full view.
fn assert_round_ticks(html: &str, dom: Option<&str>) {
    let data = chart_data(html);
    let charts = data["charts"].as_array().unwrap();
    for c in charts {
        let id = c["id"].as_str().unwrap();
        assert_round_scale(id, &c["y_axis"], &c["y_scale"]);
        if c["x_labels"].is_null() {
            assert_round_scale(id, &c["x_axis"], &c["x_scale"]);
        }
    }
    if let Some(dom) = dom {
        let status = render_status(dom);
        for c in charts {
            let id = c["id"].as_str().unwrap();
            let drawn = &status["axes"][id];
            assert_eq!(drawn["y"], c["y_scale"]["labels"], "{id}: y ticks drawn");
            assert_eq!(drawn["x"], c["x_scale"]["labels"], "{id}: x ticks drawn");
        }
    }
}

/// Up to five allocators (those installed) with three repeats each, and a throughput: the case of
/// 15 lines per chart.
fn grouped_fixture() -> &'static (tempfile::TempDir, PathBuf, Vec<String>, u128, u128) {
    static G: OnceLock<(tempfile::TempDir, PathBuf, Vec<String>, u128, u128)> = OnceLock::new();
    G.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let variants: Vec<String> = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "tbbmalloc"]
            .into_iter()
            .filter(|a| *a == "glibc" || installed(a))
            .map(String::from)
            .collect();
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        };
        let before = now();
        let dir = run_into(
            root.path(),
            "grouped",
            &[
                "-a",
                &variants.join(","),
                "-r",
                "3",
                "--throughput",
                "throughput: ([0-9.]+)",
                "--",
                &alloclens_exe(),
                "workload",
                "twowave",
                "--wave-mb",
                "4",
                "--hold-ms",
                "100",
            ],
        );
        let after = now();
        (root, dir, variants, before, after)
    })
}

/// A figure of the summary (`peak_pss_median`, ...) and the same figure of a run.
type Median = fn(&VariantSummary) -> Option<f64>;
type OfRun = fn(&RunRecord) -> f64;

/// A run's figure for the chart `id`; the peak-RSS bars take the larger of its samples' and the
/// kernel's peak.
fn run_figure(id: &str, run: &RunRecord, of_run: OfRun) -> f64 {
    let value = of_run(run);
    match run.memory.kernel_peak_rss {
        Some(kernel) if id == "peak-rss" => value.max(kernel as f64),
        _ => value,
    }
}

#[test]
fn variants_compared_as_bars_with_the_spread_of_repeats() {
    let (_, dir, variants, before, after) = grouped_fixture();
    let results = testkit::results(dir);
    let (path, html) = report_html(dir, &[]);
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    let runs = &results.runs;
    let summary = &results.summary[0].variants;
    // Per figure: the bars are the summary's medians, best first, each whisker the min..max of the
    // variant's runs in results.json.
    let figures: [(&str, Median, OfRun, bool); 6] = [
        (
            "throughput",
            |v| v.throughput_median,
            |r| r.throughput.unwrap(),
            true,
        ),
        ("wall", |v| v.wall_median, |r| r.wall, false),
        (
            "peak-pss",
            |v| v.peak_pss_median,
            |r| r.memory.pss.peak as f64,
            false,
        ),
        (
            "mean-pss",
            |v| v.mean_pss_median,
            |r| r.memory.pss.mean,
            false,
        ),
        (
            "peak-rss",
            |v| v.peak_rss_median,
            |r| r.memory.rss.peak as f64,
            false,
        ),
        (
            "mean-rss",
            |v| v.mean_rss_median,
            |r| r.memory.rss.mean,
            false,
        ),
    ];
    for (id, median, of_run, higher_is_better) in figures {
        let c = chart(charts, &format!("{id}-by-variant"));
        let names: Vec<&str> = c["x_labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(names.len(), variants.len(), "{id}");
        let mut medians = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let s = &c["series"][i];
            assert_eq!(s["label"], *name);
            let expected = median(summary.iter().find(|v| v.variant == *name).unwrap()).unwrap();
            assert_eq!(s["values"][i].as_f64(), Some(expected), "{id} {name}");
            medians.push(expected);
            let of_variant: Vec<f64> = runs
                .iter()
                .filter(|r| r.variant == *name)
                .map(|r| run_figure(id, r, of_run))
                .collect();
            assert_eq!(of_variant.len(), 3);
            let lo = of_variant.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = of_variant.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(s["low"][i].as_f64(), Some(lo), "{id} {name} low");
            assert_eq!(s["high"][i].as_f64(), Some(hi), "{id} {name} high");
        }
        let ranked = medians.windows(2).all(|w| {
            if higher_is_better {
                w[0] >= w[1]
            } else {
                w[0] <= w[1]
            }
        });
        assert!(ranked, "{id}: not best first: {names:?} {medians:?}");
    }
    // The ranking table says the same at a glance.
    assert!(html.contains("Ranking: per figure, the variants from best to worst"));
    // The summary table shows what the terminal shows: ratios with their uncertainty (throughput's
    // included) and the peak-RSS ratio, as results.json has them.
    assert!(html.contains("ranked by throughput"), "summary caption");
    assert!(html.contains("<th>throughput ratio</th>") || html.contains(">throughput ratio<"));
    assert!(
        html.contains(">peak RSS ratio<"),
        "no peak RSS ratio column"
    );
    for v in summary {
        for (ratio, r, sd) in [
            ("wall_ratio", v.wall_ratio, v.wall_ratio_stddev),
            (
                "throughput_ratio",
                v.throughput_ratio,
                v.throughput_ratio_stddev,
            ),
            ("peak_rss_ratio", v.peak_rss_ratio, v.peak_rss_ratio_stddev),
        ] {
            if let (Some(r), Some(sd)) = (r, sd) {
                let cell = format!("{r:.2} ± {sd:.2}×");
                assert!(
                    html.contains(&cell),
                    "{} {ratio}: no cell {cell}",
                    v.variant
                );
            }
        }
    }
    // Each run's absolute start, between the moments before and after `alloclens run`, in order.
    let starts: Vec<u128> = runs
        .iter()
        .map(|r| r.start_unix_ns.expect("start_unix_ns") as u128)
        .collect();
    assert!(
        starts.iter().all(|s| s >= before && s <= after),
        "{starts:?}"
    );
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    // Repeats are grouped: one group per variant in every chart over time, the median run first.
    for id in ["pss-over-time", "rss-over-time", "vss-over-time"] {
        let c = chart(charts, id);
        let series = c["series"].as_array().unwrap();
        assert_eq!(series.len(), 3 * variants.len(), "{id}");
        let mut groups: Vec<&str> = Vec::new();
        for s in series {
            let g = s["group"].as_str().unwrap();
            assert!(s["label"].as_str().unwrap().starts_with(g), "{s}");
            assert!(
                !s["label"].as_str().unwrap().contains("#0"),
                "repeats count from 1"
            );
            if groups.last() != Some(&g) {
                groups.push(g);
            }
        }
        assert_eq!(groups, *variants, "{id}: one group per variant, in order");
        for g in series.chunks(3) {
            assert_eq!(
                g[0]["emphasis"], "bold",
                "{id}: the median repeat leads its group"
            );
        }
    }
    // VSS over time is samples.csv's vss of the tree.
    let vss = chart(charts, "vss-over-time");
    let peak_vss = runs
        .iter()
        .map(|r| r.memory.vss.peak as f64)
        .fold(0.0, f64::max);
    let drawn_peak = vss["series"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| numbers(&s["values"]))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    assert_eq!(drawn_peak, peak_vss);
    // PSS and RSS of each variant on one plot.
    for v in variants {
        let c = chart(charts, &format!("pss-rss-{v}"));
        let labels: Vec<&Value> = c["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| &s["label"])
            .collect();
        assert_eq!(labels, ["PSS", "RSS"]);
    }
    let dom = open_in_browser(&path, "report-run-grouped");
    assert_round_ticks(&html, dom.as_deref());
    if let Some(dom) = dom {
        assert_rendered(&dom, &html);
        let status = render_status(&dom);
        // One legend entry per variant, named after it, never "—".
        let legend = &status["axes"]["pss-over-time"]["legend"];
        assert_eq!(legend, &serde_json::json!(variants), "{legend}");
        assert!(!dom.contains("u-value\">—<"), "a legend value reads —");
        // Every table fits 1400 px.
        assert_eq!(status["wide_tables"], serde_json::json!([]), "{status}");
    }
    // Zoomed in (as a drag does), the time axis gets new ticks by the same rules: round ones.
    let zoomed = dir.join("zoomed.html");
    let probe = r##"<script>
setTimeout(function () {
  var u = window.alloclensPlots["pss-over-time"];
  u.setScale("x", { min: 0.123, max: 0.377 });
  // uPlot redraws after the current task.
  setTimeout(function () {
    var pre = document.createElement("pre"); pre.id = "zoom-probe";
    pre.textContent = JSON.stringify({ x: u.axes[0]._splits, labels: u.axes[0]._values });
    document.body.appendChild(pre);
  }, 100);
}, 300);
</script></body>"##;
    std::fs::write(&zoomed, html.replace("</body>", probe)).unwrap();
    if let Some(dom) = open_in_browser(&zoomed, "report-run-zoomed") {
        let start = dom.find("id=\"zoom-probe\">").expect("probe ran") + "id=\"zoom-probe\">".len();
        let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
        let probe: Value = serde_json::from_str(&unescape_html(text)).unwrap();
        let scale = serde_json::json!({"ticks": probe["x"], "labels": probe["labels"]});
        assert_round_scale(
            "zoomed pss-over-time",
            &serde_json::json!({"unit": "seconds"}),
            &scale,
        );
        let ticks = numbers(&probe["x"]);
        assert!(ticks.len() >= 4, "{probe}");
        assert!(ticks.iter().all(|t| (0.123..=0.377).contains(t)), "{probe}");
    }
}

#[test]
fn lines_break_where_no_sample_was_taken() {
    // `alloclens run` is stopped (SIGSTOP) for 0.8 s while its command runs on: no sample is taken
    // for that long, and the lines must show the hole instead of a straight line across it.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("gap");
    let mut child = alloclens()
        .args(["run", "-o"])
        .arg(&dir)
        .args(["-a", "glibc", "-r", "1", "--interval", "20ms"])
        .args(["--program-output", "discard", "--", "sleep", "3"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until `sleep` runs (a child of alloclens), then stop alloclens for a while.
    let started = std::time::Instant::now();
    let sleep_runs = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| {
                std::fs::read_to_string(format!("/proc/{c}/comm"))
                    .is_ok_and(|n| n.trim() == "sleep")
            })
    };
    while !sleep_runs() {
        assert!(started.elapsed().as_secs() < 30, "the run did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(600));
    let signal = |s: &str| {
        assert!(Command::new("kill")
            .args([s, &pid.to_string()])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    std::thread::sleep(std::time::Duration::from_millis(800));
    signal("-CONT");
    assert!(child.wait().unwrap().success());

    // samples.csv has the hole: its largest step between total samples.
    let rows = testkit::csv_rows(dir.join("samples.csv"));
    let times: Vec<f64> = rows
        .iter()
        .filter(|r| r["scope"] == "total")
        .map(|r| r["t_s"].parse().unwrap())
        .collect();
    let (gap_from, gap_to) = times
        .windows(2)
        .map(|w| (w[0], w[1]))
        .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))
        .unwrap();
    assert!(
        gap_to - gap_from >= 0.5,
        "no hole in the samples: {times:?}"
    );

    let (path, html) = report_html(&dir, &[]);
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    for id in [
        "pss-over-time",
        "rss-over-time",
        "vss-over-time",
        "pss-rss-glibc",
    ] {
        let c = chart(charts, id);
        let x = numbers(&c["x"]);
        for s in c["series"].as_array().unwrap() {
            let breaks: Vec<f64> = s["breaks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| x[i.as_u64().unwrap() as usize])
                .collect();
            // A break inside the hole, and the value there is no point.
            assert!(
                breaks.iter().any(|b| *b > gap_from && *b < gap_to),
                "{id}: no break between {gap_from} and {gap_to}: {breaks:?}"
            );
            // No break where samples were regular (5 intervals = 0.1 s).
            let values = s["values"].as_array().unwrap();
            let points: Vec<f64> = x
                .iter()
                .zip(values)
                .filter(|(_, v)| !v.is_null())
                .map(|(x, _)| *x)
                .collect();
            for b in &breaks {
                let before = points
                    .iter()
                    .filter(|p| *p < b)
                    .fold(f64::MIN, |a, p| a.max(*p));
                let after = points
                    .iter()
                    .filter(|p| *p > b)
                    .fold(f64::MAX, |a, p| a.min(*p));
                assert!(
                    after - before > 0.1,
                    "{id}: a break at {b} between {before} and {after}"
                );
            }
        }
    }
    if let Some(dom) = open_in_browser(&path, "report-run-gap") {
        assert_rendered(&dom, &html);
    }
}

/// A program holding N blocks (like HOLD_N_C) for a short while, so that processes run one after
/// another with different peaks.
fn multi_process_trace(dir: &Path) -> PathBuf {
    let prog = testkit::program("hold");
    let prog = prog.to_str().unwrap();
    let script = [30, 2000, 10, 600, 90, 1200, 5, 300, 60, 900]
        .iter()
        .map(|n| format!("{prog} {n}"))
        .collect::<Vec<_>>()
        .join("; ");
    let trace = dir.join("tree.alt");
    record(&trace, &[], &["sh", "-c", &script]);
    trace
}

#[test]
fn trace_processes_by_peak_live_bytes_with_a_whole_tree_total_and_sortable_tables() {
    let dir = tempfile::tempdir().unwrap();
    let trace = multi_process_trace(dir.path());
    let analysis = json_stdout([
        OsStr::new("analyze"),
        trace.as_os_str(),
        OsStr::new("--json"),
    ]);
    let processes = analysis["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 11, "sh and 10 programs");
    let key = |p: &Value| {
        (
            p["stats"]["peak_live_bytes"]["value"].as_u64().unwrap(),
            p["stats"]["calls_total"].as_u64().unwrap(),
        )
    };
    let name = |p: &Value| {
        let exe = p["cmdline"][0].as_str().unwrap_or("");
        let exe = exe.rsplit('/').next().unwrap();
        if p["exec_index"].as_u64().unwrap() > 0 {
            format!("{} {exe} (exec {})", p["pid"], p["exec_index"])
        } else {
            format!("{} {exe}", p["pid"])
        }
    };
    let mut expected: Vec<&Value> = processes.iter().collect();
    expected.sort_by_key(|p| std::cmp::Reverse(key(p)));
    let expected: Vec<String> = expected.iter().map(|p| name(p)).collect();

    let html_path = dir.path().join("tree.html");
    let html = testkit::report_page(&trace, &html_path);
    // The processes table, in the page's order.
    let table = &html[html.find("<section id=\"processes\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let shown: Vec<String> = table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            let cell = row.split("</td>").next().unwrap();
            unescape_html(&cell[cell.rfind('>').unwrap() + 1..])
        })
        .collect();
    assert_eq!(shown, expected, "by peak live bytes, then calls");
    // Charts for the 8 largest, and the page says so.
    assert!(html.contains("Charts follow for the 8 largest of the 11 process images"));
    let sections: Vec<&str> = html
        .split("<section id=\"process-")
        .skip(1)
        .map(|s| {
            &s[s.find("<h2>Process ").unwrap() + "<h2>Process ".len()..s.find("</h2>").unwrap()]
        })
        .collect();
    assert_eq!(sections.len(), 8);
    let sections: Vec<String> = sections.iter().map(|s| unescape_html(s)).collect();
    assert_eq!(sections, expected[..8], "sections in the same order");
    // The whole tree first: its total never exceeds the sum of the peaks, and reaches at least the
    // largest live bytes one process had at a point of its timeline.
    let first_section = html.find("<section id=\"whole-tree\"").unwrap();
    assert!(first_section < html.find("<section id=\"processes\"").unwrap());
    let data = chart_data(&html);
    let total = chart(
        data["charts"].as_array().unwrap(),
        "tree-live-bytes-by-time",
    );
    let drawn_max = numbers(&total["series"][0]["values"])
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let sum_of_peaks: u64 = processes.iter().map(|p| key(p).0).sum();
    let largest_point = processes
        .iter()
        .flat_map(|p| p["timeline_by_time"]["live_bytes"].as_array().unwrap())
        .map(|t| t.as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        drawn_max <= sum_of_peaks as f64,
        "{drawn_max} > {sum_of_peaks}"
    );
    assert!(drawn_max >= largest_point, "{drawn_max} < {largest_point}");
    // The faint line sums the largest live bytes within each step: it reaches every process's peak.
    assert_eq!(total["series"][1]["label"], "max in step");
    let envelope_max = numbers(&total["series"][1]["values"])
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let largest_peak = processes.iter().map(|p| key(p).0).max().unwrap() as f64;
    assert!(
        envelope_max >= largest_peak,
        "{envelope_max} < {largest_peak}"
    );
    assert!(
        envelope_max <= sum_of_peaks as f64,
        "{envelope_max} > {sum_of_peaks}"
    );
    assert_round_ticks(&html, None);

    // Every table is sortable; in Chromium, a click on "calls" sorts the processes by their calls
    // (ascending, then descending on a second click).
    assert_eq!(
        html.matches("<table class=\"sortable\">").count(),
        html.matches("<table").count()
    );
    let clicked = dir.path().join("clicked.html");
    let probe = r##"<script>
setTimeout(function () {
  var t = document.querySelector("#processes table");
  var th = Array.prototype.find.call(t.tHead.rows[0].cells, function (c) { return c.textContent === "calls"; });
  var col = th.cellIndex, out = [];
  th.click(); out.push(Array.prototype.map.call(t.tBodies[0].rows, function (r) { return r.cells[col].textContent; }));
  th.click(); out.push(Array.prototype.map.call(t.tBodies[0].rows, function (r) { return r.cells[col].textContent; }));
  var pre = document.createElement("pre"); pre.id = "sort-probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 300);
</script></body>"##;
    std::fs::write(&clicked, html.replace("</body>", probe)).unwrap();
    if let Some(dom) = open_in_browser(&clicked, "report-trace-sorted") {
        let start = dom.find("id=\"sort-probe\">").expect("probe ran") + "id=\"sort-probe\">".len();
        let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
        let orders: Vec<Vec<String>> = serde_json::from_str(&unescape_html(text)).unwrap();
        let mut calls: Vec<u64> = processes.iter().map(|p| key(p).1).collect();
        calls.sort_unstable();
        let as_text = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>();
        assert_eq!(orders[0], as_text(&calls), "ascending");
        calls.reverse();
        assert_eq!(orders[1], as_text(&calls), "descending");
    }
    if let Some(dom) = open_in_browser(&html_path, "report-trace-tree") {
        assert_rendered(&dom, &html);
        assert_round_ticks(&html, Some(&dom));
    }
}

#[test]
fn sweep_lines_carry_the_spread_of_repeats() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_into(
        root.path(),
        "sweep-repeats",
        &[
            "-a",
            "glibc",
            "-r",
            "2",
            "--param",
            "mb=2,6",
            "--",
            &alloclens_exe(),
            "workload",
            "twowave",
            "--wave-mb",
            "{mb}",
            "--hold-ms",
            "30",
        ],
    );
    let runs = testkit::results(&dir).runs;
    let (path, html) = report_html(&dir, &[]);
    let data = chart_data(&html);
    let charts = data["charts"].as_array().unwrap();
    let figures: [(&str, OfRun); 3] = [
        ("mean-rss-vs-mb", |r| r.memory.rss.mean),
        ("peak-pss-vs-mb", |r| r.memory.pss.peak as f64),
        ("wall-vs-mb", |r| r.wall),
    ];
    for (id, of_run) in figures {
        let c = chart(charts, id);
        assert_eq!(numbers(&c["x"]), [2.0, 6.0], "{id}");
        let s = &c["series"][0];
        for (i, mb) in ["2", "6"].iter().enumerate() {
            let values: Vec<f64> = runs
                .iter()
                .filter(|r| r.params["mb"] == *mb)
                .map(|r| run_figure(id, r, of_run))
                .collect();
            assert_eq!(values.len(), 2);
            assert_eq!(
                s["low"][i].as_f64(),
                Some(values[0].min(values[1])),
                "{id} mb={mb}"
            );
            assert_eq!(
                s["high"][i].as_f64(),
                Some(values[0].max(values[1])),
                "{id} mb={mb}"
            );
        }
    }
    // Three times the waves, more memory: the line rises.
    let mean_rss = numbers(&chart(charts, "mean-rss-vs-mb")["series"][0]["values"]);
    assert!(mean_rss[1] > mean_rss[0], "{mean_rss:?}");
    let dom = open_in_browser(&path, "report-run-sweep-repeats");
    assert_round_ticks(&html, dom.as_deref());
    if let Some(dom) = dom {
        assert_rendered(&dom, &html);
    }
}
