//! `alloclens report`, `diff` and `export` end to end: real runs, the HTML page opened in headless
//! Chromium (Debian's `chromium`; the browser tests print a skip note when it is missing).
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use assert_cmd::assert::OutputAssertExt;
use serde_json::Value;

mod common;
use common::{alloclens, compile_c, exe, installed, json_stdout, record, succeeded};

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
        let exe = exe();
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

fn report_html(results: &Path, extra: &[&str]) -> (PathBuf, String) {
    let html = results.join("report.html");
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

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn headless(browser: &str, profile: &Path) -> Command {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--virtual-time-budget=5000",
        "--window-size=1280,2400",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    cmd
}

fn artifacts_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Opens the page in headless Chromium: returns the DOM after rendering, and keeps a screenshot
/// named `name.png` under target/test-artifacts/. None (with a note) when Chromium is missing.
fn open_in_browser(html: &Path, name: &str) -> Option<String> {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: chromium is not installed (apt-get install chromium); browser checks not run"
        );
        return None;
    };
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", html.display());
    let out = headless(browser, profile.path())
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    let shot = artifacts_dir().join(format!("{name}.png"));
    let profile = tempfile::tempdir().unwrap();
    let status = headless(browser, profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success() && shot.metadata().unwrap().len() > 0);
    Some(String::from_utf8(out.stdout).unwrap())
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// The status the page's script writes after drawing (see crates/report/src/render/html/page.js).
fn render_status(dom: &str) -> Value {
    let start = dom
        .find("id=\"render-status\"")
        .expect("status element in the DOM");
    let text = &dom[start..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</pre>").unwrap()];
    serde_json::from_str(&unescape(text))
        .unwrap_or_else(|e| panic!("no render status ({e}): {text:?}"))
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
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(f.sweep.join("results.json")).unwrap())
            .unwrap();
    for v in results["variants"].as_array().unwrap() {
        let version = v["version"].as_str().unwrap_or("");
        assert!(
            html.contains(version),
            "allocator version {version} missing"
        );
    }
    if let Some(dom) = open_in_browser(&path, "report-run-sweep") {
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
            &[&exe(), "workload", "events", "--events", "8"],
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
        &["--stacks"],
        &[&exe(), "workload", "events", "--events", "4"],
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
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(f.sweep.join("results.json")).unwrap())
            .unwrap();
    // Against itself: every figure found on both sides, no change.
    let same = diff_json(&f.sweep, &f.sweep);
    let rows = same["rows"].as_array().unwrap();
    for group in results["summary"].as_array().unwrap() {
        for v in group["variants"].as_array().unwrap() {
            let scope = format!(
                "workers={} {}",
                group["params"]["workers"].as_str().unwrap(),
                v["variant"].as_str().unwrap()
            );
            let row = rows
                .iter()
                .find(|r| r["scope"] == scope.as_str() && r["metric"] == "peak PSS (median)")
                .unwrap_or_else(|| panic!("no peak PSS row for {scope}"));
            assert_eq!(row["a"], v["peak_pss_median"]);
            assert_eq!(row["change"], 0.0);
        }
    }
    // Two different runs: scopes of one side only have a null on the other, matched ones a change.
    let other = diff_json(&f.hostile, &f.sweep);
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

/// A C program holding N blocks (alternately 40000 and 100 bytes) then freeing them: its calls are
/// one malloc and one free per block, plus the array's malloc and free.
const HOLD_N_C: &str = r#"#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    void **keep = malloc(n * sizeof *keep);
    for (int i = 0; i < n; i++) keep[i] = malloc(i % 2 ? 100 : 40000);
    for (int i = 0; i < n; i++) free(keep[i]);
    free(keep);
    return 0;
}
"#;

/// The JSON chart data embedded in a page.
fn chart_data(html: &str) -> Value {
    let start = html.find("id=\"report-data\">").expect("chart data") + "id=\"report-data\">".len();
    let len = html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..start + len]).unwrap()
}

/// The cells after `<td>SCOPE</td><td>METRIC</td>` in the page's headline table.
fn headline_cells(html: &str, scope: &str, metric: &str) -> Vec<String> {
    let key = format!("<td>{scope}</td><td>{metric}</td>");
    let start = html.find(&key).unwrap_or_else(|| panic!("no row {key}")) + key.len();
    let row = &html[start..start + html[start..].find("</tr>").unwrap()];
    row.split("<td>")
        .skip(1)
        .map(|c| unescape(c.trim_end_matches("</td>")))
        .collect()
}

#[test]
fn compare_overlays_two_traces_with_their_change() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile_c(dir.path(), "hold", HOLD_N_C, &["-O0"]);
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
        p["timeline_by_calls"].as_array().unwrap().len()
            + p["timeline_by_time"].as_array().unwrap().len()
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
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (scope, low, count) = (col("scope"), col("low"), col("count"));
    reader
        .records()
        .map(Result::unwrap)
        .filter(|r| &r[scope] == "process")
        .map(|r| (r[low].parse().unwrap(), r[count].parse().unwrap()))
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
        &[&exe(), "workload", "realloc", "--appends", "300000"],
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
        let expected = process_buckets(&csv_dir.join(csv));
        let chart = charts
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no chart {id}"));
        let xs = chart["x"].as_array().unwrap();
        let ys = chart["series"][0]["values"].as_array().unwrap();
        let drawn: Vec<(u64, u64)> = xs
            .iter()
            .zip(ys)
            .map(|(x, y)| (x.as_f64().unwrap() as u64, y.as_f64().unwrap() as u64))
            .collect();
        // The chart puts the [0, 15] bucket at 1 (log axis).
        let expected: Vec<(u64, u64)> = expected.iter().map(|&(l, c)| (l.max(1), c)).collect();
        assert_eq!(drawn.len(), expected.len(), "{id}: bars drawn vs CSV rows");
        assert_eq!(drawn, expected, "{id}");
    }
    let buckets_16 = process_buckets(&csv_dir.join("sizes_16.csv"));
    assert!(buckets_16.len() > 2000, "{} buckets", buckets_16.len());
    let small = buckets_16.iter().filter(|b| b.0 < 256).count();
    assert!(small >= 15, "{small} buckets below 256 B");
}
