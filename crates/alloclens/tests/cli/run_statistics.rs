//! `alloclens run`'s statistics end to end (issue 20): mean ± σ, user/sys, ratios with their
//! uncertainty, outliers, warmup, --prepare/--cleanup, throughput ranking and the --export-* files,
//! each checked against figures recomputed here from results.json's runs or from the program's
//! own output.
use std::path::Path;
use std::process::Stdio;

use runner::{Ranking, RunRecord, RunResults};
use serde_json::Value;

use testkit::{alloclens, alloclens_exe, csv_rows};

/// Runs `alloclens run -o DIR/results ARGS` in DIR; returns (exit code, stdout, stderr).
fn run_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = alloclens()
        .current_dir(dir)
        .arg("run")
        .arg("-o")
        .arg(dir.join("results"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn results(dir: &Path) -> RunResults {
    testkit::results(&dir.join("results"))
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sample_sd(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// The runs of `variant` in results.json, field `f` of each.
fn of_runs(r: &RunResults, variant: &str, f: impl Fn(&RunRecord) -> f64) -> Vec<f64> {
    r.runs
        .iter()
        .filter(|run| run.variant == variant)
        .map(f)
        .collect()
}

#[test]
fn exports_agree_with_results_json_and_the_figures_recomputed_by_hand() {
    let variants = "glibc,jemalloc";
    testkit::require!(allocator "jemalloc");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (code, stdout, stderr) = run_in(
        d,
        &[
            "-a",
            variants,
            "--runs",
            "3",
            "-w",
            "1",
            "--prepare",
            "echo p >> prepared",
            "--cleanup",
            "echo c >> cleaned",
            "--export-markdown",
            "summary.md",
            "--export-json",
            "summary.json",
            "--export-csv",
            "summary.csv",
            "--",
            "sh",
            "-c",
            "head -c 3000000 /dev/zero | wc -c > /dev/null; sleep 0.02",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = results(d);
    // Warmups are not measured; --prepare ran before each of them and each measured run, --cleanup
    // once per variant.
    assert_eq!(r.runs.len(), 6);
    assert_eq!(r.warmup, 1);
    let lines = |f: &str| std::fs::read_to_string(d.join(f)).unwrap().lines().count();
    assert_eq!(lines("prepared"), 2 + 6);
    assert_eq!(lines("cleaned"), 2);

    // JSON export: results.json's summary, as is (the file's text, not the runner's reading of it).
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap()
    };
    assert_eq!(
        read("summary.json"),
        read("results/results.json")["summary"]
    );

    // The figures, recomputed here from the runs.
    let summary = &r.summary[0].variants;
    let base_walls = of_runs(&r, "glibc", |run| run.wall);
    let csv = csv_rows(d.join("summary.csv"));
    assert_eq!(csv.len(), 2);
    for v in summary {
        let name = v.variant.as_str();
        let walls = of_runs(&r, name, |run| run.wall);
        let users = of_runs(&r, name, |run| run.user);
        // A run's peak RSS is the larger of its samples' and the kernel's (`kernel_peak_rss`);
        // a run with neither (it ended before its first sample, and the kernel's figure could be
        // alloclens's forked copy) has none.
        let peak_rss = |run: &RunRecord| {
            let m = &run.memory;
            let sampled = if m.samples > 0 {
                m.rss.peak as f64
            } else {
                0.0
            };
            sampled.max(m.kernel_peak_rss.unwrap_or(0) as f64)
        };
        let known = |v: Vec<f64>| v.into_iter().filter(|x| *x > 0.0).collect::<Vec<_>>();
        let rss = known(of_runs(&r, name, peak_rss));
        let base_rss = known(of_runs(&r, "glibc", peak_rss));
        let figures = [
            ("wall_mean", v.wall_mean),
            ("wall_stddev", v.wall_stddev),
            ("wall_median", v.wall_median),
            ("user_mean", v.user_mean),
            ("peak_rss_ratio", v.peak_rss_ratio),
            ("wall_ratio", v.wall_ratio),
            ("wall_ratio_stddev", v.wall_ratio_stddev),
        ];
        let f = |k: &str| {
            let (_, figure) = figures.iter().find(|(name, _)| *name == k).unwrap();
            figure.unwrap_or_else(|| panic!("{k} in {v:?}"))
        };
        assert!(close(f("wall_mean"), mean(&walls)), "{v:?}");
        assert!(close(f("wall_stddev"), sample_sd(&walls)), "{v:?}");
        assert!(close(f("user_mean"), mean(&users)), "{v:?}");
        assert!(close(f("peak_rss_ratio"), median(&rss) / median(&base_rss)));
        if name == "glibc" {
            assert!(v.wall_ratio_stddev.is_none());
        } else {
            let ratio = median(&walls) / median(&base_walls);
            let sd = ratio
                * ((sample_sd(&walls) / mean(&walls)).powi(2)
                    + (sample_sd(&base_walls) / mean(&base_walls)).powi(2))
                .sqrt();
            assert!(close(f("wall_ratio"), ratio));
            assert!(close(f("wall_ratio_stddev"), sd), "{v:?}");
            assert_eq!(v.wall_within_noise, Some((ratio - 1.0).abs() <= sd));
        }
        // CSV: the same numbers.
        let row = csv.iter().find(|row| row["variant"] == name).unwrap();
        for k in [
            "wall_mean",
            "wall_stddev",
            "wall_median",
            "user_mean",
            "peak_rss_ratio",
        ] {
            let cell: f64 = row[k].parse().unwrap();
            assert!(close(cell, f(k)), "{k}: {cell} vs {}", f(k));
        }
        // Markdown and the terminal table: every variant, the baseline marked.
        let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
        assert!(md.contains(&format!("| `{name}`")), "{md}");
        assert!(stdout.contains(name), "{stdout}");
    }
    let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(
        md.contains("`glibc` (baseline)") && md.contains("Mean ± σ"),
        "{md}"
    );
    assert!(
        stdout.contains("wall mean ± σ") && stdout.contains("user"),
        "{stdout}"
    );
}

#[test]
fn with_throughput_the_variants_are_ranked_by_it_in_the_users_unit() {
    testkit::require!(allocator "jemalloc");
    testkit::require!(allocator "mimalloc");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let alloclens = alloclens_exe();
    let (code, stdout, stderr) = run_in(
        d,
        &[
            "-a",
            "glibc,jemalloc,mimalloc",
            "-r",
            "2",
            "--throughput",
            r"throughput: ([0-9.]+)",
            "--throughput-unit",
            "ops/s",
            "--program-output",
            "save",
            "--export-csv",
            "summary.csv",
            "--",
            &alloclens,
            "workload",
            "churn",
            "--ops",
            "200000",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = results(d);
    assert_eq!(r.throughput_unit.as_deref(), Some("ops/s"));
    let group = &r.summary[0];
    assert_eq!(group.ranked_by, Ranking::Throughput);
    let variants = &group.variants;
    let medians: Vec<f64> = variants
        .iter()
        .map(|v| v.throughput_median.unwrap())
        .collect();
    assert!(medians.windows(2).all(|w| w[0] >= w[1]), "{medians:?}");
    // The table lists them in that order, in the user's unit.
    let at = |name: &str| {
        stdout
            .lines()
            .position(|l| l.trim_start().starts_with(name))
            .unwrap()
    };
    let order: Vec<usize> = variants.iter().map(|v| at(&v.variant)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{stdout}");
    assert!(
        stdout.contains("ops/s") && stdout.contains("throughput ratio"),
        "{stdout}"
    );
    // Each run's throughput is the workload's own line, and the spread is over those.
    for run in &r.runs {
        let log = d.join(format!("results/output/run-{}.log", run.index));
        let text = std::fs::read_to_string(&log).unwrap();
        let own: f64 = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("throughput: "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(close(run.throughput.unwrap(), own), "{run:?}");
    }
    let base = of_runs(&r, "glibc", |run| run.throughput.unwrap());
    for v in variants {
        let name = v.variant.as_str();
        let t = of_runs(&r, name, |run| run.throughput.unwrap());
        let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = t.iter().copied().fold(0.0, f64::max);
        assert_eq!(v.throughput_min, Some(lo));
        assert_eq!(v.throughput_max, Some(hi));
        assert!(close(
            v.throughput_ratio.unwrap(),
            median(&t) / median(&base)
        ));
    }
    let csv = csv_rows(d.join("summary.csv"));
    assert!(csv.iter().all(|row| row["throughput_unit"] == "ops/s"));
}

/// The command sleeps long the first time it runs in DIR, briefly after: hyperfine's cold cache.
const SLOW_FIRST: &str = "if [ -e ran ]; then sleep 0.05; else touch ran; sleep 1.5; fi";

#[test]
fn a_slow_first_run_is_flagged_and_a_warmup_takes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_in(
        tmp.path(),
        &["-a", "glibc", "-r", "5", "--", "sh", "-c", SLOW_FIRST],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("the first run was much slower"), "{stderr}");
    let r = results(tmp.path());
    assert!(r.summary[0].variants[0].first_run_outlier);
    assert!(
        r.warnings.iter().any(|w| w.contains("--warmup")),
        "{:?}",
        r.warnings
    );

    let tmp = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_in(
        tmp.path(),
        &[
            "-a", "glibc", "-r", "5", "--warmup", "1", "--", "sh", "-c", SLOW_FIRST,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = results(tmp.path());
    let walls = of_runs(&r, "glibc", |run| run.wall);
    assert_eq!(walls.len(), 5);
    assert!(
        walls.iter().all(|w| *w < 1.0),
        "the warmup took the slow run: {walls:?}"
    );
    // Five runs of one short sleep spread by microseconds, so a scheduling delay of a loaded
    // machine makes an outlier of any of them (it failed so in CI): when the first measured run
    // is flagged, it must really be the slowest measured one.
    if stderr.contains("first run was much slower") {
        assert!(
            walls.iter().all(|w| *w <= walls[0]),
            "flagged, but the first measured run is not the slowest: {walls:?}"
        );
    }
}

#[test]
fn a_failing_prepare_command_skips_the_run_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_in(
        tmp.path(),
        &[
            "-a",
            "glibc",
            "-r",
            "2",
            "-p",
            "echo no disk >&2; exit 3",
            "--",
            "touch",
            "ran",
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(!tmp.path().join("ran").exists(), "the command must not run");
    let r = results(tmp.path());
    for run in &r.runs {
        let why = run.ending.spawn_error.as_deref().unwrap();
        assert!(
            why.contains("--prepare") && why.contains("exited with 3") && why.contains("no disk"),
            "{why}"
        );
    }
    assert!(stderr.contains("--prepare"), "{stderr}");
}

/// A `|` or a backtick in a variant's label, a parameter's value or the throughput unit cannot
/// break the Markdown export: every row of a table has its header's cells, and the text reads back.
#[test]
fn markdown_export_escapes_pipes_and_backticks() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_in(
        tmp.path(),
        &[
            "-a",
            "glibc@my|lab`x",
            "-r",
            "1",
            "--param",
            "m=a|b,c`d",
            "--throughput",
            "n=(\\d+)",
            "--throughput-unit",
            "op|s",
            "--export-markdown",
            "summary.md",
            "--",
            "sh",
            "-c",
            "echo n=5",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let md = std::fs::read_to_string(tmp.path().join("summary.md")).unwrap();
    // Cells split at each `|` not escaped by a backslash.
    let cells = |line: &str| -> Vec<String> {
        let mut cells = vec![String::new()];
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    let next = chars.next().unwrap();
                    cells.last_mut().unwrap().push(next);
                }
                '|' => cells.push(String::new()),
                c => cells.last_mut().unwrap().push(c),
            }
        }
        cells
    };
    let tables: Vec<Vec<&str>> = md
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| l.starts_with('|'))
                .collect::<Vec<_>>()
        })
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(tables.len(), 2, "{md}");
    for table in tables {
        let width = cells(table[0]).len();
        for line in &table {
            assert_eq!(cells(line).len(), width, "{line}\n{md}");
        }
        let row = cells(table[2]);
        assert_eq!(row[1].trim(), "``my|lab`x`` (baseline)", "{md}");
        assert!(row[13].trim().ends_with(" op|s"), "{md}");
    }
    assert!(
        md.contains("### m=a\\|b") && md.contains("### m=c\\`d"),
        "{md}"
    );
}

/// An export that passed the check before the runs (issue 24: a missing folder is refused then,
/// in run_reliability.rs) but cannot be written at the end: here the command itself removes the
/// export's folder.
#[test]
fn an_export_that_cannot_be_written_fails_the_session_but_keeps_the_results() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("gone")).unwrap();
    let (code, stdout, stderr) = run_in(
        tmp.path(),
        &[
            "-a",
            "glibc",
            "-r",
            "1",
            "--export-csv",
            "gone/summary.csv",
            "--export-markdown",
            "summary.md",
            "--",
            "rmdir",
            "gone",
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("alloclens: error: cannot write the summary to 'gone/summary.csv'"),
        "{stderr}"
    );
    // The table, results.json and the other export are all there.
    assert!(stdout.contains("glibc"), "{stdout}");
    assert_eq!(results(tmp.path()).runs.len(), 1);
    assert!(tmp.path().join("summary.md").is_file());
}

/// Issue 35 item 3: each run's time-weighted mean PSS and RSS in results.json are the trapezoids over
/// samples.csv's `total` rows (what sql/figures/run_memory_from_samples.sql computes), to the last
/// digits, however few samples the run took. With `t_s` written to 0.1 ms while the mean used the
/// exact instants, a 30-ms run of 5 samples differed by 0.2 %, and this run (about 1e-4) too.
#[test]
fn the_time_weighted_means_are_the_trapezoids_of_samples_csv() {
    let dir = tempfile::tempdir().unwrap();
    let exe = alloclens_exe();
    let (code, _, err) = run_in(
        dir.path(),
        &[
            "-a",
            "glibc",
            "-r",
            "2",
            "--interval",
            "0.01",
            "--",
            &exe,
            "workload",
            "churn",
            "--ops",
            "300000",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let json = results(dir.path());
    let rows = csv_rows(dir.path().join("results/samples.csv"));
    let mut compared = 0;
    for run in &json.runs {
        let index = run.index.to_string();
        let mut points: Vec<(f64, f64, f64)> = rows
            .iter()
            .filter(|r| r["scope"] == "total" && r["run"] == index)
            .map(|r| {
                let n = |c: &str| r[c].parse::<f64>().unwrap();
                (n("t_s"), n("pss"), n("rss"))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(points.len() as u64, run.memory.samples);
        let span = points.last().unwrap().0 - points[0].0;
        if points.len() < 2 || span <= 0.0 {
            continue;
        }
        let mean = |f: fn(&(f64, f64, f64)) -> f64| {
            let area: f64 = points
                .windows(2)
                .map(|w| (w[1].0 - w[0].0) * (f(&w[0]) + f(&w[1])) / 2.0)
                .sum();
            area / span
        };
        let (pss, rss) = (mean(|p| p.1), mean(|p| p.2));
        let memory = &run.memory;
        for (name, csv, json) in [("pss", pss, memory.pss.mean), ("rss", rss, memory.rss.mean)] {
            assert!(
                (csv - json).abs() <= 1e-12 * json.abs(),
                "run {}: mean {name}: samples.csv {csv}, results.json {json}",
                run.index
            );
        }
        compared += 1;
    }
    assert!(compared > 0, "no run took two samples: nothing compared");
}
