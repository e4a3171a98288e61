//! `alloclens record` end to end: the real binary on real programs.
use std::path::Path;
use std::process::Command;

use trace::{EndReason, Op, Record, TraceReader};

use testkit::{alloclens, wait_until, SmallDisk};

fn traced() -> &'static Path {
    testkit::program("traced")
}

fn count(path: &Path, op: Op, size: u64) -> usize {
    let mut r = TraceReader::open(path).unwrap();
    let mut n = 0;
    for s in 0..r.streams().len() {
        for rec in r.records(s).unwrap() {
            if let Record::Event(e) = rec.unwrap() {
                n += usize::from(e.op == op && e.size == size);
            }
        }
    }
    n
}

#[test]
fn output_and_exit_status_are_the_programs() {
    let dir = tempfile::tempdir().unwrap();
    let plain = Command::new(traced())
        .args(["ops", "300"])
        .output()
        .unwrap();
    let out = dir.path().join("ops.alt");
    let traced_run = alloclens()
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["ops", "300"])
        .output()
        .unwrap();
    assert_eq!(traced_run.stdout, plain.stdout);
    assert_eq!(
        traced_run.stderr, plain.stderr,
        "-q: nothing of ours on stderr"
    );
    assert_eq!(traced_run.status.code(), Some(0));
    assert_eq!(count(&out, Op::Pvalloc, 1107), 300);

    let code = alloclens()
        .args(["record", "-q", "-o"])
        .arg(dir.path().join("e.alt"))
        .arg("--")
        .arg(traced())
        .args(["exitcode", "10"])
        .status()
        .unwrap();
    assert_eq!(code.code(), Some(42));
}

/// ld.so splits LD_PRELOAD at spaces and colons: a cache directory with one (HOME, XDG_CACHE_HOME)
/// must not hold the shim, or nothing is recorded, nor the watch agent, or nothing is measured.
#[test]
fn a_cache_path_with_a_space_or_a_colon_still_records_and_watches() {
    let dir = tempfile::tempdir().unwrap();
    for odd in ["my cache", "my:cache"] {
        let cache = dir.path().join(odd);
        let out = dir.path().join(format!(
            "{}.alt",
            odd.len() + usize::from(odd.contains(':'))
        ));
        let traced_run = alloclens()
            .env("XDG_CACHE_HOME", &cache)
            .env("HOME", &cache)
            .args(["record", "-q", "-o"])
            .arg(&out)
            .arg("--")
            .arg(traced())
            .args(["ops", "30"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&traced_run.stderr);
        assert!(traced_run.status.success(), "{odd}: {stderr}");
        assert!(!stderr.contains("cannot be preloaded"), "{odd}: {stderr}");
        assert_eq!(count(&out, Op::Pvalloc, 1107), 30, "{odd}: {stderr}");

        let watched = dir.path().join(format!(
            "watch{}",
            odd.len() + usize::from(odd.contains(':'))
        ));
        let watch = alloclens()
            .env("XDG_CACHE_HOME", &cache)
            .env("HOME", &cache)
            .args(["watch", "--interval", "100ms", "-o"])
            .arg(&watched)
            .args(["--", "sh", "-c", "sleep 0.3"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&watch.stderr);
        assert!(watch.status.success(), "{odd}: {stderr}");
        assert!(!stderr.contains("cannot be preloaded"), "{odd}: {stderr}");
        let snapshots = std::fs::read_dir(watched.join("agent")).unwrap().count();
        assert!(snapshots > 0, "{odd}: the agent wrote snapshots: {stderr}");
    }
}

#[test]
fn death_by_signal_becomes_128_plus_n_and_the_trace_says_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kill.alt");
    let run = alloclens()
        .args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["sigkill", "2000"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(128 + 9));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("signal 9 (SIGKILL)"), "{stderr}");
    assert!(stderr.contains("1 truncated"), "{stderr}");
    let r = TraceReader::open(&out).unwrap();
    assert_eq!(r.streams()[0].end, Some(EndReason::Lost));
    assert!(r.streams()[0].info.truncated);
    assert_eq!(r.trailer().unwrap().exit, "signal 9 (SIGKILL)");
    assert_eq!(count(&out, Op::Malloc, 1601), 2000);
}

