//! `alloclens gate` on real recordings and runs of `iterations` (a cache kept from the second
//! iteration, a leak of LEAK bytes per iteration, churn freed in each): each limit passes and
//! fails, its exit status, a baseline written then met then exceeded, a suppression, a leak told
//! by its slope that the run's not-freed limit lets through, JUnit XML checked against a schema
//! by xmllint, and the refusals.
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use testkit::alloclens;

const ITERATIONS: &str = "6";
/// Kept by fill_cache from the second iteration to the end.
const CACHE: &str = "100000";
/// Before each iteration's calls, so that the marker of its line opens its phase.
const PAUSE_MS: &str = "100";

struct Fixtures {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    /// 3,000 bytes leaked per iteration by leak_step.
    leaky: PathBuf,
    /// Nothing leaked: only the cache stays.
    tidy: PathBuf,
    /// The tidy program with twice the iterations: twice the allocations.
    longer: PathBuf,
    /// `run -a glibc --marker` of a program whose cache is 8 MB from its second iteration on.
    run: PathBuf,
}

fn record(out: &Path, iterations: &str, leak: &str) {
    let exe = testkit::program("iterations");
    testkit::record(
        out,
        &["--stacks=all", "--marker", "^(iteration)"],
        &[exe.to_str().unwrap(), iterations, leak, CACHE, PAUSE_MS],
    );
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let (leaky, tidy, longer) = (
            dir.join("leaky.alt"),
            dir.join("tidy.alt"),
            dir.join("longer.alt"),
        );
        record(&leaky, ITERATIONS, "3000");
        record(&tidy, ITERATIONS, "0");
        record(&longer, "12", "0");
        let run = dir.join("run");
        alloclens()
            .args([
                "run",
                "-a",
                "glibc",
                "-r",
                "1",
                "--marker",
                "^(iteration)",
                "-o",
            ])
            .arg(&run)
            .arg("--")
            .arg(testkit::program("iterations"))
            .args(["3", "0", "8000000", PAUSE_MS])
            .ok();
        Fixtures {
            _dir: tmp,
            dir,
            leaky,
            tidy,
            longer,
            run,
        }
    })
}

/// `alloclens gate --limits FILE(limits) ARGS`: its output.
fn gate(name: &str, limits: &str, args: &[&Path]) -> Output {
    gate_with(name, limits, &[], args)
}

