//! Real process trees for the integration tests: a python3 script run in its own process group,
//! whose processes announce themselves with "pid N" lines on stdout.

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// Python helper prepended to every script: `say(...)` writes one atomic line.
const PRELUDE: &str = "import os, sys, time, signal\n\
def say(s):\n    os.write(1, (s + '\\n').encode())\n";

pub struct Tree {
    pub root: u32,
    child: Child,
    stdout: BufReader<ChildStdout>,
    stdin: Option<ChildStdin>,
}

impl Tree {
    /// Starts `python3 -c PRELUDE+script` in a new process group.
    pub fn spawn(script: &str) -> Tree {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(format!("{PRELUDE}{script}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("python3 is needed by the tests");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        Tree {
            root: child.id(),
            child,
            stdout,
            stdin,
        }
    }

    /// Reads the next "pid N" line.
    pub fn next_pid(&mut self) -> u32 {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim()
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("expected 'pid N' from the test script, got {line:?}"))
    }

    pub fn pids(&mut self, n: usize) -> Vec<u32> {
        let mut pids: Vec<u32> = (0..n).map(|_| self.next_pid()).collect();
        pids.sort_unstable();
        pids
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // The whole group: the root and every descendant that did not change group.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.root as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }
}

/// Waits (at most 10 s: a hang guard, not a timing assertion) until `done` holds.
pub fn wait_until(what: &str, done: impl FnMut() -> bool) {
    testkit::wait_until(what, Duration::from_secs(10), done);
}

pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Field `n` (1-based, as in proc(5)) of /proc/PID/stat, counted after the comm.
pub fn stat_field(pid: u32, n: usize) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    after.split_whitespace().nth(n - 3).map(str::to_owned)
}

/// (sum of the per-mapping Pss lines in bytes, number of mappings) of /proc/PID/smaps: an
/// independent reading to check the sampler's smaps_rollup figures against.
pub fn smaps_pss(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut sum = 0;
    let mut mappings = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Pss:") {
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().unwrap();
            sum += kb * 1024;
            mappings += 1;
        }
    }
    (sum, mappings)
}
