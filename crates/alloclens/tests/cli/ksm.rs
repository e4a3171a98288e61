//! `alloclens run --ksm` drives the machine's real ksmd and gives every setting back: at the normal
//! end, on Ctrl-C, and after a SIGKILL at the next start; a second alloclens is refused; bad input
//! changes nothing. These tests change this machine's KSM settings, so they are ONE test function
//! (never in parallel with each other), and a guard writes the values found at the start back
//! whatever happens.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::{alloclens, open_in_browser, pre_text, wait_until};

const SYSFS: &str = "/sys/kernel/mm/ksm";
const STATE: &str = "/run/alloclens/ksm-state";
const KNOBS: &[&str] = &[
    "run",
    "pages_to_scan",
    "sleep_millisecs",
    "max_page_sharing",
    "merge_across_nodes",
];

fn knob(name: &str) -> String {
    std::fs::read_to_string(Path::new(SYSFS).join(name))
        .unwrap()
        .trim()
        .to_string()
}

fn snapshot() -> Vec<(String, String)> {
    KNOBS.iter().map(|k| (k.to_string(), knob(k))).collect()
}

/// Puts the values found at the start back, even when an assertion failed midway.
struct Restore(Vec<(String, String)>);

impl Drop for Restore {
    fn drop(&mut self) {
        let write = |k: &str, v: &str| std::fs::write(Path::new(SYSFS).join(k), v);
        for (k, v) in self.0.iter().rev() {
            // Refused while pages are merged (merge_across_nodes, max_page_sharing): unmerge
            // them all first; `run` is given back last.
            if write(k, v).is_err() {
                let _ = write("run", "2");
                let _ = write(k, v);
            }
        }
        let _ = std::fs::write(STATE, "");
    }
}

/// Removes a file at the end, even when an assertion failed midway.
struct RemoveFile(PathBuf);