fn gate_with(name: &str, limits: &str, options: &[&str], inputs: &[&Path]) -> Output {
    let file = fixtures().dir.join(format!("{name}.toml"));
    std::fs::write(&file, limits).unwrap();
    alloclens()
        .args(["gate", "--limits"])
        .arg(&file)
        .args(options)
        .args(inputs)
        .run()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_status(out: &Output, status: i32) {
    assert_eq!(
        out.status.code(),
        Some(status),
        "{}\n{}",
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn each_class_of_limit_passes_when_met_and_sets_its_bit_when_not() {
    let f = fixtures();
    let run = f.run.as_path();
    // Memory: the 8 MB cache is resident.
    assert_status(
        &gate("rss_ok", "[limits]\npeak_rss = \"1 GiB\"\n", &[run]),
        0,
    );
    let out = gate("rss_over", "[limits]\npeak_rss = \"4 MiB\"\n", &[run]);
    assert_status(&out, 16 | 1);
    assert!(
        stdout(&out).contains("FAIL  peak_rss[glibc]"),
        "{}",
        stdout(&out)
    );
    // Retained: the RSS read at the last `iteration` line, the cache filled before it.
    let retained = "[retained]\nmarker = \"iteration\"\n[limits]\nretained_rss = ";
    assert_status(
        &gate("kept_ok", &format!("{retained}\"1 GiB\"\n"), &[run]),
        0,
    );
    assert_status(
        &gate("kept_over", &format!("{retained}\"4 MiB\"\n"), &[run]),
        16 | 1,
    );
    // Allocations: 6 x (64 churn + 1 leak) + the cache + stdio's buffer.
    assert_status(
        &gate("calls_ok", "[limits]\nallocations = 1000\n", &[&f.leaky]),
        0,
    );
    assert_status(
        &gate("calls_over", "[limits]\nallocations = 100\n", &[&f.leaky]),
        16 | 4,
    );
    // Leaks: 6 x 3,000 + the cache not freed.
    assert_status(
        &gate(
            "leak_ok",
            "[limits]\nnot_freed_bytes = \"200 KiB\"\n",
            &[&f.leaky],
        ),
        0,
    );
    let out = gate(
        "leak_over",
        "[limits]\nnot_freed_bytes = \"50 KiB\"\n",
        &[&f.leaky],
    );
    assert_status(&out, 16 | 2);
    let text = stdout(&out);
    assert!(
        text.contains("top sites by not_freed_bytes: fill_cache 97.7 KiB, leak_step 17.6 KiB"),
        "{text}"
    );
    // A site: leak_step's own bytes, in the leaky run only.
    let site = "[[site]]\nfunction = \"leak_step\"\nnot_freed_bytes = 0\n";
    assert_status(&gate("site_tidy", site, &[&f.tidy]), 0);
    assert_status(&gate("site_leaky", site, &[&f.leaky]), 16 | 8);
    // Two classes at once: both bits.
    let both = "[limits]\npeak_rss = \"4 MiB\"\nnot_freed_bytes = \"50 KiB\"\n";
    assert_status(&gate("both", both, &[run, &f.leaky]), 16 | 1 | 2);
}

#[test]
fn a_leak_is_told_by_its_slope_where_the_memory_not_freed_passes() {
    let f = fixtures();
    let limits = "[limits]\nnot_freed_bytes = \"200 KiB\"\nlive_growth_per_iteration = \"1 KiB\"\n\
                  [growth]\nmarker = \"iteration\"\nwarmup = 1\n";
    let out = gate("slope_leaky", limits, &[&f.leaky]);
    assert_status(&out, 16 | 2);
    let text = stdout(&out);
    assert!(text.contains("pass  not_freed_bytes"), "{text}");
    // 3,000 bytes a phase: 2.9 KiB.
    assert!(
        text.contains("FAIL  live_growth_per_iteration  2.9 KiB/iteration > 1.0 KiB/iteration"),
        "{text}"
    );
    // The cache, filled when the second iteration starts, is a step after the warm-up: no growth.
    assert_status(&gate("slope_tidy", limits, &[&f.tidy]), 0);
    // Without the warm-up its step is in the slope.
    let cold = limits.replace("warmup = 1", "warmup = 0");
    assert_status(&gate("slope_cold", &cold, &[&f.tidy]), 16 | 2);
}

#[test]
fn a_baseline_is_written_then_met_and_a_regression_fails() {
    let f = fixtures();
    let baseline = f.dir.join("baseline.json");
    let limits = "[limits]\nallocations = \"+10%\"\npeak_live_bytes = \"+10%\"\n";
    let out = gate_with(
        "base",
        limits,
        &[
            "--baseline",
            baseline.to_str().unwrap(),
            "--update-baseline",
        ],
        &[&f.tidy],
    );
    assert_status(&out, 0);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&baseline).unwrap()).unwrap();
    assert!(
        written["figures"]["allocations"].as_f64().unwrap() > 384.0,
        "{written}"
    );
    let base = ["--baseline", baseline.to_str().unwrap()];
    assert_status(&gate_with("base_met", limits, &base, &[&f.tidy]), 0);
    // Twice the iterations: about twice the allocations.
    let out = gate_with("base_over", limits, &base, &[&f.longer]);
    assert_status(&out, 16 | 4);
    assert!(
        stdout(&out).contains("FAIL  allocations"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("pass  peak_live_bytes"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_suppressed_site_leaves_the_memory_not_freed() {
    let f = fixtures();
    let limits = "[limits]\nnot_freed_bytes = \"8 KiB\"\n";
    assert_status(&gate("unsuppressed", limits, &[&f.tidy]), 16 | 2);
    let suppressed =
        format!("{limits}[[suppress]]\nfunction = \"fill_cache\"\nreason = \"a cache\"\n");
    let out = gate("suppressed", &suppressed, &[&f.tidy]);
    assert_status(&out, 0);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("suppressions: 97.7 KiB not freed in 1 block(s) left out"));
}

#[test]
fn junit_is_valid_against_the_schema_and_annotations_name_each_failure() {
    testkit::require!(program "xmllint");
    let f = fixtures();
    let junit = f.dir.join("gate.xml");
    let summary = f.dir.join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let limits = "[limits]\nallocations = 1000\nnot_freed_bytes = \"50 KiB\"\n\
                  [[site]]\nfunction = \"leak_step\"\nnot_freed_bytes = 0\n";
    let out = gate_with(
        "junit",
        limits,
        &[
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            summary.to_str().unwrap(),
            "--github",
        ],
        &[&f.leaky],
    );
    assert_status(&out, 16 | 2 | 8);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/data/junit.xsd");
    let lint = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&schema)
        .arg(&junit)
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stderr)
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"3\" failures=\"2\""), "{xml}");
    let text = stdout(&out);
    let annotations: Vec<&str> = text.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(annotations.len(), 2, "{text}");
    assert!(
        annotations[1].starts_with(
            "::error title=alloclens gate%3A site[leak_step].not_freed_bytes::17.6 KiB > 0 B"
        ),
        "{text}"
    );
    // The job summary is appended to, never replaced.
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("earlier step\n### alloclens gate: 2 of 3 limits failed (leaks, sites)"),
        "{md}"
    );
}

