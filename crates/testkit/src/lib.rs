//! What the integration tests share, after ripgrep's `tests/util.rs`, `macros.rs` and `hay.rs`:
//! one way to require a tool ([`require!`]), to wait ([`wait_until`]), to build a test program
//! ([`program`]), to run alloclens ([`alloclens`]), to write a trace by hand ([`TraceFile`]), to
//! open a page in a browser ([`open_in_browser`]), to read results.json ([`results()`]), and one
//! small disk ([`SmallDisk`]).
//!
//! **The skip policy.** A test that needs something a developer's machine may lack (gdb, an
//! allocator, Chromium, root) calls [`require!`]. Without it the test prints `skipped: ...` and
//! passes; but where `.ci/run` runs (`CI` set), `scripts/setup.sh test` has installed everything,
//! so a missing requirement there is a broken machine or setup script, and the test fails instead
//! of passing silently.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod browser;
mod command;
mod profile_table;
mod programs;
mod results;
mod traces;

pub use browser::{
    artifacts_dir, chromium, headless, open_in_browser, pre_text, render_status, unescape_html,
};
pub use command::{
    alloclens, alloclens_exe, csv_rows, installed, json_stdout, record, report_page, succeeded,
    TestCommand,
};
pub use profile_table::{
    code_ranges, profile_tables, read_profile_table, ProfileTable, TableStack, TABLE_DETACHED,
    TABLE_EXITED, TABLE_FLAG_ATTACHED, TABLE_RUNNING,
};
pub use programs::{program, source, Program, PROGRAMS};
pub use results::results;
pub use traces::{event, process_info, Calls, TraceFile};

/// cargo's profile folder of this build (`target/debug`): the test binary runs from its `deps/`.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe.parent().expect("the test binary's folder");
    if dir.ends_with("deps") {
        dir.parent().unwrap().to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// cargo's target folder (`target/`, or `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    let profile = target_profile_dir();
    profile.parent().map_or(profile.clone(), Path::to_path_buf)
}

