//! The `alloclens` binary under test, after ripgrep's `TestCommand`: a `Command` with assertions
//! that show the command and its stderr when they fail.
//!
//! `alloclens().args(["analyze", "t.alt", "--json"]).json()` runs it, asserts it succeeded and
//! parses its stdout; `.fails()` asserts the opposite; `.pipe(bytes)` feeds it input. A
//! `TestCommand` derefs to its `Command`, so anything `Command` does (stdout to null, a process
//! group) is still at hand.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The path of the alloclens binary cargo built for this test run (beside the test binary's
/// `deps/` folder), for commands that run alloclens's own workloads.
pub fn alloclens_exe() -> String {
    let exe = crate::target_profile_dir().join("alloclens");
    assert!(
        exe.exists(),
        "{} is not built (the tests of crates/alloclens build it: cargo test -p alloclens)",
        exe.display()
    );
    exe.display().to_string()
}

/// `alloclens` with no arguments yet.
pub fn alloclens() -> TestCommand {
    TestCommand::new(Command::new(alloclens_exe()))
}

/// A command to run in a test, and what it must do.
pub struct TestCommand {
    cmd: Command,
    stdin: Option<Vec<u8>>,
}

impl Deref for TestCommand {
    type Target = Command;
    fn deref(&self) -> &Command {
        &self.cmd
    }
}

impl DerefMut for TestCommand {
    fn deref_mut(&mut self) -> &mut Command {
        &mut self.cmd
    }
}

impl std::fmt::Debug for TestCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.cmd.fmt(f)
    }
}

impl TestCommand {
    pub fn new(cmd: Command) -> TestCommand {
        TestCommand { cmd, stdin: None }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.arg(arg);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut TestCommand {
        self.cmd.current_dir(dir);
        self
    }

    /// Feeds `input` on its stdin (otherwise stdin is as `Command` sets it).
    pub fn pipe(&mut self, input: impl Into<Vec<u8>>) -> &mut TestCommand {
        self.stdin = Some(input.into());
        self
    }

    /// Runs it to the end; no assertion.
    pub fn run(&mut self) -> Output {
        let Some(input) = self.stdin.clone() else {
            return self
                .cmd
                .output()
                .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", self.cmd));
        };
        self.cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", self.cmd));
        let mut pipe = child.stdin.take().unwrap();
        // A writer thread: a command that writes before it has read everything does not deadlock.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    }

    /// Runs it, asserting that it succeeds (its stderr is the failure's message).
    pub fn ok(&mut self) -> Output {
        let out = self.run();
        assert!(
            out.status.success(),
            "{:?} failed ({}): {}",
            self.cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Runs it, asserting that it succeeds, and returns its stdout.
    pub fn ok_stdout(&mut self) -> String {
        String::from_utf8(self.ok().stdout).expect("stdout is UTF-8")
    }

    /// Runs it, asserting that it succeeds, and parses its stdout as JSON.
    pub fn json(&mut self) -> Value {
        let out = self.ok();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{:?}: stdout is not JSON ({e}): {}",
                self.cmd,
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Runs it, asserting that it fails (its stdout is the message when it does not).
    pub fn fails(&mut self) -> Output {
        let out = self.run();
        assert!(
            !out.status.success(),
            "{:?} succeeded, expected a failure: {}",
            self.cmd,
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }

    /// Runs it, asserting that it exits with `code`; returns its stderr.
    pub fn fails_with(&mut self, code: i32) -> String {
        let out = self.run();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{:?}: {}\n{stderr}",
            self.cmd,
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }
}

/// `alloclens report PATH -o PAGE`, asserting that it succeeds; the page's HTML.
pub fn report_page(path: &Path, page: &Path) -> String {
    alloclens().arg("report").arg(path).arg("-o").arg(page).ok();
    std::fs::read_to_string(page).expect("report wrote its page")
}

/// Runs `cmd` (any command), asserting that it succeeds; its stderr is the message.
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
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
    alloclens().args(args).json()
}

/// `alloclens record -q OPTIONS -o TRACE -- PROGRAM...`, which must succeed.
pub fn record<S: AsRef<OsStr>>(trace: &Path, options: &[&str], program: &[S]) {
    let mut cmd = alloclens();
    cmd.args(["record", "-q"])
        .args(options)
        .arg("-o")
        .arg(trace)
        .arg("--")
        .args(program)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd.ok();
}

/// Whether `alloclens allocators` reports the allocator as installed. Where CI runs every
/// allocator must be (the crate's skip policy): a missing one fails the test there instead of
/// skipping its part silently.
pub fn installed(name: &str) -> bool {
    let all = json_stdout(["allocators", "--json"]);
    let found = all
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["name"] == name && a["installed"] == true);
    found || crate::require(crate::Need::Allocator(name), "alloclens allocators")
}

/// The rows of a CSV file, each as column name -> value.
pub fn csv_rows(path: impl AsRef<Path>) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_path(path.as_ref())
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.as_ref().display()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_is_fed_and_a_failure_shows_the_stderr() {
        let mut cat = TestCommand::new(Command::new("cat"));
        assert_eq!(cat.pipe("piped\n").ok_stdout(), "piped\n");
        let mut sh = TestCommand::new(Command::new("sh"));
        sh.args(["-c", "echo why >&2; exit 3"]);
        assert_eq!(sh.fails_with(3), "why\n");
        let shown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            sh.ok();
        }))
        .unwrap_err();
        let message = shown.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("failed") && message.contains("why"),
            "{message}"
        );
    }
}