impl Drop for RemoveFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on a pid we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// `alloclens run --ksm` on `sleep 60`, left running (with the state file `state`, else the
/// default one).
fn long_run(dir: &Path, name: &str, scan: &str, state: Option<&Path>) -> Child {
    let mut cmd = alloclens();
    if let Some(state) = state {
        cmd.env("ALLOCLENS_KSM_STATE", state);
    }
    cmd.args(["run", "--ksm", "--ksm-wait=5m", "--ksm-set"])
        .arg(format!("pages_to_scan={scan}"))
        .args(["-a", "glibc", "-r", "1", "--force", "-o"])
        .arg(dir.join(name))
        .args(["--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// alloclens run as user nobody (setpriv).
fn as_nobody(args: &[&str]) -> std::process::Output {
    as_nobody_with_state(args, Path::new(STATE))
}

/// alloclens run as user nobody (setpriv), with the KSM state file `state`.
fn as_nobody_with_state(args: &[&str], state: &Path) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(testkit::alloclens_exe())
        .args(args)
        .env("ALLOCLENS_KSM_STATE", state)
        .output()
        .unwrap()
}

/// How long the test waits for another alloclens to give ksmd back (as its runs' --ksm-wait=5m).
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(300);

/// Whether no alloclens holds ksmd's lock (a flock on sysfs `run`, opened for writing as
/// alloclens opens it; nothing is written).
fn ksmd_is_free() -> bool {
    use std::os::fd::AsRawFd;
    let Ok(run) = std::fs::OpenOptions::new()
        .write(true)
        .open(Path::new(SYSFS).join("run"))
    else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; the lock goes when `run` closes.
    unsafe { libc::flock(run.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// KSM and root (its sysfs is written): skipped without them, a failure where CI runs.
fn usable() -> bool {
    testkit::require(testkit::Need::Ksm, "KSM")
        && testkit::require(testkit::Need::Root, "KSM's sysfs")
}

#[test]
fn ksm_settings_are_given_back_however_the_run_ends() {
    if !usable() {
        return;
    }
    // Another alloclens (a benchmark, a user) may drive ksmd now: the values to give back are
    // those once it has ended. Its runs here wait for it too (--ksm-wait).
    wait_until(
        "no other alloclens drives ksmd",
        WAIT_FOR_OTHERS,
        ksmd_is_free,
    );
    let before = snapshot();
    let _restore = Restore(before.clone());
    let tmp = tempfile::tempdir().unwrap();
    // A value surely different from the machine's.
    let scan = (before[1].1.parse::<u64>().unwrap() + 1234).to_string();

    // Normal end: the command sees ksmd running with our setting; afterwards all is as before.
    let out = alloclens()
        .args(["run", "--ksm", "--ksm-wait=5m", "--ksm-set"])
        .arg(format!("pages_to_scan={scan}"))
        .args(["-a", "glibc", "-r", "1", "-o"])
        .arg(tmp.path().join("normal"))
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo during $(cat {SYSFS}/run) $(cat {SYSFS}/pages_to_scan) $(grep ksm_merge_any /proc/self/ksm_stat)"
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!("during 1 {scan} ksm_merge_any: yes")),
        "the command ran under ksmd with our setting and mergeable: {stdout}"
    );
    assert!(
        stderr.contains("PR_SET_MEMORY_MERGE"),
        "says the mechanism: {stderr}"
    );
    assert_eq!(snapshot(), before, "normal end gives every value back");
    assert_eq!(
        std::fs::read_to_string(STATE).unwrap(),
        "",
        "state file emptied"
    );

    // A knob swept with --param: each run sees its own value, and all is given back.
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-wait=5m",
            "--ksm-set",
            "sleep_millisecs={ms}",
            "--param",
            "ms=31,47",
        ])
        .args(["-a", "glibc", "-r", "1", "-o"])
        .arg(tmp.path().join("sweep"))
        .args(["--", "sh", "-c"])
        .arg(format!("echo swept {{ms}} $(cat {SYSFS}/sleep_millisecs)"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ms in ["31", "47"] {
        assert_eq!(
            stdout.matches(&format!("swept {ms} {ms}")).count(),
            2,
            "both runs (KSM off and on) at ms={ms} ran with it: {stdout}"
        );
    }
    assert_eq!(snapshot(), before, "a sweep gives every value back");

    swept_pages_to_scan_report(tmp.path(), &before);

    // Ctrl-C (SIGINT) in the middle of a run.
    let child = long_run(tmp.path(), "sigint", &scan, None);
    wait_until("ksmd driven", Duration::from_secs(20), || {
        knob("pages_to_scan") == scan
    });
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(), before, "Ctrl-C gives every value back");

    // --ksm-wait: a second session waits for the first to end, then runs (issue 35 item 4).
    let holder = long_run(tmp.path(), "holder", &scan, None);
    wait_until("ksmd driven", Duration::from_secs(20), || {
        knob("pages_to_scan") == scan
    });
    let waiter_stderr = tmp.path().join("waiter.stderr");
    let waiter = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-wait=2m",
            "-a",
            "glibc",
            "-r",
            "1",
            "-o",
        ])
        .arg(tmp.path().join("waiter"))
        .args(["--", "true"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&waiter_stderr).unwrap())
        .spawn()
        .unwrap();
    wait_until("the second session waits", Duration::from_secs(20), || {
        std::fs::read_to_string(&waiter_stderr).is_ok_and(|e| {
            e.contains(&format!(
                "another alloclens (pid {}) is driving ksmd: waiting",
                holder.id()
            ))
        })
    });
    signal(&holder, libc::SIGINT);
    let _ = holder.wait_with_output().unwrap();
    let waited = waiter.wait_with_output().unwrap();
    let stderr = std::fs::read_to_string(&waiter_stderr).unwrap();
    assert!(waited.status.success(), "{stderr}");
    assert_eq!(
        snapshot(),
        before,
        "the waiting session gives every value back"
    );

    // A second alloclens is refused while one drives ksmd, and changes nothing. The first keeps
    // its state in a file of its own, beside the default one (root's, readable by all): once it
    // is killed below, any alloclens started as root gives a state file's values back, and the
    // other tests of this binary start alloclens all the time with the default one.
    let killed_state = PathBuf::from(format!("{STATE}-test-{}", std::process::id()));
    let _remove_killed_state = RemoveFile(killed_state.clone());
    let first = long_run(tmp.path(), "first", &scan, Some(&killed_state));
    wait_until("ksmd driven", Duration::from_secs(20), || {
        knob("pages_to_scan") == scan
    });
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-set",
            "pages_to_scan=7",
            "-a",
            "glibc",
            "-r",
            "1",
            "-o",
        ])
        .arg(tmp.path().join("second"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("another alloclens (pid"), "{stderr}");
    assert_eq!(
        knob("pages_to_scan"),
        scan,
        "the second run changed nothing"
    );
    assert!(
        !tmp.path().join("second").exists(),
        "no results directory either"
    );
    // Another state file does not make another ksmd: still refused, naming the holder.
    let out = alloclens()
        .env("ALLOCLENS_KSM_STATE", tmp.path().join("other-state"))
        .args(["run", "--ksm", "--ksm-set", "pages_to_scan=7"])
        .args(["-a", "glibc", "-r", "1", "-o"])
        .arg(tmp.path().join("third"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains(&format!("another alloclens (pid {})", first.id())),
        "{stderr}"
    );
    assert_eq!(knob("pages_to_scan"), scan, "the third run changed nothing");
    assert!(!tmp.path().join("third").exists());

    // SIGKILL: nothing can restore at once; the state file keeps the values and the next start
    // (any command) gives them back.
    signal(&first, libc::SIGKILL);
    let _ = first.wait_with_output().unwrap();
    assert_eq!(knob("run"), "1", "still driven after SIGKILL");
    assert_eq!(knob("pages_to_scan"), scan);
    assert!(!std::fs::read_to_string(&killed_state).unwrap().is_empty());
    // A user who cannot write it is told, and changes nothing.
    let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if setpriv {
        let out = as_nobody_with_state(&["allocators"], &killed_state);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("run any alloclens command as root"),
            "{stderr}"
        );
        assert_eq!(knob("pages_to_scan"), scan);
    } else {
        eprintln!("skipped the checks as another user: no setpriv");
    }
    let out = alloclens()
        .env("ALLOCLENS_KSM_STATE", &killed_state)
        .args(["allocators"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success());
    assert!(
        stderr.contains("gave back KSM setting pages_to_scan"),
        "says what it restored: {stderr}"
    );
    assert_eq!(snapshot(), before, "the next start gives every value back");

    // Not root: one line naming the fix, nothing changed. First the state file (root's), then,
    // with a state file of its own, KSM's sysfs.
    if setpriv {
        let out = as_nobody(&[
            "run",
            "--ksm",
            "-a",
            "glibc",
            "-o",
            "/tmp/alloclens-ksm-nobody",
            "--",
            "true",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("cannot open the KSM state file"),
            "{stderr}"
        );
        let own_state = "/tmp/alloclens-ksm-nobody.state";
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(testkit::alloclens_exe())
            .args([
                "run",
                "--ksm",
                "-a",
                "glibc",
                "-o",
                "/tmp/alloclens-ksm-nobody",
                "--",
                "true",
            ])
            .env("ALLOCLENS_KSM_STATE", own_state)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(own_state);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("KSM's sysfs must be writable"), "{stderr}");
        assert!(!Path::new("/tmp/alloclens-ksm-nobody").exists());
        assert_eq!(snapshot(), before, "not root changes nothing");
    }

    // Bad input: an unknown knob is one line, and nothing changes.
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-set",
            "no_such_knob=1",
            "-a",
            "glibc",
            "-o",
        ])
        .arg(tmp.path().join("bad"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unknown KSM setting `no_such_knob`"),
        "{stderr}"
    );
    // A value the kernel rejects: also one line, nothing changed.
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-set",
            "sleep_millisecs=abc",
            "-a",
            "glibc",
            "-o",
        ])
        .arg(tmp.path().join("bad2"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("cannot set /sys/kernel/mm/ksm/sleep_millisecs to abc")
            && stderr.contains("the kernel rejects this value"),
        "{stderr}"
    );
    // A swept value the kernel rejects is refused before any run.
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-set",
            "pages_to_scan={p}",
            "--param",
            "p=5,abc",
        ])
        .args(["-a", "glibc", "-o"])
        .arg(tmp.path().join("bad3"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pages_to_scan to abc"), "{stderr}");
    assert!(!tmp.path().join("bad3").exists());
    assert_eq!(snapshot(), before, "rejected input changes nothing");
    assert!(!tmp.path().join("bad").exists() && !tmp.path().join("bad2").exists());

    refused_before_touching_ksmd(tmp.path(), &before);
    madvise_library_not_loaded(tmp.path(), &before);

    unmerge_all(&before);
    unmerge_to_give_back(tmp.path(), &before);
    madvise_library_is_harmless(tmp.path(), &before);
    unmerge_all(&before);
    merging(tmp.path(), &before, "prctl");
    unmerge_all(&before);
    merging(tmp.path(), &before, "madvise");
    compare_and_figures(tmp.path());
}

/// `alloclens ARGS` with ALLOCLENS_KSM_STATE=`state`, stopped (and failed) after 20 s: an endless
/// state file must not make it read forever. Returns (exit code, stderr).
fn with_state(state: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = alloclens()
        .env("ALLOCLENS_KSM_STATE", state)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after 20 s with state file {}: {}",
                state.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Input refused with one line and ksmd never touched: an endless or damaged state file, an
/// output that is a file, a --ksm-set placeholder that is no --param.
fn refused_before_touching_ksmd(dir: &Path, before: &[(String, String)]) {
    let out = dir.join("refused");
    let out = out.to_str().unwrap();
    let run = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["run", "--ksm", "-a", "glibc", "-r", "1"]
            .map(String::from)
            .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let fifo = dir.join("fifo-state");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for (state, what) in [(Path::new("/dev/full"), "a device"), (&fifo, "a FIFO")] {
        let args = run(&["-o", out, "--", "true"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = with_state(state, &args);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("is not a regular file ({what})")),
            "{stderr}"
        );
    }

    // A damaged state file (not text) is named, with what to do: not "run as root" to root.
    let damaged = dir.join("damaged-state");
    std::fs::write(&damaged, b"pid=1\nrun=\xff\xfe\n").unwrap();
    let (code, stderr) = with_state(&damaged, &["allocators"]);
    assert_eq!(code, Some(0), "{stderr}");
    for (code, stderr) in [
        (code, stderr),
        with_state(
            &damaged,
            &["run", "--ksm", "-a", "glibc", "-o", out, "--", "true"],
        ),
    ] {
        assert!(
            stderr.contains(&format!(
                "the KSM state file {} is damaged (not text)",
                damaged.display()
            )) && stderr.contains("then empty the file")
                && !stderr.contains("as root"),
            "{code:?} {stderr}"
        );
    }
    assert_eq!(snapshot(), before, "a damaged state file is not restored");

    // An output that is a file: refused before the state file is even created.
    let file = dir.join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let fresh = dir.join("fresh-state");
    let args = run(&["-o", file.to_str().unwrap(), "--", "true"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stderr) = with_state(&fresh, &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is a file, not a directory"), "{stderr}");
    assert!(!fresh.exists(), "ksmd untouched: no state file written");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");

    // A --ksm-set placeholder that is no --param: named, with the ones there are.
    let args = run(&[
        "--ksm-set",
        "pages_to_scan={nope}",
        "--param",
        "pts=1,2",
        "-o",
        out,
        "--",
        "true",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stderr) = with_state(&fresh, &args);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("{nope} is not a --param (the --param placeholders are {pts})"),
        "{stderr}"
    );
    assert!(!fresh.exists(), "ksmd untouched");
    assert!(!Path::new(out).exists());
    assert_eq!(snapshot(), before);
}

/// A KSM-on run whose program drops LD_PRELOAD (exec'd by `env -u`): the madvise library is not
/// in it, so its tree is not called mergeable, and the run is said and left out of the saving.
fn madvise_library_not_loaded(dir: &Path, before: &[(String, String)]) {
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-wait=5m",
            "--ksm-mechanism",
            "madvise",
        ])
        .args(["-a", "glibc", "-r", "1", "-o"])
        .arg(dir.join("unloaded"))
        .args(["--", "env", "-u", "LD_PRELOAD", "sleep", "0.6"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(snapshot(), before);
    assert!(
        stderr.contains("the KSM library was NOT mapped in the command"),
        "{stderr}"
    );
    let results = results_of(&dir.join("unloaded"));
    let on = on_run(&results);
    assert_eq!(on["ksm"]["library"], "not_loaded", "{}", on["ksm"]);
    assert_eq!(on["ksm"]["merging_enabled"], false);
    assert_eq!(results["ksm_savings"][0]["runs_on"], 0);
}

/// ksmd drops the merged pages of exited processes only when it scans: with `run=0` the counters
/// stay up after a session, and the kernel refuses `max_page_sharing` and `merge_across_nodes`
/// changes (EBUSY) meanwhile. Unmerging everything (`run=2`) clears them for the next check.
fn unmerge_all(before: &[(String, String)]) {
    std::fs::write(Path::new(SYSFS).join("run"), "2").unwrap();
    std::fs::write(Path::new(SYSFS).join("run"), &before[0].1).unwrap();
    assert_eq!(knob("pages_shared"), "0");
}

const WORKERS: u64 = 4;
const POSTFORK_MB: u64 = 32;
const MIB: f64 = 1048576.0;

/// `run --ksm` of forkworkers whose 4 workers each build the same 32 MiB after the fork and hold
/// it 6 s: one run with KSM off, one with KSM on, the tree made mergeable by `mechanism`. Returns
/// results.json and stdout.
fn forkworkers_run(dir: &Path, mechanism: &str) -> (serde_json::Value, String) {
    let out = alloclens()
        .arg("run")
        .args(["--ksm-mechanism", mechanism])
        // Aggressive, so it merges in about a second: the test is about correctness, not cost.
        .args([
            "--ksm",
            "--ksm-wait=5m",
            "--ksm-set",
            "pages_to_scan=20000",
            "--ksm-set",
            "sleep_millisecs=10",
            // Knobs the kernel changes only while nothing is merged (EBUSY otherwise): given
            // back too (the tree is gone by then, so the unmerge fallback is not needed here).
            "--ksm-set",
            "max_page_sharing=128",
            "--ksm-set",
            "merge_across_nodes=0",
        ])
        .args([
            "-a",
            "glibc",
            "-r",
            "1",
            "--exact-pss",
            "--interval",
            "250ms",
        ])
        .args(["--program-output", "discard", "-o"])
        .arg(dir)
        .arg("--export-markdown")
        .arg(dir.with_extension("md"))
        .arg("--export-json")
        .arg(dir.with_extension("json"))
        .arg("--export-csv")
        .arg(dir.with_extension("csv"))
        .args([
            "--",
            &testkit::alloclens_exe(),
            "workload",
            "forkworkers",
            "--shared-mb",
            "8",
            "--events",
            "5",
        ])
        .arg(format!("--workers={WORKERS}"))
        .arg(format!("--postfork-mb={POSTFORK_MB}"))
        .args(["--volatile-mb", "2", "--linger-ms", "6000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    (results, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Tree PSS of run `run` at its last sample where the parent and all workers were alive (bytes).
fn steady_pss(samples: &Path, run: &str) -> f64 {
    let mut reader = csv::Reader::from_path(samples).unwrap();
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (run_col, scope, pss) = (col("run"), col("scope"), col("pss"));
    let mut processes = 0;
    let mut steady = None;
    for row in reader.records() {
        let row = row.unwrap();
        if &row[run_col] != run {
            continue;
        }
        if &row[scope] == "process" {
            processes += 1;
        } else {
            if processes == WORKERS + 1 {
                steady = Some(row[pss].parse::<f64>().unwrap());
            }
            processes = 0;
        }
    }
    steady.expect("a sample with every worker alive")
}

/// Done-when of issue 17: the kernel merges what the workers built identically after the fork,
/// the tree's PSS drops by a comparable amount, and both are in the table and results.json; with
/// the prctl and with the preloaded library of kernels before 6.4 (`mechanism`).
fn merging(dir: &Path, before: &[(String, String)], mechanism: &str) {
    let dir = &dir.join(mechanism);
    let (results, stdout) = forkworkers_run(&dir.join("forkworkers"), mechanism);
    assert_eq!(
        snapshot(),
        before,
        "the merge run gave every value back too"
    );
    let runs = results["runs"].as_array().unwrap();
    let run_of = |state: &str| {
        runs.iter()
            .find(|r| r["params"]["ksm"] == state)
            .unwrap_or_else(|| panic!("a run with ksm={state}: {results}"))
    };
    let (off, on) = (run_of("off"), run_of("on"));
    let name = match mechanism {
        "prctl" => "prctl(PR_SET_MEMORY_MERGE)",
        _ => "madvise(MADV_MERGEABLE)",
    };
    assert_eq!(results["ksm"]["mechanism"], name);
    assert!(
        stdout.contains(&format!("(tree made mergeable by {name})")),
        "the table says how: {stdout}"
    );
    let previous = results["ksm"]["previous"].as_array().unwrap();
    assert!(
        previous.contains(&serde_json::json!(["run", before[0].1])),
        "{previous:?}"
    );
    assert_eq!(off["ksm"]["merging_enabled"], false);
    assert_eq!(on["ksm"]["merging_enabled"], true);
    let samples = dir.join("forkworkers/samples.csv");
    let off_pss = steady_pss(&samples, &off["index"].to_string());
    let on_pss = steady_pss(&samples, &on["index"].to_string());
    let ksm = &on["ksm"];
    let duplicated = ((WORKERS - 1) * POSTFORK_MB) as f64 * MIB;
    let sharing = ksm["sharing"]["peak"].as_f64().unwrap();
    let merging = ksm["merging"]["peak"].as_f64().unwrap();
    let saved = off_pss - on_pss;
    eprintln!(
        "{mechanism}: duplicated {:.1} MiB: pages_sharing {:.1} MiB, tree merged {:.1} MiB, steady PSS {:.1} -> {:.1} MiB (saved {:.1} MiB), settled in {}, ksmd {} % CPU\n{stdout}",
        duplicated / MIB,
        sharing / MIB,
        merging / MIB,
        off_pss / MIB,
        on_pss / MIB,
        saved / MIB,
        ksm["settle_s"],
        ksm["ksmd_cpu_pct"]
    );
    assert!(sharing >= 0.7 * duplicated, "kernel's pages_sharing: {ksm}");
    assert!(
        merging >= 0.7 * (WORKERS * POSTFORK_MB) as f64 * MIB,
        "every worker's copy is merged: {ksm}"
    );
    assert!(
        off["ksm"]["merging"]["peak"].as_f64().unwrap() < 0.1 * duplicated,
        "KSM off merges nothing of the tree: {}",
        off["ksm"]
    );
    assert!(
        saved >= 0.6 * duplicated && saved <= 1.5 * duplicated + 16.0 * MIB,
        "PSS {off_pss} without KSM, {on_pss} with: saved {saved} of {duplicated} duplicated"
    );
    assert!(ksm["full_scans"].as_u64().unwrap() >= 1, "{ksm}");
    // The table and results.json carry the saving.
    let saving = &results["ksm_savings"][0];
    assert_eq!(saving["runs_off"], 1);
    assert_eq!(saving["runs_on"], 1);
    assert!(
        saving["saved_mean"].as_f64().unwrap() > 0.3 * duplicated,
        "{saving}"
    );
    let pct = saving["saved_mean_pct"].as_f64().unwrap();
    assert!(stdout.contains("KSM: PSS saved"), "{stdout}");
    assert!(stdout.contains(&format!("({pct:.0} %)")), "{stdout}");
    // So do the exports: Markdown's KSM table, JSON's ksm_savings, CSV's ksm_* columns.
    let export =
        |ext: &str| std::fs::read_to_string(dir.join("forkworkers").with_extension(ext)).unwrap();
    let md = export("md");
    let ksm_table = &md[md.find("### KSM: PSS saved").expect("a KSM table")..];
    assert!(
        ksm_table.contains("| `glibc` | all | ") && ksm_table.contains(&format!("({pct:.0} %)")),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&export("json")).unwrap();
    assert_eq!(json["ksm_savings"], results["ksm_savings"]);
    assert_eq!(json["summary"], results["summary"]);
    let csv_text = export("csv");
    let mut csv = csv::Reader::from_reader(csv_text.as_bytes());
    let header = csv.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    let on_row = rows.iter().find(|r| &r[col("ksm")] == "on").unwrap();
    let csv_pct = on_row[col("ksm_saved_mean_pct")].parse::<f64>().unwrap();
    assert!((csv_pct - pct).abs() < 1e-9, "{header:?} {on_row:?}");
    let off_row = rows.iter().find(|r| &r[col("ksm")] == "off").unwrap();
    assert_eq!(&off_row[col("ksm_saved_mean")], "");

    // The report's KSM section: the saving in its table, and the KSM-on run's counters over time
    // drawn from samples.csv on the PSS charts' time axis (the same samples).
    let html = report(&dir.join("forkworkers"));
    let section = &html[html.find("<section id=\"ksm\">").expect("a KSM section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains(&format!("({pct:.0} %)")), "{section}");
    let charts = chart_data(&html);
    let over_time = chart(&charts, &format!("ksm-over-time-{}", on["index"]));
    assert!(
        charts
            .iter()
            .all(|c| c["id"] != format!("ksm-over-time-{}", off["index"])),
        "no KSM chart for the run with KSM off"
    );
    assert_eq!(over_time["x_axis"]["unit"], "seconds");
    let pss_x: Vec<f64> = charts
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("pss-over-time"))
        .flat_map(|c| {
            c["x"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
        })
        .collect();
    let x = numbers(&over_time["x"]);
    assert!(x.len() > 4, "{over_time}");
    assert!(x.iter().all(|t| pss_x.contains(t)), "same time axis as PSS");
    let peak = |label: &str| {
        let s = series(over_time, label);
        numbers(&s["values"]).into_iter().fold(0.0, f64::max)
    };
    assert_eq!(peak("tree merged (ksm_merging)"), merging, "{over_time}");
    assert_eq!(peak("pages_sharing"), sharing, "{over_time}");
    assert_eq!(
        peak("pages_volatile"),
        ksm["volatile"]["peak"].as_f64().unwrap()
    );
}

/// `alloclens report DIR`: the page's text.
fn report(dir: &Path) -> String {
    let html = dir.join("report.html");
    let out = alloclens()
        .arg("report")
        .arg(dir)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(html).unwrap()
}

/// The charts embedded in a page.
fn chart_data(html: &str) -> Vec<serde_json::Value> {
    let key = "id=\"report-data\">";
    let start = html.find(key).expect("chart data") + key.len();
    let len = html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..start + len]).unwrap();
    data["charts"].as_array().unwrap().clone()
}

fn chart<'a>(charts: &'a [serde_json::Value], id: &str) -> &'a serde_json::Value {
    let ids: Vec<&serde_json::Value> = charts.iter().map(|c| &c["id"]).collect();
    charts
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no chart {id} in {ids:?}"))
}

fn series<'a>(chart: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    chart["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == label)
        .unwrap_or_else(|| panic!("no line {label} in {chart}"))
}

/// The numbers of a JSON array, nulls (no point there) left out.
fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_f64())
        .collect()
}

/// pages_to_scan swept with --param: the report draws ksmd's CPU against the values each run had,
/// and the saving against the parameter, from results.json's figures.
fn swept_pages_to_scan_report(dir: &Path, before: &[(String, String)]) {
    let out = alloclens()
        .args([
            "run",
            "--ksm",
            "--ksm-wait=5m",
            "--ksm-set",
            "pages_to_scan={p}",
            "--param",
            "p=100,4000",
        ])
        .args(["-a", "glibc", "-r", "1", "--interval", "100ms", "-o"])
        .arg(dir.join("pts"))
        .args(["--", "sleep", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        snapshot(),
        before,
        "the pages_to_scan sweep gave every value back"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("pts/results.json")).unwrap()).unwrap();
    let charts = chart_data(&report(&dir.join("pts")));
    let cpu = chart(&charts, "ksmd-cpu-vs-pages_to_scan");
    assert_eq!(numbers(&cpu["x"]), [100.0, 4000.0], "{cpu}");
    let expected: Vec<f64> = ["100", "4000"]
        .iter()
        .map(|p| {
            results["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["params"]["p"] == *p && r["params"]["ksm"] == "on")
                .unwrap()["ksm"]["ksmd_cpu_pct"]
                .as_f64()
                .expect("ksmd's CPU measured")
        })
        .collect();
    assert_eq!(numbers(&series(cpu, "glibc")["values"]), expected, "{cpu}");
    let savings = results["ksm_savings"].as_array().unwrap();
    let of = |field: &str| -> Vec<f64> {
        ["100", "4000"]
            .iter()
            .map(|p| {
                savings.iter().find(|s| s["params"]["p"] == *p).unwrap()[field]
                    .as_f64()
                    .unwrap()
            })
            .collect()
    };
    let mean = chart(&charts, "ksm-mean-pss-vs-p");
    assert_eq!(numbers(&mean["x"]), [100.0, 4000.0]);
    assert_eq!(
        numbers(&series(mean, "glibc KSM off")["values"]),
        of("mean_pss_off")
    );
    assert_eq!(
        numbers(&series(mean, "glibc KSM on")["values"]),
        of("mean_pss_on")
    );
    let saved = chart(&charts, "ksm-saved-vs-p");
    assert_eq!(numbers(&series(saved, "glibc")["values"]), of("saved_mean"));
}

/// A process outside alloclens whose pages stay merged: killed when dropped.
struct Merged(Child);

impl Drop for Merged {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sum of `ksm_merging_pages` over a process and its children (forkworkers' workers).
fn merging_pages(pid: u32) -> u64 {
    let mut pids = vec![pid];
    let children = format!("/proc/{pid}/task/{pid}/children");
    pids.extend(
        std::fs::read_to_string(children)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok()),
    );
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/ksm_merging_pages")).ok())
        .filter_map(|t| t.trim().parse::<u64>().ok())
        .sum()
}

/// The kernel refuses to change `merge_across_nodes` back (EBUSY) while any page of the machine is
/// merged: here a process outside alloclens, made mergeable by the test itself, whose pages ksmd
/// merges during the session and which outlives it. alloclens must unmerge everything (run=2),
/// give every value back, and say so.
fn unmerge_to_give_back(dir: &Path, before: &[(String, String)]) {
    let mut helper = Command::new(testkit::alloclens_exe());
    helper
        .args([
            "workload",
            "forkworkers",
            "--workers",
            "2",
            "--shared-mb",
            "1",
        ])
        .args([
            "--events",
            "1",
            "--postfork-mb",
            "16",
            "--linger-ms",
            "60000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: prctl touches no memory of the parent.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut helper, || {
            if libc::prctl(libc::PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let helper = Merged(helper.spawn().unwrap());
    // The session merges the helper's pages (ksmd runs in both runs) and ends while they are merged.
    let out = alloclens()
        .args(["run", "--ksm", "--ksm-wait=5m", "--ksm-set", "pages_to_scan=20000"])
        .args(["--ksm-set", "sleep_millisecs=10", "--ksm-set", "merge_across_nodes=0"])
        .args(["-a", "glibc", "-r", "1", "-o"])
        .arg(dir.join("ebusy"))
        .args(["--", "sh", "-c"])
        .arg(format!(
            "for i in $(seq 300); do [ $(cat {SYSFS}/pages_shared) -gt 0 ] && exit 0; sleep 0.1; done; exit 1"
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "ksmd merged the helper's pages: {stderr}"
    );
    assert_eq!(
        snapshot(),
        before,
        "merge_across_nodes given back although pages were merged: {stderr}"
    );
    assert!(
        stderr.contains("only be given back after unmerging every merged page"),
        "says it unmerged the machine's pages: {stderr}"
    );
    assert_eq!(knob("pages_shared"), "0", "run=2 unmerged everything");
    assert_eq!(merging_pages(helper.0.id()), 0, "the helper's pages too");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("ebusy/results.json")).unwrap()).unwrap();
    assert!(
        results["warnings"].to_string().contains("unmerging"),
        "{}",
        results["warnings"]
    );
    let mut helper = helper;
    assert!(
        helper.0.try_wait().unwrap().is_none(),
        "the helper outside alloclens lives on, unmerged"
    );
}

/// A shell function `check TRIES FILE`: counts, in shell builtins (so in the process itself), its
/// mappings flagged mergeable (`mg` in smaps' VmFlags), every 0.2 s until there are some or TRIES
/// tries are done (slack for a loaded machine), then writes "MERGEABLE THREADS" into FILE. No single
/// quotes: it goes inside the exec'd `sh -c '...'` too.
const CHECK: &str = "check() { i=0; while :; do n=0; while read -r k rest; do case \"$k $rest\" in \"VmFlags:\"*\" mg\"*) n=$((n+1));; esac; done < /proc/self/smaps; if [ $n -gt 0 ] || [ $i -ge $1 ]; then break; fi; i=$((i+1)); sleep 0.2; done; t=0; while read -r k v; do [ \"$k\" = Threads: ] && t=$v; done < /proc/self/status; echo \"$n $t\" > \"$2\"; }";

/// `--ksm-mechanism madvise` on a program that takes a signal, runs threads, forks a child that
/// does not exec, and execs: its output and exit status are those of the KSM-off run (no library),
/// and the forked child and the exec'd program have their memory marked by a scanning thread of
/// their own.
fn madvise_library_is_harmless(dir: &Path, before: &[(String, String)]) {
    let evidence = dir.join("evidence");
    std::fs::create_dir_all(&evidence).unwrap();
    let ev = evidence.display();
    let exe = testkit::alloclens_exe();
    // Up to 10 s for the library's marks with KSM on; 1 s without (where none may appear).
    let script = format!(
        "{CHECK}\n\
         [ {{ksm}} = on ] && tries=50 || tries=5\n\
         trap 'echo got USR1' USR1; kill -USR1 $$\n\
         {exe} workload xthread --threads 3 --objects 100000 | grep -o 'checksum=[0-9a-f]*'\n\
         ( check $tries {ev}/fork-{{ksm}}; echo forked child; exit 5 ); echo \"child exit $?\"\n\
         exec sh -c '{CHECK}; check '$tries' {ev}/exec-{{ksm}}; echo exec done; exit 3'"
    );
    let out = alloclens()
        // ld.so splits LD_PRELOAD at spaces: the library must not be put in this cache.
        .env("XDG_CACHE_HOME", dir.join("cache with space"))
        .args([
            "run",
            "--ksm",
            "--ksm-wait=5m",
            "--ksm-mechanism",
            "madvise",
        ])
        .args(["--env", "ALLOCLENS_KSM_SCAN_MS=20"])
        .args(["-a", "glibc", "-r", "1", "--program-output", "save", "-o"])
        .arg(dir.join("harmless"))
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the command exits 3: {stderr}");
    assert!(stderr.contains("madvise(MADV_MERGEABLE)"), "{stderr}");
    assert_eq!(snapshot(), before);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("harmless/results.json")).unwrap()).unwrap();
    assert_eq!(results["ksm"]["mechanism"], "madvise(MADV_MERGEABLE)");
    assert_eq!(on_run(&results)["ksm"]["library"], "loaded");
    let mut logs = Vec::new();
    for run in results["runs"].as_array().unwrap() {
        assert_eq!(run["ending"]["status"]["code"], 3, "{run}");
        assert_eq!(run["ending"]["status"]["signal"], serde_json::Value::Null);
        let log = dir.join(format!("harmless/output/run-{}.log", run["index"]));
        logs.push((
            run["params"]["ksm"].as_str().unwrap().to_string(),
            std::fs::read_to_string(log).unwrap(),
        ));
    }
    let expected = "got USR1\nchecksum=";
    for (state, log) in &logs {
        assert!(log.starts_with(expected), "ksm={state}: {log}");
        assert!(
            log.ends_with("forked child\nchild exit 5\nexec done\n"),
            "ksm={state}: {log}"
        );
    }
    assert_eq!(
        logs[0].1, logs[1].1,
        "the same output with and without the library"
    );
    let figures = |name: &str| -> Vec<u64> {
        std::fs::read_to_string(evidence.join(name))
            .unwrap()
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect()
    };
    assert_eq!(figures("fork-off"), [0, 1], "no library, nothing marked");
    assert_eq!(figures("exec-off"), [0, 1]);
    let fork = figures("fork-on");
    assert!(
        fork[0] > 0 && fork[1] == 2,
        "the forked child has a scanning thread of its own and marked memory: {fork:?}"
    );
    let exec = figures("exec-on");
    assert!(
        exec[0] > 0 && exec[1] == 2,
        "the exec'd program too: {exec:?}"
    );
}

fn results_of(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// The run with KSM on.
fn on_run(results: &serde_json::Value) -> &serde_json::Value {
    results["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["params"]["ksm"] == "on")
        .unwrap()
}

/// `report A --compare B` of the two forkworkers sessions (prctl, madvise), with PNG and SVG
/// figures: both sides' savings and mechanisms on the page, B's KSM-on run drawn from B's samples,
/// every chart written in both formats, and the KSM table within a 1400 px page (headless
/// Chromium measures it; the screenshot is kept in target/test-artifacts/ksm-compare.png).
fn compare_and_figures(dir: &Path) {
    let (a, b) = (
        dir.join("prctl/forkworkers"),
        dir.join("madvise/forkworkers"),
    );
    let (ra, rb) = (results_of(&a), results_of(&b));
    let html_path = dir.join("compare.html");
    let (png, svg) = (dir.join("png"), dir.join("svg"));
    let out = alloclens()
        .arg("report")
        .arg(&a)
        .arg("--compare")
        .arg(&b)
        .arg("-o")
        .arg(&html_path)
        .arg("--png")
        .arg(&png)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    let section = &html[html.find("<section id=\"ksm\">").expect("a KSM section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(
        section.contains("A: prctl(PR_SET_MEMORY_MERGE), B: madvise(MADV_MERGEABLE)"),
        "each side's mechanism: {section}"
    );
    for (side, results) in [("A", &ra), ("B", &rb)] {
        let pct = results["ksm_savings"][0]["saved_mean_pct"]
            .as_f64()
            .unwrap();
        let row = section
            .split("<tr>")
            .find(|r| r.contains(&format!(">{side}: glibc</td>")))
            .unwrap_or_else(|| panic!("a row for {side}: {section}"));
        assert!(row.contains(&format!("({pct:.0} %)")), "{side}: {row}");
    }
    // B's runs are numbered after A's: its KSM-on run's chart has B's own figures.
    let charts = chart_data(&html);
    let offset = ra["runs"].as_array().unwrap().len() as u64;
    let b_on = on_run(&rb);
    let b_chart = chart(
        &charts,
        &format!("ksm-over-time-{}", b_on["index"].as_u64().unwrap() + offset),
    );
    let merged = numbers(&series(b_chart, "tree merged (ksm_merging)")["values"]);
    assert_eq!(
        merged.into_iter().fold(0.0, f64::max),
        b_on["ksm"]["merging"]["peak"].as_f64().unwrap(),
        "{b_chart}"
    );
    let a_on = on_run(&ra);
    chart(&charts, &format!("ksm-over-time-{}", a_on["index"]));

    // Every chart of the page as a 1200x700 PNG and an SVG with its title.
    for c in &charts {
        let id = c["id"].as_str().unwrap();
        let bytes = std::fs::read(png.join(format!("{id}.png"))).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{id}");
        let dim = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!((dim(16), dim(20)), (1200, 700), "{id}");
        let text = std::fs::read_to_string(svg.join(format!("{id}.svg"))).unwrap();
        let title = c["title"].as_str().unwrap();
        assert!(text.contains("<svg"), "{id}");
        let escaped = title
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(
            text.contains(&escaped),
            "the SVG of {id} has its title {title:?}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&png).unwrap().count(),
        charts.len(),
        "one PNG per chart"
    );
    assert!(charts
        .iter()
        .any(|c| c["id"].as_str().unwrap().starts_with("ksm-")));

    table_fits_1400px(&html_path);
}

/// Opens the page in a 1400 px wide headless Chromium with a probe that measures the KSM table:
/// it must not need its own horizontal scroll bar nor leave the window.
fn table_fits_1400px(page: &Path) {
    let html = std::fs::read_to_string(page).unwrap();
    // The probe writes its measure into the DOM; the other sections are hidden so the screenshot
    // shows the KSM section.
    let probe = "<style>main > section:not(#ksm) { display: none; }</style>\
        <script>window.addEventListener('load', () => { \
        const t = document.querySelector('#ksm table'); const p = document.createElement('pre'); \
        p.id = 'ksm-width'; p.textContent = JSON.stringify({scroll: t.scrollWidth, \
        client: t.clientWidth, right: t.getBoundingClientRect().right, \
        cells: Math.max(...[...t.querySelectorAll('th, td')].map(c => c.getBoundingClientRect().right)) \
        - t.getBoundingClientRect().left, \
        viewport: document.documentElement.clientWidth}); document.body.appendChild(p); });\
        </script></body>";
    let probed = page.with_file_name("compare-probe.html");
    std::fs::write(&probed, html.replace("</body>", probe)).unwrap();
    let url = format!("file://{}", probed.display());
    // The screenshot shows the KSM section (target/test-artifacts/ksm-compare.png).
    let Some(dom) = open_in_browser(&url, (1400, 1000), "ksm-compare") else {
        return;
    };
    let width: serde_json::Value =
        serde_json::from_str(&pre_text(&dom, "ksm-width").expect("the probe ran")).unwrap();
    eprintln!("KSM table at 1400 px: {width}");
    let n = |k: &str| width[k].as_f64().unwrap();
    assert!(n("client") > 0.0, "{width}");
    assert!(n("scroll") <= n("client"), "the table scrolls: {width}");
    assert!(n("cells") <= n("client"), "its cells overflow: {width}");
    assert!(
        n("right") <= n("viewport"),
        "the table leaves the window: {width}"
    );
}
