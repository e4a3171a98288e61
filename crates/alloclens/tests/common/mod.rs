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

/// Whether `alloclens allocators` reports the allocator as installed.
pub fn installed(name: &str) -> bool {
    let out = alloclens().args(["allocators", "--json"]).output().unwrap();
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == name && a["installed"] == true)
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

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop: a real full disk.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// None (with the reason printed) when this machine cannot mount one (not root, no tmpfs).
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { dir }),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: a process of the test that still has a file open there does not keep it mounted.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Debian's `chromium` (or `chromium-browser`) when installed, for the report's browser checks.
pub fn chromium() -> Option<&'static str> {
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
