//! Helpers shared by the integration tests: the real binary, what is installed, JSON output.
#![allow(dead_code)] // each test binary uses a different subset

use std::ffi::OsStr;
use std::process::Command;

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

/// Whether `alloclens allocators` reports the allocator as installed.
pub fn installed(name: &str) -> bool {
    let out = alloclens().args(["allocators", "--json"]).output().unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == name && a["installed"] == true)
}

/// Runs alloclens with `args`, asserts success, and parses its stdout as JSON.
pub fn json_stdout<I, S>(args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = alloclens().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