#[test]
fn marker_lines_pass_through_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.alt");
    let plain = Command::new(traced())
        .args(["mark", "100"])
        .output()
        .unwrap();
    let run = alloclens()
        .args(["record", "-q", "--marker", r"^phase (\w+)", "-o"])
        .arg(&out)
        .arg("--")
        .arg(traced())
        .args(["mark", "100"])
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(run.stdout, plain.stdout);
    let mut r = TraceReader::open(&out).unwrap();
    let labels: Vec<String> = r
        .records(0)
        .unwrap()
        .filter_map(|x| match x.unwrap() {
            Record::Marker(m) => Some(m.label),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["first", "second", "third"]);
}

#[test]
fn allocator_variant_runs_behind_the_shim() {
    testkit::require!(allocator "jemalloc");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("je.alt");
    let program = [
        traced().as_os_str(),
        "threads".as_ref(),
        "1000".as_ref(),
        "2".as_ref(),
    ];
    testkit::record(&out, &["-a", "jemalloc"], &program);
    let r = TraceReader::open(&out).unwrap();
    assert_eq!(r.header().allocator, "jemalloc");
    assert_eq!(count(&out, Op::Malloc, 2001), 1000);
}

#[test]
fn unwritable_output_is_a_one_line_error() {
    let run = alloclens()
        .args(["record", "-o", "/nonexistent-dir/x.alt", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("cannot create the trace file '/nonexistent-dir/x.alt'"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1);
}

/// Every --stack-depth out of range, a negative one or one beyond 32 bits included, gets the range.
#[test]
fn a_stack_depth_out_of_range_names_the_range() {
    let dir = tempfile::tempdir().unwrap();
    for depth in ["0", "257", "-1", "99999999999", "ten"] {
        let out = alloclens()
            .args(["record", "-q", "--stacks"])
            .arg(format!("--stack-depth={depth}"))
            .arg("-o")
            .arg(dir.path().join("t.alt"))
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{depth}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{depth}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "--stack-depth must be a whole number from 1 to 256, got `{depth}`"
            )),
            "{stderr}"
        );
        assert!(!dir.path().join("t.alt").exists());
    }
}

#[test]
fn a_missing_command_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = alloclens()
        .args(["record", "-o"])
        .arg(dir.path().join("x.alt"))
        .args(["--", "no-such-command-xyz"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("command not found: 'no-such-command-xyz'"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // The cause is not repeated after the message that already quotes it.
    assert_eq!(stderr.matches("os error").count(), 0, "{stderr}");
}

/// Drops what depends on timing or process ids, so that two recordings of one deterministic
/// program compare equal (and the recorder's memory readings, measurements of each run).
fn call_based(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.retain(|k, _| {
                !(k.contains("ns")
                    || k.contains("share_of_life")
                    || k.contains("time")
                    || ["pid", "ppid", "cmdline", "threads", "tid", "memory"].contains(&k.as_str()))
            });
            map.values_mut().for_each(call_based);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(call_based),
        _ => {}
    }
}

#[test]
fn without_addresses_the_trace_is_smaller_and_the_figures_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("blocks");
    let with = dir.path().join("with.alt");
    let without = dir.path().join("without.alt");
    testkit::record(&with, &["--addresses"], &[&exe]);
    testkit::record(&without, &[], &[&exe]);

    let report = |trace: &Path| {
        let mut v = testkit::json_stdout([
            std::ffi::OsStr::new("analyze"),
            "--json".as_ref(),
            trace.as_os_str(),
        ]);
        let mut processes = v["processes"].take();
        call_based(&mut processes);
        processes
    };
    let (a, b) = (report(&with), report(&without));
    assert_eq!(a.as_array().map(Vec::len), Some(2), "parent and fork child");
    assert_eq!(a, b);
    // The child freed 1,000 blocks it inherited: unknown to its own image either way.
    let unmatched: Vec<u64> = b
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats"]["unmatched_frees"].as_u64().unwrap())
        .collect();
    assert!(unmatched.contains(&1000), "{unmatched:?}");

    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(
        size(&without) * 2 < size(&with),
        "{} bytes without addresses, {} with",
        size(&without),
        size(&with)
    );
    let text = alloclens().arg("analyze").arg(&without).output().unwrap();
    let first = String::from_utf8_lossy(&text.stdout)
        .lines()
        .next()
        .map(String::from);
    assert!(
        first.is_some_and(|l| l.ends_with("recorded without addresses)")),
        "the summary says how the trace was recorded"
    );
    // Blocks are ids: the allocation at seq s has address 2^63 | s.
    let mut r = TraceReader::open(&without).unwrap();
    for rec in r.records(0).unwrap().take(1000) {
        if let Record::Event(e) = rec.unwrap() {
            if e.addr != 0 && !e.op.is_free() {
                assert_eq!(e.addr, trace::synthetic_address(e.seq));
            }
        }
    }
}

