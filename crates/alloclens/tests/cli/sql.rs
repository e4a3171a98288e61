//! The queries of sql/ (docs/sql.md), run with DuckDB by scripts/sql-figures.py on a dataset that
//! `alloclens merge` made of real traces and runs, checked figure by figure against `analyze --json`,
//! results.json and `diff --json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use testkit::{alloclens, alloclens_exe as exe, json_stdout, succeeded};

/// {figure: rows} from scripts/sql-figures.py --json on DATASET.
fn sql_figures(dataset: &Path) -> BTreeMap<String, Vec<Value>> {
    sql_figures_with(dataset, &[])
}

/// The same, with more options (`--views spark`: Spark's text of the views, run on DuckDB).
fn sql_figures_with(dataset: &Path, options: &[&str]) -> BTreeMap<String, Vec<Value>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sql-figures.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--json")
        .args(options)
        .arg(dataset)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sql-figures.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    serde_json::from_value(all["figures"].clone()).unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

fn float(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn close(a: f64, b: f64, relative: f64) -> bool {
    (a - b).abs() <= relative * a.abs().max(b.abs()).max(1e-300)
}

/// The rows of one figure for one scope of one process image.
struct Scope<'a> {
    pid: i64,
    exec_index: i64,
    tid: Option<i64>,
    what: String,
    figures: &'a BTreeMap<String, Vec<Value>>,
}