#[test]
fn what_cannot_be_judged_is_refused_in_one_line() {
    let f = fixtures();
    let refused = |name: &str, limits: &str, inputs: &[&Path], expected: &str| {
        let out = gate(name, limits, inputs);
        assert_status(&out, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("alloclens: error: ") && err.contains(expected),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    };
    refused(
        "relative",
        "[limits]\nallocations = \"+5%\"\n",
        &[&f.tidy],
        "add --baseline FILE",
    );
    refused(
        "unknown",
        "[limits]\npeak_rsss = 1\n",
        &[&f.tidy],
        "unknown figure 'peak_rsss'",
    );
    refused(
        "missing",
        "[limits]\nallocations = 1\n",
        &[Path::new("/nonexistent/t.alt")],
        "does not exist",
    );
    refused(
        "not_a_trace",
        "[limits]\nallocations = 1\n",
        &[fixtures().dir.join("unknown.toml").as_path()],
        "cannot be read as a trace",
    );
    // A figure no input measures fails its limit: a gate does not let through what it cannot see.
    let out = gate("unmeasured", "[limits]\npeak_rss = \"1 GiB\"\n", &[&f.tidy]);
    assert_status(&out, 16 | 1);
    assert!(stdout(&out)
        .contains("not measured by the inputs (a results directory of `alloclens run`)"));
}

/// The kinds of `record --leaks` on memcheck's nine cases (leak_cases.c: 216 B definitely lost in
/// 3 blocks, 184 B indirectly, 536 B possibly), with the allocating functions as top sites, a
/// suppression by function, and a trace without the check: its kinds are not measured.
#[test]
fn lost_bytes_of_a_leak_check_are_limited_and_suppressed_by_site() {
    let f = fixtures();
    let trace = f.dir.join("cases.alt");
    testkit::record(
        &trace,
        &["--leaks", "--stacks=all"],
        &[testkit::program("leak_cases")],
    );
    let limits = "[limits]\ndefinitely_lost_bytes = 0\nlost_bytes = \"1 KiB\"\n";
    let out = gate("lost", limits, &[&trace]);
    assert_status(&out, 16 | 2);
    let text = stdout(&out);
    assert!(
        text.contains(
            "FAIL  definitely_lost_bytes  216 B > 0 B; top sites by definitely_lost_bytes: aaa 152 B, bbb 64 B"
        ),
        "{text}"
    );
    assert!(text.contains("pass  lost_bytes  400 B ≤ 1.0 KiB"), "{text}");
    // The AAA blocks of cases 4 and 9 suppressed: case 3's BBB stays.
    let suppressed = format!("{limits}[[suppress]]\nfunction = \"aaa\"\n");
    let text = stdout(&gate("lost_suppressed", &suppressed, &[&trace]));
    assert!(
        text.contains("FAIL  definitely_lost_bytes  64 B > 0 B"),
        "{text}"
    );
    assert!(text.contains("pass  lost_bytes  248 B"), "{text}");
    // A recording without --leaks does not measure them: the limit fails, saying why.
    let out = gate("lost_unmeasured", limits, &[&f.tidy]);
    assert_status(&out, 16 | 2);
    assert!(
        stdout(&out).contains("not measured by the inputs (a trace recorded with --leaks"),
        "{}",
        stdout(&out)
    );
}