/// The pids of the live children of `parent` (from /proc).
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the comm may hold spaces, the fields after it do not.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        let pid = head
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<u32>().ok());
        if let (Some(pid), Some(ppid)) = (pid, ppid) {
            if ppid == parent {
                out.push(pid);
            }
        }
    }
    out
}

/// `alloclens record -q OPTIONS -o TRACE -- sh -c SCRIPT`, started, its output captured.
fn start_recording(trace: &Path, options: &[&str], script: &str) -> std::process::Child {
    alloclens()
        .args(["record", "-q"])
        .args(options)
        .arg("-o")
        .arg(trace)
        .args(["--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether process `pid` is gone or a zombie (all its threads have exited).
fn is_dead(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// How long a recording may take to reach a state (a hang guard).
const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The recorder dies (here SIGKILL; out of memory or a bug alike) while the command runs: the
/// command runs on untraced, and `alloclens record OPTIONS` still waits for it and ends with its
/// exit status, saying what happened; what the command writes afterwards still arrives (with
/// `--marker` its output goes through the recorder), and the trace keeps what was written before.
fn the_command_outlives_a_dead_recorder(options: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let (started, go) = (dir.path().join("started"), dir.path().join("go"));
    // The command waits for the test to kill the recorder, then finishes. It also ends when the
    // test's directory is gone (a failed run) and after 30 s: a failure leaves nothing running.
    let script = format!(
        "echo phase one; touch {s}; n=0; \
         while [ ! -e {g} ] && [ -d {d} ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; \
         echo phase two; echo still here >&2; exit 7",
        s = started.display(),
        g = go.display(),
        d = dir.path().display()
    );
    let supervisor = start_recording(&trace, options, &script);
    // Started, and its process in the file (the recorder flushes twice a second).
    let flushed = || TraceReader::open(&trace).is_ok_and(|r| !r.streams().is_empty());
    wait_until("the command started", LIMIT, || {
        started.exists() && flushed()
    });
    // The recorder is the process alloclens forked; the command is the recorder's child.
    let recorder = children_of(supervisor.id());
    assert_eq!(recorder.len(), 1, "one recorder process: {recorder:?}");
    assert!(
        !children_of(recorder[0]).is_empty(),
        "the command runs under the recorder"
    );
    // SAFETY: kill with a pid this test started (through alloclens) and a signal number.
    assert_eq!(unsafe { libc::kill(recorder[0] as i32, libc::SIGKILL) }, 0);
    // Only once it is dead: a reader thread of a dying recorder may still take a line written
    // right after the kill (on a busy VM its wake-up can come late), and that line is lost.
    wait_until("the recorder died", LIMIT, || is_dead(recorder[0]));
    std::fs::write(&go, "").unwrap();
    let out = supervisor.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "phase one\nphase two\n"
    );
    assert!(
        stderr.contains("still here")
            && stderr.contains("the recorder died (signal 9, SIGKILL)")
            && stderr.contains("t.alt"),
        "{stderr}"
    );
    assert!(
        flushed(),
        "what was written before the recorder died is still there"
    );
}

#[test]
fn a_dead_recorder_leaves_the_command_its_run_and_its_exit_status() {
    the_command_outlives_a_dead_recorder(&[]);
}

#[test]
fn a_dead_recorder_reading_marker_lines_leaves_the_command_its_output() {
    the_command_outlives_a_dead_recorder(&["--marker", "phase (\\w+)"]);
}

/// SIGTERM to `alloclens record` (a batch system's time limit, `kill`) goes on to the command,
/// which decides; the recording ends, complete, when the command does, with its exit status.
#[test]
fn a_termination_signal_goes_to_the_command_and_the_trace_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let started = dir.path().join("started");
    // Ends by itself when the test's directory is gone or after 30 s: a failure leaves nothing.
    let script = format!(
        "trap 'echo got TERM; exit 3' TERM; touch {s}; n=0; \
         while [ -d {d} ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; echo not stopped",
        s = started.display(),
        d = dir.path().display()
    );
    let supervisor = start_recording(&trace, &[], &script);
    wait_until("the command started", LIMIT, || started.exists());
    // SAFETY: kill with a pid this test started and a signal number.
    assert_eq!(
        unsafe { libc::kill(supervisor.id() as i32, libc::SIGTERM) },
        0
    );
    let out = supervisor.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "got TERM\n");
    let reader = TraceReader::open(&trace).unwrap();
    assert!(reader.damage().is_none(), "{:?}", reader.damage());
    assert!(reader.trailer().is_some(), "the recording was finished");
}

/// `alloclens record -q OPTIONS -o TRACE -- sh -c SCRIPT` with TMPDIR set, started.
fn start_recording_in(
    tmp: &Path,
    trace: &Path,
    options: &[&str],
    script: &str,
) -> std::process::Child {
    alloclens()
        .env("TMPDIR", tmp)
        .args(["record", "-q"])
        .args(options)
        .arg("-o")
        .arg(trace)
        .args(["--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A command that touches DIR/started, then waits for DIR/go (or for DIR to go, or 30 s: a
/// failed test leaves nothing running) and exits 7.
fn waiting_script(dir: &Path) -> String {
    format!(
        "touch {d}/started; n=0; \
         while [ ! -e {d}/go ] && [ -d {d} ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; exit 7",
        d = dir.display()
    )
}

/// The one line of an error run of `alloclens`, checked to exit with status 1.
fn error_line(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A whole trace: no damage, a trailer.
fn is_complete(trace: &Path) -> bool {
    TraceReader::open(trace).is_ok_and(|r| r.damage().is_none() && r.trailer().is_some())
}

/// Issue 15: a second recording into the file of a running one succeeded, and both wrote into
/// it ("corrupt after chunk 604"). The second is refused at once now; the first stays whole.
#[test]
fn issue_15_a_second_recording_into_a_busy_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("s.alt");
    let first = start_recording(&trace, &[], &waiting_script(dir.path()));
    wait_until("the first recording started", LIMIT, || {
        dir.path().join("started").exists()
    });
    let second = alloclens()
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(traced())
        .args(["ops", "300"])
        .output()
        .unwrap();
    let line = error_line(&second);
    assert!(
        line.contains("s.alt' exists; pass --force to replace it, or choose another name"),
        "{line}"
    );
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(7));
    assert!(is_complete(&trace));
    assert_eq!(TraceReader::open(&trace).unwrap().header().command[0], "sh");
}

/// With --force each recording writes a file of its own beside the target and renames it over
/// the target when it ends: two at once both end whole, the last one to end is the target.
#[test]
fn issue_15_with_force_recordings_replace_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("s.alt");
    std::fs::write(&trace, "an old file").unwrap();
    let first = start_recording(&trace, &["--force"], &waiting_script(dir.path()));
    wait_until("the first recording started", LIMIT, || {
        dir.path().join("started").exists()
    });
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        b"an old file",
        "replaced at the end only"
    );
    testkit::record(
        &trace,
        &["--force"],
        &[traced().as_os_str(), "ops".as_ref(), "300".as_ref()],
    );
    assert!(is_complete(&trace));
    assert_eq!(count(&trace, Op::Pvalloc, 1107), 300);
    std::fs::write(dir.path().join("go"), "").unwrap();
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(7));
    assert!(is_complete(&trace));
    assert_eq!(TraceReader::open(&trace).unwrap().header().command[0], "sh");
    assert_eq!(
        names_in(dir.path()),
        ["go", "s.alt", "started"],
        "no partial file left"
    );
}