impl Scope<'_> {
    fn rows(&self, figure: &str) -> Vec<&Value> {
        self.figures[figure]
            .iter()
            .filter(|r| {
                int(&r["pid"]) == self.pid
                    && int(&r["exec_index"]) == self.exec_index
                    && r["scope"]
                        == if self.tid.is_some() {
                            "thread"
                        } else {
                            "process"
                        }
                    && r["tid"].as_i64() == self.tid
            })
            .collect()
    }

    /// The one row of a per-scope figure (None: the scope has none, e.g. no allocation ended).
    fn row(&self, figure: &str) -> Option<&Value> {
        let rows = self.rows(figure);
        assert!(
            rows.len() <= 1,
            "{}: {figure}: {} rows",
            self.what,
            rows.len()
        );
        rows.first().copied()
    }

    fn eq(&self, figure: &str, column: &str, sql: i64, analyze: &Value) {
        assert_eq!(
            sql,
            int(analyze),
            "{}: {figure}.{column}: SQL {sql}, analyze {analyze}",
            self.what
        );
    }

    /// Checks every figure of `stats` (an analyze ScopeReport) against the SQL rows.
    fn check(&self, stats: &Value, life_calls: i64) {
        let w = &self.what;
        let requests = self.row("requests").expect("every scope made calls");
        for c in [
            "calls_total",
            "requests",
            "requested_bytes",
            "failed_allocations",
            "failed_bytes",
            "null_frees",
            "unmatched_frees",
            "unmatched_reallocs",
        ] {
            self.eq("requests", c, int(&requests[c]), &stats[c]);
        }
        self.eq(
            "requests",
            "requests",
            int(&requests["requests"]),
            &stats["sizes"]["count"],
        );
        let share = float(&requests["share_below_512"]);
        assert!(
            close(share, float(&stats["sizes"]["share_below_512"]), 1e-12),
            "{w}: share_below_512 {share}"
        );

        let by_op: BTreeMap<String, i64> = self
            .rows("calls_by_op")
            .iter()
            .map(|r| (r["op"].as_str().unwrap().to_string(), int(&r["calls"])))
            .collect();
        let analyzed: BTreeMap<String, i64> = stats["calls"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), int(v)))
            .collect();
        assert_eq!(by_op, analyzed, "{w}: calls per entry point");

        let zero = serde_json::json!({});
        let allocations = self.row("allocations").unwrap_or(&zero);
        let get = |r: &Value, c: &str| r.get(c).map_or(0, int);
        self.eq(
            "allocations",
            "allocations",
            get(allocations, "allocations"),
            &stats["allocations"],
        );
        self.eq(
            "allocations",
            "cumulated_lower_bytes",
            get(allocations, "cumulated_lower_bytes"),
            &stats["cumulated_lower_bytes"],
        );
        let leaks = &stats["leaks"];
        self.eq(
            "allocations",
            "leaked_allocations",
            get(allocations, "leaked_allocations"),
            &leaks["count"],
        );
        self.eq(
            "allocations",
            "leaked_bytes",
            get(allocations, "leaked_bytes"),
            &leaks["bytes"],
        );
        let mut top: Vec<(i64, i64, i64)> = self
            .rows("leak_sizes")
            .iter()
            .map(|r| (int(&r["size"]), int(&r["count"]), int(&r["bytes"])))
            .collect();
        top.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
        let analyzed: Vec<(i64, i64, i64)> = leaks["top_sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (int(&t["size"]), int(&t["count"]), int(&t["bytes"])))
            .collect();
        assert_eq!(top, analyzed, "{w}: leaks.top_sizes");

        let peak = self.row("peak_live").expect("a peak row per scope");
        for (metric, column) in [
            ("peak_live_bytes", "peak_live_bytes"),
            ("peak_live_allocations", "peak_live_allocations"),
        ] {
            self.eq(
                "peak_live",
                column,
                int(&peak[column]),
                &stats[metric]["value"],
            );
            self.eq(
                "peak_live",
                &format!("{column}_call"),
                int(&peak[format!("{column}_call")]),
                &stats[metric]["call"],
            );
            self.eq(
                "peak_live",
                &format!("{column}_ns"),
                int(&peak[format!("{column}_ns")]),
                &stats[metric]["t_ns"],
            );
        }

        for (figure, key) in [
            ("sizes_16", "buckets_16"),
            ("sizes_32k", "buckets_32k"),
            ("sizes_pow2", "buckets_pow2"),
        ] {
            let mut sql: Vec<(i64, i64, i64)> = self
                .rows(figure)
                .iter()
                .map(|r| (int(&r["low"]), int(&r["high"]), int(&r["count"])))
                .collect();
            sql.sort();
            let analyzed: Vec<(i64, i64, i64)> = stats["sizes"][key]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| (int(&b["low"]), int(&b["high"]), int(&b["count"])))
                .collect();
            assert_eq!(sql, analyzed, "{w}: sizes.{key}");
        }

        let lifetimes = &stats["lifetimes"];
        match self.row("lifetimes") {
            None => assert_eq!(int(&lifetimes["count"]), 0, "{w}: lifetimes: no SQL row"),
            Some(r) => {
                self.eq("lifetimes", "count", int(&r["count"]), &lifetimes["count"]);
                self.eq(
                    "lifetimes",
                    "max_calls",
                    int(&r["max_calls"]),
                    &lifetimes["max_calls"],
                );
                for c in ["share_zero", "mean_calls"] {
                    let (a, b) = (float(&r[c]), float(&lifetimes[c]));
                    assert!(
                        close(a, b, 1e-12),
                        "{w}: lifetimes.{c}: SQL {a}, analyze {b}"
                    );
                }
            }
        }
        let percentiles = self.rows("lifetime_percentiles");
        let analyzed = lifetimes["percentiles"].as_array().unwrap();
        assert_eq!(
            percentiles.len(),
            analyzed.len(),
            "{w}: lifetime percentiles"
        );
        for p in analyzed {
            let q = float(&p["q"]);
            let r = percentiles
                .iter()
                .find(|r| float(&r["q"]) == q)
                .unwrap_or_else(|| panic!("{w}: no SQL percentile {q}"));
            self.eq(
                "lifetime_percentiles",
                &format!("calls at {q}"),
                int(&r["calls"]),
                &p["calls"],
            );
            self.eq(
                "lifetime_percentiles",
                &format!("ns at {q}"),
                int(&r["ns"]),
                &p["ns"],
            );
            assert!(
                close(
                    float(&r["share_of_life"]),
                    float(&p["share_of_life"]),
                    1e-12
                ),
                "{w}: share_of_life at {q}"
            );
            if q == 0.5 {
                self.eq(
                    "lifetime_percentiles",
                    "median_calls",
                    int(&r["calls"]),
                    &lifetimes["median_calls"],
                );
                self.eq(
                    "lifetime_percentiles",
                    "median_ns",
                    int(&r["ns"]),
                    &lifetimes["median_ns"],
                );
            }
        }
        let mut cdf: Vec<(i64, f64, f64)> = self
            .rows("lifetime_cdf")
            .iter()
            .map(|r| {
                (
                    int(&r["below_calls"]),
                    float(&r["fraction"]),
                    float(&r["share_of_life"]),
                )
            })
            .collect();
        cdf.sort_by_key(|p| p.0);
        let analyzed = lifetimes["cdf"].as_array().unwrap();
        assert_eq!(
            cdf.iter().map(|p| p.0).collect::<Vec<_>>(),
            analyzed
                .iter()
                .map(|p| int(&p["below_calls"]))
                .collect::<Vec<_>>(),
            "{w}: lifetimes.cdf points"
        );
        for (s, a) in cdf.iter().zip(analyzed) {
            assert!(
                close(s.1, float(&a["fraction"]), 1e-12),
                "{w}: cdf below {}: {} vs {}",
                s.0,
                s.1,
                a["fraction"]
            );
            assert!(
                close(s.2, s.0 as f64 / life_calls as f64, 1e-12),
                "{w}: cdf share_of_life"
            );
        }
    }
}

