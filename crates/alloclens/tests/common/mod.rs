//! Helpers shared by the integration tests: the real binary, what is installed, JSON output.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

/// The alloclens binary under test.
pub fn alloclens() -> Command {
    Command::cargo_bin("alloclens").expect("binary built")
}

/// Its path, for commands that run alloclens's own workloads.
pub fn exe() -> String {
    assert_cmd::cargo::cargo_bin("alloclens")
        .display()
        .to_string()
}

/// Whether `alloclens allocators` reports the allocator as installed. Where CI runs every
/// allocator must be (scripts/setup.sh installs them): a missing one fails the test there instead
/// of skipping its part silently (testkit's skip policy).
pub fn installed(name: &str) -> bool {
    let out = alloclens().args(["allocators", "--json"]).output().unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = all
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == name && a["installed"] == true);
    found || testkit::require(testkit::Need::Allocator(name), "alloclens allocators")
}

/// Runs `cmd` (an alloclens command), asserting that it succeeds; its stderr is the message.
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs alloclens with `args`, asserts success, and parses its stdout as JSON.
pub fn json_stdout<I, S>(args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = succeeded(alloclens().args(args));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes `source` to DIR/NAME.c and compiles it with `cc FLAGS` into DIR/NAME.
pub fn compile_c(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let ok = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success(), "cc failed on {name}.c");
    exe
}

/// `alloclens record -q OPTIONS -o TRACE -- PROGRAM...`, which must succeed.
pub fn record<S: AsRef<OsStr>>(trace: &Path, options: &[&str], program: &[S]) {
    succeeded(
        alloclens()
            .args(["record", "-q"])
            .args(options)
            .arg("-o")
            .arg(trace)
            .arg("--")
            .args(program)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
}

/// The rows of a CSV file, each as column name -> value.
pub fn csv_rows(path: impl AsRef<Path>) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_path(path.as_ref()).unwrap();
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

/// A tmpfs mounted on a fresh directory: a real full disk (testkit's; a failure where CI runs).
#[allow(unused_imports)] // each test binary uses a different subset
pub use testkit::SmallDisk;

/// Debian's `chromium` (or `chromium-browser`) when installed, for the report's browser checks;
/// where CI runs it must be (testkit's skip policy).
pub fn chromium() -> Option<&'static str> {
    let found = find_chromium();
    if found.is_none() {
        testkit::require(testkit::Need::Program("chromium"), "the browser checks");
    }
    found
}

fn find_chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Headless Chromium with a window of `window` (width, height) pixels and a profile of its own.
pub fn headless(browser: &str, profile: &Path, window: (u32, u32)) -> Command {
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
    ])
    .arg(format!("--window-size={},{}", window.0, window.1))
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    cmd
}

/// target/test-artifacts/: screenshots kept for a look after the tests.
pub fn artifacts_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