/// Issue 15: `record -o good.alt -- /nonexistent/cmd` replaced a good trace with a 167-byte stub,
/// and said "not in PATH" of a path.
#[test]
fn issue_15_a_command_that_cannot_start_leaves_the_old_trace_and_no_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.alt");
    testkit::record(
        &good,
        &[],
        &[traced().as_os_str(), "ops".as_ref(), "300".as_ref()],
    );
    let before = std::fs::read(&good).unwrap();
    let record = |options: &[&str], out: &Path, program: &Path| {
        alloclens()
            .arg("record")
            .args(options)
            .arg("-o")
            .arg(out)
            .arg("--")
            .arg(program)
            .output()
            .unwrap()
    };
    let missing = Path::new("/nonexistent/cmd");
    let line = error_line(&record(&[], &good, missing));
    assert!(line.contains("good.alt' exists; pass --force"), "{line}");
    let line = error_line(&record(&["--force"], &good, missing));
    assert!(
        line.contains("cannot run '/nonexistent/cmd': no such file (check the path)"),
        "{line}"
    );
    assert_eq!(std::fs::read(&good).unwrap(), before);
    let fresh = dir.path().join("fresh.alt");
    error_line(&record(&[], &fresh, missing));
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "echo hi\n").unwrap();
    let line = error_line(&record(&[], &fresh, &not_executable));
    assert!(
        line.contains(&format!(
            "cannot run '{}': not an executable file",
            not_executable.display()
        )),
        "{line}"
    );
    assert_eq!(names_in(dir.path()), ["good.alt", "script.sh"]);
}