#[test]
fn sql_figures_of_merged_traces_equal_analyze() {
    testkit::require!(python "duckdb");
    let dir = tempfile::tempdir().unwrap();
    let exe = exe();
    // Small runs of the workloads whose patterns the queries must follow: realloc chains (realloc,
    // events), frees by another thread (xthread), several process images (forkworkers); events and
    // forkworkers with their output lines as phase markers.
    let workloads: [(&[&str], Option<&str>); 4] = [
        (&["realloc", "--appends", "5000"], None),
        (&["events", "--events", "8"], Some(r"^event (\d+)")),
        (&["xthread", "--objects", "5000"], None),
        (
            &[
                "forkworkers",
                "--shared-mb",
                "2",
                "--workers",
                "2",
                "--events",
                "3",
            ],
            Some(r"^(phase: .*|worker \d+ event \d+)"),
        ),
    ];
    let mut traces = Vec::new();
    for (w, marker) in workloads {
        let trace = dir.path().join(format!("{}.alt", w[0]));
        let mut record = alloclens();
        record.args(["record", "-o"]).arg(&trace);
        if let Some(regex) = marker {
            record.args(["--marker", regex]);
        }
        succeeded(record.args(["--", &exe, "workload"]).args(w));
        traces.push(trace);
    }
    let dataset = dir.path().join("dataset");
    succeeded(
        alloclens()
            .arg("merge")
            .args(&traces)
            .arg("-o")
            .arg(&dataset),
    );
    // Both texts of the views: DuckDB's (sql/views/) and Spark's (sql/spark/: link_roots by pointer
    // jumping instead of a recursive walk), each checked against analyze.
    let texts = [
        ("sql/views", sql_figures(&dataset)),
        (
            "sql/spark",
            sql_figures_with(&dataset, &["--views", "spark"]),
        ),
    ];
    for (text, figures) in &texts {
        check_against_analyze(text, figures, &traces);
    }
}

