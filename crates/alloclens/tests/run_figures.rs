//! `alloclens run` figures that must be right, not just present (issue 15, "Figures that are
//! wrong"): every sample is consistent (`uss ≤ pss ≤ rss`) while memory moves fast.
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

mod common;
use common::{alloclens, compile_c};

/// Runs `alloclens run -o DIR/results ARGS`; returns (exit code, stderr).
fn run(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = alloclens()
        .arg("run")
        .arg("-o")
        .arg(dir.join("results"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| {
            headers
                .iter()
                .zip(r.unwrap().iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn number(row: &BTreeMap<String, String>, column: &str) -> u64 {
    row.get(column)
        .unwrap_or_else(|| panic!("no column {column} in {row:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{column} is not a number in {row:?}"))
}

/// Like mimalloc-bench's malloc-large: four slots, each repeatedly freed and refilled with a
/// 5-25 MiB block that is written all over, for 1.5 s.
const MALLOC_LARGE: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void) {
    void *slot[4] = {0};
    unsigned seed = 1;
    double end = now() + 1.5;
    while (now() < end) {
        seed = seed * 1103515245u + 12345u;
        size_t size = (size_t)(5 + (seed >> 16) % 21) << 20;
        int i = (seed >> 8) % 4;
        free(slot[i]);
        slot[i] = malloc(size);
        memset(slot[i], 1, size);
    }
    return 0;
}
"#;

/// Issue 15: PSS and USS above RSS in 843 of 1,337 samples of malloc-large, and a peak PSS above
/// the peak RSS in the summary.
#[test]
fn pss_never_exceeds_rss_in_samples_or_summary() {
    let dir = tempfile::tempdir().unwrap();
    let program = compile_c(dir.path(), "malloc_large", MALLOC_LARGE, &["-O1"]);
    let program = program.to_str().unwrap();
    let (code, stderr) = run(
        dir.path(),
        &["-a", "glibc", "-r", "1", "--interval", "5ms", "--", program],
    );
    assert_eq!(code, 0, "{stderr}");
    let samples = csv_rows(&dir.path().join("results/samples.csv"));
    assert!(samples.len() >= 40, "only {} sample rows", samples.len());
    for row in &samples {
        let (uss, pss, rss) = (number(row, "uss"), number(row, "pss"), number(row, "rss"));
        assert!(
            uss <= pss && pss <= rss,
            "uss {uss} pss {pss} rss {rss}: {row:?}"
        );
    }
    // Every row says how old its PSS is.
    let fresh = samples.iter().filter(|r| number(r, "pss_age") == 0).count();
    assert!(fresh > 0, "no fresh PSS in {} rows", samples.len());

    let text = std::fs::read_to_string(dir.path().join("results/results.json")).unwrap();
    let results: Value = serde_json::from_str(&text).unwrap();
    let memory = &results["runs"][0]["memory"];
    let stat = |metric: &str, stat: &str| memory[metric][stat].as_f64().unwrap();
    for s in ["peak", "mean", "last"] {
        assert!(stat("uss", s) <= stat("pss", s), "{s}: {memory}");
        assert!(stat("pss", s) <= stat("rss", s), "{s}: {memory}");
    }
}