/// Issue 15: `record -o /dev/stdout > f` made an unreadable trace (the command's output went
/// into the same file) without a word. A trace goes to a regular file of its own.
#[test]
fn issue_15_the_trace_goes_to_a_regular_file_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let line = error_line(
        &alloclens()
            .args(["record", "-o", "/dev/null", "--", "true"])
            .output()
            .unwrap(),
    );
    assert!(line.contains("'/dev/null': not a regular file"), "{line}");
    let f = dir.path().join("f");
    for options in [&[][..], &["--force"]] {
        let out = alloclens()
            .arg("record")
            .args(options)
            .args(["-o", "/dev/stdout", "--", "echo", "hello"])
            .stdout(std::fs::File::create(&f).unwrap())
            .output()
            .unwrap();
        let line = error_line(&out);
        assert!(
            line.contains("it is where this process's output goes"),
            "{line}"
        );
        assert_eq!(std::fs::read(&f).unwrap(), b"", "nothing written into it");
    }
}

/// Issue 15: after a disk-full recording the summary said "recorded 8.0 M events" where 3.1 M
/// were readable. Writing stops at the first failed write, the file ends after its last whole
/// chunk, the command runs on, and the counts printed are what the file holds.
#[test]
fn issue_15_a_full_disk_leaves_a_readable_trace_and_the_count_it_holds() {
    let exe = testkit::program("noisy");
    let Some(disk) = SmallDisk::mount("2m") else {
        return;
    };
    let trace = disk.path().join("t.alt");
    // 6 M events, about 10 MB of trace.
    let out = alloclens()
        .args(["record", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(exe)
        .arg("3000000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the command's own status: {stderr}"
    );
    let reader = TraceReader::open(&trace).unwrap();
    assert!(
        reader.damage().is_none(),
        "ends after a whole chunk: {:?}",
        reader.damage()
    );
    assert!(reader.trailer().is_none());
    assert!(
        reader
            .notes()
            .iter()
            .any(|n| n.contains("No space left on device")),
        "{:?}",
        reader.notes()
    );
    let analysis = testkit::json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let readable = analysis["processes"][0]["stats"]["calls_total"]
        .as_u64()
        .unwrap();
    assert!(readable > 0 && readable < 6_000_000, "{readable}");
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("alloclens: warning: writing the trace failed"))
        .unwrap_or_else(|| panic!("one warning line: {stderr}"));
    assert!(
        warning.contains("No space left on device")
            && warning.contains(&format!("it holds the first {readable} events")),
        "{warning}"
    );
    assert!(
        stderr.contains(&format!(
            "recorded {} events (of 6.0 M intercepted; writing failed)",
            trace::human_count(readable)
        )),
        "{stderr}"
    );
}

/// Issue 15: a recorder killed with SIGKILL left its socket directory in the temporary
/// directory. The supervisor removes it, and with --force renames the partial trace over the
/// target: what was recorded is there, under the name asked for.
#[test]
fn issue_15_a_killed_recorder_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let trace = dir.path().join("t.alt");
    std::fs::write(&trace, "an old file").unwrap();
    let supervisor = start_recording_in(&tmp, &trace, &["--force"], &waiting_script(dir.path()));
    wait_until("the command started", LIMIT, || {
        dir.path().join("started").exists()
    });
    let recorder = children_of(supervisor.id());
    assert_eq!(recorder.len(), 1, "one recorder process: {recorder:?}");
    assert_eq!(
        names_in(&tmp).len(),
        1,
        "its socket directory: {:?}",
        names_in(&tmp)
    );
    // SAFETY: kill with a pid this test started (through alloclens) and a signal number.
    assert_eq!(unsafe { libc::kill(recorder[0] as i32, libc::SIGKILL) }, 0);
    wait_until("the recorder died", LIMIT, || is_dead(recorder[0]));
    std::fs::write(dir.path().join("go"), "").unwrap();
    let out = supervisor.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("t.alt keeps what was written before"),
        "{stderr}"
    );
    assert_eq!(names_in(&tmp), Vec::<String>::new());
    assert_eq!(names_in(dir.path()), ["go", "started", "t.alt", "tmp"]);
    let reader = TraceReader::open(&trace).unwrap();
    assert_eq!(reader.header().command[0], "sh");
}