/// Every figure of every process image and thread of `traces` against `analyze --json`.
fn check_against_analyze(text: &str, figures: &BTreeMap<String, Vec<Value>>, traces: &[PathBuf]) {
    let mut images = 0;
    let mut threads = 0;
    let mut phases = 0;
    for trace in traces {
        let analysis = json_stdout([Path::new("analyze"), Path::new("--json"), trace]);
        for p in analysis["processes"].as_array().unwrap() {
            let (pid, exec_index) = (int(&p["pid"]), int(&p["exec_index"]));
            let life = int(&p["life_calls"]);
            let scope = |tid: Option<i64>| Scope {
                pid,
                exec_index,
                tid,
                what: format!(
                    "{text}: {} pid {pid} exec {exec_index} thread {tid:?}",
                    trace.display()
                ),
                figures,
            };
            scope(None).check(&p["stats"], life);
            phases += check_phases(text, figures, trace, p);
            images += 1;
            for t in p["threads"].as_array().unwrap() {
                scope(Some(int(&t["tid"]))).check(&t["stats"], life);
                threads += 1;
            }
        }
    }
    // Nothing in the SQL results that analyze does not have (pids are distinct across these traces).
    let sql_scopes = |scope: &str| {
        figures["requests"]
            .iter()
            .filter(|r| r["scope"] == scope)
            .count()
    };
    assert_eq!(sql_scopes("process"), images, "{text}: process images");
    assert_eq!(sql_scopes("thread"), threads, "{text}: threads");
    assert!(
        images >= 6 && threads >= 7,
        "{images} images, {threads} threads: the workloads changed?"
    );
    // Every SQL phase row is one of analyze's (phases are only listed for traces with markers).
    assert_eq!(figures["phases"].len(), phases, "{text}: phase rows");
    assert!(
        phases >= 10,
        "{text}: {phases} phases: the markers were not recorded?"
    );
}

/// The phases of one process image (analyze's `phases[]`) against the SQL `phases` rows of that image,
/// figure by figure; returns how many were compared (none for a trace recorded without markers,
/// whose SQL figure has no rows).
fn check_phases(
    text: &str,
    figures: &BTreeMap<String, Vec<Value>>,
    trace: &Path,
    process: &Value,
) -> usize {
    let (pid, exec_index) = (int(&process["pid"]), int(&process["exec_index"]));
    let rows: Vec<&Value> = figures["phases"]
        .iter()
        .filter(|r| int(&r["pid"]) == pid && int(&r["exec_index"]) == exec_index)
        .collect();
    let phases = process["phases"].as_array().unwrap();
    if rows.is_empty() && phases.len() == 1 && phases[0]["name"] == "start" {
        return 0; // no marker in this image's trace: the dataset has no phases to compare
    }
    let what = format!("{text}: {} pid {pid} exec {exec_index}", trace.display());
    assert_eq!(rows.len(), phases.len(), "{what}: phases");
    for (row, phase) in rows.iter().zip(phases) {
        assert_eq!(
            int(&row["phase"]),
            int(&phase["index"]),
            "{what}: phase index"
        );
        assert_eq!(row["name"], phase["name"], "{what}: phase name");
        for (column, analyze) in [
            ("start_call", &phase["start_call"]),
            ("end_call", &phase["end_call"]),
            ("calls_total", &phase["stats"]["calls_total"]),
            ("requests", &phase["stats"]["requests"]),
            ("requested_bytes", &phase["stats"]["requested_bytes"]),
            ("allocations", &phase["stats"]["allocations"]),
            (
                "peak_live_bytes",
                &phase["stats"]["peak_live_bytes"]["value"],
            ),
        ] {
            assert_eq!(
                int(&row[column]),
                int(analyze),
                "{what}: phase {}: {column}",
                phase["index"]
            );
        }
    }
    rows.len()
}