/// Something a test needs from the machine.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// A program on `PATH` (`gdb`, `heaptrack`, `chromium`, `script`, ...).
    Program(&'a str),
    /// An allocator of `allocators::catalog` whose library is installed (`jemalloc`, ...).
    Allocator(&'a str),
    /// Running as root (KSM's sysfs, mounting a tmpfs).
    Root,
    /// The kernel's KSM (`/sys/kernel/mm/ksm`).
    Ksm,
    /// A Python module `python3` can import (`duckdb`).
    PythonModule(&'a str),
}

impl Need<'_> {
    fn is_met(self) -> bool {
        match self {
            Need::Program(name) => program_on_path(name),
            Need::Allocator(name) => name == "glibc" || allocator_library(name).is_some(),
            // SAFETY: geteuid has no preconditions and cannot fail.
            Need::Root => (unsafe { libc::geteuid() }) == 0,
            Need::Ksm => std::path::Path::new("/sys/kernel/mm/ksm/run").exists(),
            Need::PythonModule(name) => Command::new("python3")
                .args(["-c", &format!("import {name}")])
                .output()
                .is_ok_and(|o| o.status.success()),
        }
    }

    fn describe(self) -> String {
        match self {
            Need::Program(name) => format!("{name} is not installed"),
            Need::Allocator(name) => format!("the allocator {name} is not installed"),
            Need::Root => "not running as root".to_string(),
            Need::Ksm => "this kernel has no KSM".to_string(),
            Need::PythonModule(name) => format!("python3 cannot import {name}"),
        }
    }
}

/// True where `.ci/run` runs: `CI` set to anything but empty, `0` or `false` (the same rule as
/// the shim's build flags).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// True when `need` is met. Otherwise prints `skipped: ...` and returns false, or, where CI runs,
/// panics: CI's machine is set up to have everything.
pub fn require(need: Need, test: &str) -> bool {
    if need.is_met() {
        return true;
    }
    let why = need.describe();
    if in_ci() {
        panic!("{test}: {why}, and CI is set: scripts/setup.sh test installs it, so this machine's setup is broken");
    }
    eprintln!("skipped: {test}: {why} (scripts/setup.sh test installs it)");
    false
}

/// Returns from the calling test when a requirement is not met (see the crate's skip policy):
/// `require!(program "gdb")`, `require!(allocator "jemalloc")`, `require!(root)`, `require!(ksm)`,
/// `require!(python "duckdb")`.
#[macro_export]
macro_rules! require {
    (program $name:expr) => {
        $crate::require!(@need $crate::Need::Program($name))
    };
    (allocator $name:expr) => {
        $crate::require!(@need $crate::Need::Allocator($name))
    };
    (root) => {
        $crate::require!(@need $crate::Need::Root)
    };
    (ksm) => {
        $crate::require!(@need $crate::Need::Ksm)
    };
    (python $name:expr) => {
        $crate::require!(@need $crate::Need::PythonModule($name))
    };
    (@need $need:expr) => {
        if !$crate::require($need, module_path!()) {
            return;
        }
    };
}

/// The installed library of an allocator of the catalog (None for glibc, which is always there,
/// and for one that is not installed).
pub fn allocator_library(name: &str) -> Option<PathBuf> {
    allocators::discover()
        .into_iter()
        .find(|a| a.name == name)
        .and_then(|a| a.library)
}

/// True when `name` is an executable file in a directory of `PATH`.
pub fn program_on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Polls `done` every 10 ms until it is true; panics naming `what` after `limit` (a hang guard,
/// not a timing assertion: give it ample time).
/// What an attach left for process `pid` in our /tmp/alloclens-attach-UID: its lock and the
/// scratch directories named for it (`root`: the process's root as seen from here, `/` for our
/// own /tmp). Empty when the attach cleaned up. What is older than this test process was left
/// by an earlier run for a pid since reused (pid_max may be small), not by this attach.
pub fn attach_leftovers(root: &std::path::Path, pid: u32) -> Vec<String> {
    // SAFETY: geteuid has no preconditions.
    let dir = root.join(format!("tmp/alloclens-attach-{}", unsafe {
        libc::geteuid()
    }));
    let started = process_start();
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(
                    |e| match (e.metadata().and_then(|m| m.modified()), started) {
                        (Ok(modified), Some(started)) => modified >= started,
                        _ => true,
                    },
                )
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n == &format!("{pid}.lock") || n.contains(&format!("-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// When this process started (its starttime in /proc/self/stat after the boot time in
/// /proc/stat), to the second below; None if /proc does not say.
fn process_start() -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; starttime is field 22, the 20th of them.
    let ticks: u64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()?
        .max(1);
    let secs = (boot + ticks / hz).checked_sub(1)?; // btime is rounded down
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// Starts `command` with its stdout piped and waits for its first line, which must be `first`
/// (a program that says it is ready): the child and the rest of its stdout.
pub fn spawn_ready(
    command: &mut std::process::Command,
    first: &str,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, first, "{command:?} did not say it was ready");
    (child, out)
}

/// `busy_threads 2` in a mount namespace of its own with a /tmp only it sees (a tmpfs): started,
/// its first line ("running 2") read. The attach tests' process that cannot see our /tmp. Its
/// stdin is a pipe: closing it ends the program.
pub fn spawn_with_private_tmp() -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let busy = program("busy_threads");
    let mut command = std::process::Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        // Opened before the mount and run through its descriptor: the program may live under
        // /tmp (a clone's target directory), which the new tmpfs hides.
        .arg(format!(
            "exec 3<{} && mount -t tmpfs alloclens-test /tmp && exec /proc/self/fd/3 2",
            busy.display()
        ))
        .stdin(std::process::Stdio::piped());
    spawn_ready(&mut command, "running 2\n")
}

pub fn wait_until(what: &str, limit: Duration, done: impl FnMut() -> bool) {
    assert!(
        poll_until(limit, done),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Polls `done` every 10 ms until it is true (returns true) or `limit` has passed (false): for a
/// test that must clean up before it fails.
pub fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A tmpfs of a given size mounted on a fresh directory and unmounted on drop: a real full disk.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// None when this machine cannot mount one (printed as a skip, or a failure where CI runs:
    /// CI runs as root).
    pub fn mount(size: &str) -> Option<SmallDisk> {
        if !require(Need::Root, "SmallDisk::mount") {
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallDisk { dir }),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                assert!(!in_ci(), "cannot mount a tmpfs where CI runs: {why}");
                eprintln!("skipped: cannot mount a tmpfs: {why}");
                None
            }
            Err(e) => {
                assert!(!in_ci(), "cannot run mount where CI runs: {e}");
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }

    pub fn path(&self) -> &std::path::Path {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_path_is_found_and_a_made_up_one_is_not() {
        assert!(program_on_path("sh"));
        assert!(!program_on_path("alloclens-no-such-program"));
    }

    #[test]
    fn an_attach_leftover_older_than_this_process_is_an_earlier_runs() {
        // A pid no process can have, in the real directory (created if missing, as an attach does).
        let dir = std::path::PathBuf::from(format!("/tmp/alloclens-attach-{}", unsafe {
            libc::geteuid()
        }));
        std::fs::create_dir_all(&dir).unwrap();
        let pid = u32::MAX - 7;
        let lock = dir.join(format!("{pid}.lock"));
        let file = std::fs::File::create(&lock).unwrap();
        assert_eq!(
            attach_leftovers(std::path::Path::new("/"), pid),
            [format!("{pid}.lock")]
        );
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        file.set_modified(
            hour_ago.min(process_start().unwrap() - std::time::Duration::from_secs(2)),
        )
        .unwrap();
        let left = attach_leftovers(std::path::Path::new("/"), pid);
        std::fs::remove_file(&lock).unwrap();
        assert_eq!(left, Vec::<String>::new());
    }

    #[test]
    fn a_met_requirement_passes_in_and_out_of_ci() {
        assert!(require(Need::Program("sh"), "test"));
        assert!(require(Need::Allocator("glibc"), "test"));
    }

    #[test]
    fn an_unmet_requirement_fails_where_ci_runs_and_skips_elsewhere() {
        // Run in a child process with and without CI, so this test's own environment does not matter.
        let me = std::env::current_exe().unwrap();
        let probe = |ci: Option<&str>| {
            let mut cmd = Command::new(&me);
            cmd.args([
                "--exact",
                "tests::unmet_requirement_probe",
                "--ignored",
                "--nocapture",
            ]);
            cmd.env_remove("CI");
            if let Some(v) = ci {
                cmd.env("CI", v);
            }
            cmd.output().unwrap()
        };
        let in_ci = probe(Some("true"));
        assert!(
            !in_ci.status.success(),
            "an unmet requirement passed where CI runs"
        );
        let out = probe(None);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("skipped:"));
        let ci_false = probe(Some("false"));
        assert!(ci_false.status.success());
    }

    #[test]
    #[ignore = "run by an_unmet_requirement_fails_where_ci_runs_and_skips_elsewhere"]
    fn unmet_requirement_probe() {
        require!(program "alloclens-no-such-program");
        panic!("require! did not return");
    }
}