/// When the supervisor dies too (SIGKILL to both), the next recording removes the directory.
#[test]
fn issue_15_the_socket_directory_of_a_dead_recording_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let supervisor = start_recording_in(
        &tmp,
        &dir.path().join("t.alt"),
        &[],
        &waiting_script(dir.path()),
    );
    wait_until("the command started", LIMIT, || {
        dir.path().join("started").exists()
    });
    let recorder = children_of(supervisor.id());
    assert_eq!(recorder.len(), 1, "one recorder process: {recorder:?}");
    for pid in [supervisor.id(), recorder[0]] {
        // SAFETY: kill with a pid this test started (through alloclens) and a signal number.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    }
    wait_until("the recorder died", LIMIT, || is_dead(recorder[0]));
    let left = names_in(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    // The command, which holds the output pipes, ends.
    std::fs::write(dir.path().join("go"), "").unwrap();
    supervisor.wait_with_output().unwrap();
    let next = alloclens()
        .env("TMPDIR", &tmp)
        .args(["record", "-q", "-o"])
        .arg(dir.path().join("next.alt"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    assert_eq!(names_in(&tmp), Vec::<String>::new());
}

/// Issue 15: `record --linger 1e300` panicked (exit 101).
#[test]
fn issue_15_a_huge_linger_is_a_one_line_error() {
    let out = alloclens()
        .args([
            "record",
            "--linger",
            "1e300",
            "-o",
            "/nonexistent-dir/x.alt",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let line = error_line(&out);
    assert!(
        line.contains("--linger must be a number of seconds from 0 to 604800"),
        "{line}"
    );
}

/// The file size limit (`ulimit -f`) as a second way for writes to fail (EFBIG): the recording
/// stops there as on a full disk, instead of SIGXFSZ killing the recorder. The limit leaves room
/// for the shim's 4 MiB ring files (one per thread), which are files too.
#[test]
fn issue_15_the_file_size_limit_stops_the_writing_not_the_recorder() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("noisy");
    let trace = dir.path().join("t.alt");
    const LIMIT: u64 = 17 << 20;
    let mut cmd = alloclens();
    // With addresses, 8 M events make about 22 MB of trace.
    cmd.args(["record", "--addresses", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(exe)
        .arg("4000000");
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("alloclens: warning: writing the trace failed (File too large"),
        "{stderr}"
    );
    let reader = TraceReader::open(&trace).unwrap();
    assert!(reader.damage().is_none(), "{:?}", reader.damage());
    assert!(std::fs::metadata(&trace).unwrap().len() <= LIMIT);
    let readable: u64 = reader.streams().iter().map(|s| s.records).sum();
    assert!(readable > 0 && readable < 8_000_000, "{readable}");
}

/// Issue 15: a program run without the shim is named, with the reason, by `record`, `analyze`
/// (text and JSON) and the HTML report, instead of "0 process image(s)" or a truncated parent.
#[test]
fn a_program_not_traced_is_reported_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("envi.alt");
    let rec = alloclens()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "env", "-i"])
        .arg(traced())
        .args(["leaf", "10"])
        .output()
        .unwrap();
    assert!(rec.status.success());
    let err = String::from_utf8_lossy(&rec.stderr);
    assert!(
        err.contains("1 program not traced") && err.contains("no LD_PRELOAD"),
        "{err}"
    );
    assert!(err.contains("1 program(s) not traced"), "{err}");
    assert!(!err.contains("truncated"), "env ended by its exec: {err}");

    let text = alloclens().arg("analyze").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("not traced (1 program(s)"), "{text}");
    assert!(text.contains(traced().to_str().unwrap()), "{text}");

    let json = alloclens()
        .args(["analyze", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let untraced = v["untraced"].as_array().unwrap();
    assert_eq!(untraced.len(), 1);
    assert!(untraced[0]["reason"]
        .as_str()
        .unwrap()
        .contains("no LD_PRELOAD"));
    assert_eq!(untraced[0]["program"], traced().to_str().unwrap());

    let html = dir.path().join("r.html");
    let ok = alloclens()
        .arg("report")
        .arg(&out)
        .arg("-o")
        .arg(&html)
        .status()
        .unwrap();
    assert!(ok.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("programs not traced"), "facts row");
    assert!(page.contains("no LD_PRELOAD"), "the reason");
}

/// Issue 20: without -o the trace is named like heaptrack's, in the current directory, and said.
#[test]
fn without_output_the_trace_gets_a_heaptrack_style_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = alloclens()
        .current_dir(dir.path())
        .args(["record", "--", "ls", "/"])
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let name = &names[0];
    let pid = name
        .strip_prefix("alloclens.ls.")
        .and_then(|rest| rest.strip_suffix(".alt"))
        .unwrap_or_else(|| panic!("{name}"));
    assert!(pid.parse::<u32>().is_ok(), "{name}");
    assert!(
        stderr.contains(&format!("recording into {name}")),
        "{stderr}"
    );
    // A real trace of ls: analyze reads it.
    let analyzed = alloclens()
        .current_dir(dir.path())
        .args(["analyze", "--json", name])
        .output()
        .unwrap();
    assert!(analyzed.status.success());
    let json: serde_json::Value = serde_json::from_slice(&analyzed.stdout).unwrap();
    assert!(
        json["processes"][0]["stats"]["calls_total"]
            .as_u64()
            .unwrap()
            > 0
    );
}
