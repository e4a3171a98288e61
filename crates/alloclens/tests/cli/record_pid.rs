//! `alloclens record --pid`: real running processes, attached without a debugger, recorded, left
//! running. The program (testkit's attach_target) numbers its calls in its block sizes, so a call
//! lost in the window shows as a gap.
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use trace::{EndReason, Op, Record, TraceReader};

use testkit::alloclens;

/// attach_target.c's sizes: thread t's i-th block is BASE + t * STRIDE + i % CYCLE bytes.
const BASE: u64 = 10000;
const STRIDE: u64 = 2000;
const CYCLE: u64 = 1024;
/// plugin.c's block size.
const PLUGIN_SIZE: u64 = 1901;

struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Target {
    /// attach_target THREADS, once it printed "ready".
    fn start(threads: u32, preload: Option<&Path>) -> Target {
        let mut command = Command::new(testkit::program("attach_target"));
        command.arg(threads.to_string()).stdin(Stdio::piped());
        if let Some(library) = preload {
            command.env("LD_PRELOAD", library);
        }
        let (child, out) = testkit::spawn_ready(&mut command, "ready\n");
        Target { child, out }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn command(&mut self, line: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        line_of(&mut self.out)
    }

    /// Ends the program: every thread's own count of its calls; it exited 0 (no block read back
    /// wrong, its output whole).
    fn finish(mut self) -> Vec<u64> {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the program failed ({status}): {rest}");
        assert!(rest.ends_with("done\n"), "{rest}");
        rest.lines()
            .filter_map(|l| l.strip_prefix("thread "))
            .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
            .collect()
    }
}

fn line_of(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line
}

fn record_pid(pid: u32, seconds: &str, trace: &Path) -> std::process::Output {
    let out = alloclens()
        .args([
            "record",
            "--pid",
            &pid.to_string(),
            "--duration",
            seconds,
            "-o",
        ])
        .arg(trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record --pid failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The trace's events of its one stream, with its end.
fn events(trace: &Path) -> (Vec<trace::Event>, Option<EndReason>) {
    let mut r = TraceReader::open(trace).unwrap();
    assert_eq!(r.streams().len(), 1, "one process image");
    assert!(r.header().attached_pid.is_some(), "marked attached");
    let end = r.streams()[0].end;
    let events = r
        .records(0)
        .unwrap()
        .filter_map(|rec| match rec.unwrap() {
            Record::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    (events, end)
}

/// Checks that each worker's calls in the trace are the program's own, without a gap: per thread,
/// malloc and free alternate, each free releases the block just allocated and each malloc's size
/// is the next in the thread's numbering. At the edges (docs/attach.md, "What is seen"): the
/// releasing hooks go in first and come out last, so a thread's calls may start and end with
/// frees of blocks the trace did not see allocated, each carrying the allocator's usable size (at
/// least what was asked); and the last malloc may have its free after the detach. Returns each
/// worker's calls by thread index.
fn check_windows(events: &[trace::Event]) -> HashMap<u64, u64> {
    let mut by_tid: HashMap<u32, Vec<&trace::Event>> = HashMap::new();
    for e in events {
        by_tid.entry(e.tid).or_default().push(e);
    }
    let unmatched_free =
        |e: &&&trace::Event| e.op == Op::Free && e.addr & trace::SYNTHETIC_BIT == 0;
    let mut calls = HashMap::new();
    for (tid, list) in by_tid {
        let mut calls_of = |t: u64| *calls.entry(t).or_insert(0u64) += 1;
        let leading = list.iter().take_while(unmatched_free).count();
        let trailing = list[leading..]
            .iter()
            .rev()
            .take_while(unmatched_free)
            .count();
        for e in list[..leading].iter().chain(&list[list.len() - trailing..]) {
            assert!(
                e.size >= BASE,
                "thread {tid}: a free of an unseen block carries {} bytes",
                e.size
            );
        }
        let middle = &list[leading..list.len() - trailing];
        let mut last: Option<u64> = None;
        for pair in middle.chunks(2) {
            let m = pair[0];
            assert_eq!(m.op, Op::Malloc, "thread {tid}: {m:?}");
            let index = (m.size - BASE) % STRIDE;
            if let Some(prev) = last {
                assert_eq!(
                    index,
                    (prev + 1) % CYCLE,
                    "thread {tid}: a call is missing before {m:?}"
                );
            }
            last = Some(index);
            calls_of(thread_of(m.size));
            if let Some(f) = pair.get(1) {
                assert_eq!(f.op, Op::Free, "thread {tid}: {f:?}");
                assert_eq!(f.addr, m.addr, "thread {tid}: the free of another block");
                calls_of(thread_of(m.size));
            }
        }
    }
    calls
}

fn thread_of(size: u64) -> u64 {
    assert!(size >= BASE, "a block of {size} bytes is not a worker's");
    (size - BASE) / STRIDE
}

/// The case: a C program allocating in 4 threads, attached, recorded 2 s, detached; it
/// finishes with its output and exit status, and each thread's calls in the trace are the
/// program's own, in order, none missing in the window. Attached a second time (the library is
/// already loaded: a new session), the same holds.
#[test]
fn four_threads_recorded_from_the_attach_to_the_detach_call_for_call() {
    let dir = tempfile::tempdir().unwrap();
    let target = Target::start(4, None);
    let first = dir.path().join("first.alt");
    let out = record_pid(target.pid(), "2", &first);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("detached from pid"), "{stderr}");
    let second = dir.path().join("second.alt");
    record_pid(target.pid(), "0.3", &second);
    let own = target.finish();
    assert_eq!(own.len(), 4);
    for trace in [&first, &second] {
        let (events, end) = events(trace);
        assert_eq!(end, Some(EndReason::Detached));
        let calls = check_windows(&events);
        assert_eq!(calls.len(), 4, "every thread recorded: {calls:?}");
        for (t, n) in calls {
            assert!(
                n > 0 && n <= own[t as usize],
                "thread {t}: {n} of {}",
                own[t as usize]
            );
        }
    }
    let analysis = alloclens().arg("analyze").arg(&first).output().unwrap();
    let text = String::from_utf8_lossy(&analysis.stdout);
    assert!(text.contains("attached to running pid"), "{text}");
    assert!(
        text.contains("(glibc mallinfo2), at the detach about"),
        "{text}"
    );
    let report = dir.path().join("first.html");
    let made = alloclens()
        .arg("report")
        .arg(&first)
        .arg("-o")
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

/// The same through jemalloc preloaded: its usable sizes and its statistics.
#[test]
fn a_program_on_jemalloc_is_recorded_through_jemalloc() {
    testkit::require!(allocator "jemalloc");
    let jemalloc = testkit::allocator_library("jemalloc").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = Target::start(4, Some(&jemalloc));
    let trace = dir.path().join("je.alt");
    record_pid(target.pid(), "1", &trace);
    let own = target.finish();
    let (events, _) = events(&trace);
    for (t, n) in check_windows(&events) {
        assert!(n > 0 && n <= own[t as usize]);
    }
    let r = TraceReader::open(&trace).unwrap();
    assert_eq!(r.header().allocator, "jemalloc");
    let figures = r.trailer().unwrap().attach.clone().unwrap();
    assert_eq!(figures.heap_source, "jemalloc stats.allocated");
    assert!(figures.heap_in_use.unwrap() > 0 && figures.got_slots > 0);
}

/// A program blocked in read() (no thread calls malloc: the attach borrows the blocked thread),
/// that dlopens a library after the attach, whose calls are recorded with sampled stacks that
/// `analyze --sites` reads; Ctrl-C (SIGINT to alloclens) ends the recording and the program runs
/// on.
#[test]
fn a_library_loaded_after_the_attach_is_recorded_and_ctrl_c_detaches() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Target::start(0, None);
    let trace = dir.path().join("plugin.alt");
    let mut recording = alloclens()
        .args([
            "record",
            "--stacks=all",
            "--pid",
            &target.pid().to_string(),
            "-o",
        ])
        .arg(&trace)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(recording.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("attached to pid") {
        let line = line_of(&mut stderr);
        assert!(!line.is_empty(), "alloclens ended before attaching: {said}");
        said.push_str(&line);
    }
    assert!(said.contains("system call 0"), "borrowed in read(): {said}");
    let plugin = testkit::program("plugin.so");
    assert_eq!(
        target.command(&format!("load {}", plugin.display())),
        "loaded\n"
    );
    // SAFETY: kill on our child's pid, not yet waited for.
    unsafe { libc::kill(recording.id() as i32, libc::SIGINT) };
    let status = recording.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{said}{rest}");
    assert!(rest.contains("detached from pid"), "{rest}");
    assert_eq!(target.finish(), Vec::<u64>::new());
    let (events, end) = events(&trace);
    assert_eq!(end, Some(EndReason::Detached));
    let plugin_calls = |op| {
        events
            .iter()
            .filter(|e| e.op == op && (op == Op::Free || e.size == PLUGIN_SIZE))
            .count()
    };
    assert_eq!(plugin_calls(Op::Malloc), 1000);
    assert!(plugin_calls(Op::Free) >= 1000);
    let sites = alloclens()
        .args(["analyze", "--sites"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&sites.stdout);
    assert!(text.contains("plugin_churn"), "{text}");
}

/// python3 with PYTHONMALLOC=malloc (every object through malloc) building dicts: recorded, and
/// it finishes with its own output. The trace replays and merges as any other.
#[test]
fn python_building_dicts_is_recorded_and_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let script = format!(
        "import os, sys\nprint('ready', flush=True)\nn = 0\nwhile not os.path.exists({stop:?}):\n    d = {{i: str(i) * 3 for i in range(500)}}\n    n += 1\nprint('built', n > 0)\n",
        stop = stop.display().to_string()
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .env("PYTHONMALLOC", "malloc")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(line_of(&mut out), "ready\n");
    let trace = dir.path().join("python.alt");
    record_pid(child.id(), "0.5", &trace);
    std::fs::write(&stop, "").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(rest, "built True\n");
    let (events, _) = events(&trace);
    let mallocs = events.iter().filter(|e| e.op == Op::Malloc).count();
    assert!(mallocs > 1000, "{mallocs} mallocs");
    let r = TraceReader::open(&trace).unwrap();
    assert!(r.header().command.iter().any(|a| a.contains("python")));
    for args in [
        vec!["replay", "-a", "glibc", "-o", "replayed"],
        vec!["merge", "-o", "dataset"],
    ] {
        let out = alloclens()
            .current_dir(dir.path())
            .args(&args)
            .arg(&trace)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A process that ends while it is recorded ends the recording: the trace is whole up to there,
/// and the socket's directory in its /tmp is gone.
#[test]
fn a_process_that_exits_while_recorded_ends_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Target::start(2, None);
    let pid = target.pid();
    let trace = dir.path().join("exits.alt");
    let mut recording = alloclens()
        .args(["record", "--pid", &target.pid().to_string(), "-o"])
        .arg(&trace)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(recording.stderr.take().unwrap());
    while !line_of(&mut stderr).contains("attached to pid") {}
    drop(target.child.stdin.take());
    assert!(target.child.wait().unwrap().success());
    let status = recording.wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "{rest}");
    assert!(rest.contains("exited; the trace ends with it"), "{rest}");
    let (events, end) = events(&trace);
    assert!(matches!(end, Some(EndReason::Exit)), "{end:?}");
    assert!(!events.is_empty());
    assert_eq!(
        testkit::attach_leftovers(Path::new("/"), pid),
        Vec::<String>::new()
    );
}

/// record --pid refuses as watch --pid does (the attach crate's checks, tested one by one in
/// attach_refusals): one line naming the fix, and no trace file left behind.
#[test]
fn record_pid_refusals_are_one_line_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut stopped = Command::new("sleep").arg("30").spawn().unwrap();
    // SAFETY: kill on our child's pid, not yet waited for.
    unsafe { libc::kill(stopped.id() as i32, libc::SIGSTOP) };
    testkit::wait_until("the stop", std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{}/stat", stopped.id())).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('T'))
        })
    });
    for (pid, says) in [
        ("4194300".to_string(), "no process 4194300"),
        (stopped.id().to_string(), "kill -CONT"),
    ] {
        let trace = dir.path().join(format!("{pid}.alt"));
        let out = alloclens()
            .args(["record", "--pid", &pid, "--duration", "1", "-o"])
            .arg(&trace)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(says), "{stderr}");
        assert!(!trace.exists(), "a trace was left for {pid}");
    }
    let _ = stopped.kill();
    let _ = stopped.wait();
}