#[test]
fn sql_run_figures_equal_results_and_diff() {
    testkit::require!(python "duckdb");
    testkit::require!(allocator "jemalloc");
    let dir = tempfile::tempdir().unwrap();
    let exe = exe();
    let run = |name: &str| {
        let out = dir.path().join(name);
        succeeded(
            alloclens()
                .args([
                    "run",
                    "-a",
                    "glibc,jemalloc",
                    "-r",
                    "2",
                    "--interval",
                    "0.01",
                    "-o",
                ])
                .arg(&out)
                // Long enough (about 0.2 s) for several memory samples at --interval 0.01 on any
                // machine; a run that ends before its first sample has no row (checked below).
                .args(["--", &exe, "workload", "churn", "--ops", "300000"]),
        );
        out
    };
    let (a, b) = (run("a"), run("b"));
    let dataset = dir.path().join("dataset");
    for (host, results) in [("host-a", &a), ("host-b", &b)] {
        succeeded(
            alloclens()
                .args(["merge", "--host", host])
                .arg(results)
                .arg("-o")
                .arg(&dataset),
        );
    }
    let figures = sql_figures(&dataset);

    // run_summary = results.json summary, per host
    for (host, results) in [("host-a", &a), ("host-b", &b)] {
        let json = testkit::results(results);
        let variants = &json.summary[0].variants;
        let rows: Vec<&Value> = figures["run_summary"]
            .iter()
            .filter(|r| r["host"] == host)
            .collect();
        assert_eq!(rows.len(), variants.len(), "{host}: variants");
        for v in variants {
            let r = rows
                .iter()
                .find(|r| r["variant"] == v.variant.as_str())
                .expect("variant row");
            for (c, j) in [("runs", v.runs), ("failed", v.failed)] {
                assert_eq!(int(&r[c]), i64::from(j), "{host} {}: {c}", v.variant);
            }
            for (c, j) in [
                ("wall_median", v.wall_median),
                ("peak_pss_median", v.peak_pss_median),
                ("mean_pss_median", v.mean_pss_median),
                ("peak_rss_median", v.peak_rss_median),
                ("mean_rss_median", v.mean_rss_median),
                ("wall_ratio", v.wall_ratio),
                ("peak_pss_ratio", v.peak_pss_ratio),
                ("mean_pss_ratio", v.mean_pss_ratio),
                ("peak_rss_ratio", v.peak_rss_ratio),
            ] {
                let s = float(&r[c]);
                let j = j.unwrap_or_else(|| panic!("{host} {}: no {c}", v.variant));
                assert!(
                    close(s, j, 1e-12),
                    "{host} {}: {c}: SQL {s}, results.json {j}",
                    v.variant
                );
            }
        }
        // run_memory_from_samples = each run's peak (exact) and time-weighted mean: results.json's
        // means are computed from the microseconds samples.csv holds (runner::results_dir::
        // sample_instant), so they agree to the order of summation (issue 35: 0.2 % with t_s in 0.1 ms).
        let mut sampled_runs = 0;
        for r in &json.runs {
            let s = figures["run_memory_from_samples"]
                .iter()
                .find(|s| s["host"] == host && int(&s["run"]) == r.index as i64);
            let samples = r.memory.samples as i64;
            let Some(s) = s else {
                assert_eq!(samples, 0, "{host} run {}: sampled but no SQL row", r.index);
                continue;
            };
            assert_eq!(
                int(&s["samples"]),
                samples,
                "{host} run {}: samples",
                r.index
            );
            sampled_runs += 1;
            for (m, stats) in [("pss", &r.memory.pss), ("rss", &r.memory.rss)] {
                assert_eq!(
                    int(&s[format!("peak_{m}")]),
                    stats.peak as i64,
                    "{host} run {}: peak {m}",
                    r.index
                );
                let (sql, json) = (float(&s[format!("mean_{m}")]), stats.mean);
                assert!(
                    close(sql, json, 1e-12),
                    "{host} run {}: mean {m}: SQL {sql}, results.json {json}",
                    r.index
                );
            }
        }
        assert!(
            sampled_runs > 0,
            "{host}: no run was sampled, nothing compared"
        );
    }

    // run_diff = alloclens diff --json A B
    let diff = json_stdout([Path::new("diff"), Path::new("--json"), &a, &b]);
    let mut compared = 0;
    for d in diff["rows"].as_array().unwrap() {
        let r = figures["run_diff"].iter().find(|r| {
            r["a_host"] == "host-a"
                && r["b_host"] == "host-b"
                && r["variant"] == d["scope"]
                && r["metric"] == d["metric"]
        });
        let Some(r) = r else {
            panic!("no SQL row for diff's {} {}", d["scope"], d["metric"]);
        };
        for c in ["a", "b", "change", "change_percent"] {
            match (r[c].as_f64(), d[c].as_f64()) {
                (Some(s), Some(j)) => assert!(
                    close(s, j, 1e-9),
                    "{} {}: {c}: SQL {s}, diff {j}",
                    d["scope"],
                    d["metric"]
                ),
                (s, j) => assert_eq!(s, j, "{} {}: {c}", d["scope"], d["metric"]),
            }
        }
        compared += 1;
    }
    assert_eq!(compared, 12, "2 variants x 6 figures");
}
