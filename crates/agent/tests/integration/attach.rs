//! The agent loaded into running processes (agent::attach, through crates/attach): real processes,
//! real ptrace, no debugger.
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// `busy_threads THREADS` started (with `preload` in LD_PRELOAD), once its threads run: the child
/// and its stdout after the "running" line.
fn busy(threads: u32, preload: Option<&std::path::Path>) -> (Child, BufReader<ChildStdout>) {
    let mut command = Command::new(testkit::program("busy_threads"));
    command.arg(threads.to_string()).stdin(Stdio::piped());
    if let Some(library) = preload {
        command.env("LD_PRELOAD", library);
    }
    testkit::spawn_ready(&mut command, &format!("running {threads}\n"))
}

/// 50 attach/detach cycles on a program whose 4 threads allocate, reallocate, check and free as
/// fast as they can: no crash, no deadlock, no corrupted block, no lost output, and the library
/// mapped once however many times it was attached (a later attach reuses it). The kind of program
/// `heaptrack -p` killed on a machine where gdb's inferior calls fail.
#[test]
fn fifty_attaches_to_a_busy_four_thread_program_leave_it_whole() {
    let (mut child, mut out) = busy(4, None);
    let pid = child.id();
    let mut at_entry = 0;
    for cycle in 0..50 {
        let a = agent::attach(pid, Duration::from_millis(100))
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        if matches!(
            a.injection.safe_point,
            attach::SafePoint::AllocatorEntry { .. }
        ) {
            at_entry += 1;
        }
        // Every fifth cycle waits for the agent's snapshot: it runs, and reads glibc.
        if cycle % 5 == 0 {
            let dir = a.dir.clone();
            let ok = testkit::poll_until(Duration::from_secs(10), || {
                agent::read_snapshots(&dir).is_ok_and(|s| {
                    s.iter()
                        .any(|s| s.pid == pid && s.attached && s.allocator.name == "glibc")
                })
            });
            assert!(ok, "cycle {cycle}: no snapshot");
        }
        a.detach();
        assert!(
            child.try_wait().unwrap().is_none(),
            "cycle {cycle}: it died"
        );
    }
    // A busy program is caught at its allocator's entry, not in a system call.
    assert!(at_entry >= 45, "{at_entry} of 50 at an allocator entry");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let copies: std::collections::BTreeSet<&str> = maps
        .lines()
        .filter(|l| l.contains("/alloclens-attach-"))
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    drop(child.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    for i in 0..4 {
        assert!(
            rest.contains(&format!("thread {i}: ran, 0 errors\n")),
            "{rest}"
        );
    }
    assert!(rest.ends_with("done\n"), "{rest}");
    assert_eq!(status.code(), Some(0), "{rest}");
}

/// `watch --pid --profile`'s agent attached 10 times with a heap profile to a program whose 4
/// threads allocate, reallocate, check and free as fast as they can, the GOT patched and restored
/// each time under their feet: every attach makes a table whose sampled stacks are in the
/// program's code; once the attach ended, the table says detached and takes no more samples; the
/// program finishes whole (no crash, no corrupted block).
#[test]
fn attaches_with_a_heap_profile_sample_a_busy_program_and_leave_it_whole() {
    let (mut child, mut out) = busy(4, None);
    let pid = child.id();
    let code = testkit::code_ranges(pid, testkit::program("busy_threads"));
    assert!(!code.is_empty());
    for cycle in 0..10 {
        let tables = tempfile::tempdir().unwrap();
        let profile = agent::AttachProfile {
            sample_bytes: 4096,
            table_dir: tables.path().to_path_buf(),
        };
        let a = agent::attach_profiled(pid, Duration::from_millis(100), &profile)
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        assert_eq!(a.profile_refused, None);
        let read = || {
            testkit::profile_tables(tables.path(), pid)
                .first()
                .and_then(|p| testkit::read_profile_table(p))
        };
        assert!(
            testkit::poll_until(Duration::from_secs(10), || read()
                .is_some_and(|t| t.samples >= 100)),
            "cycle {cycle}: no samples: {:?}",
            read()
        );
        a.detach();
        assert!(
            testkit::poll_until(Duration::from_secs(10), || read()
                .is_some_and(|t| t.state == testkit::TABLE_DETACHED)),
            "cycle {cycle}: not detached: {:?}",
            read()
        );
        let table = read().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read().unwrap().samples, table.samples, "cycle {cycle}");
        assert_eq!(table.flags, testkit::TABLE_FLAG_ATTACHED);
        assert_eq!((table.pid, table.sample_bytes), (pid, 4096));
        let in_program = table.stacks.iter().any(|s| {
            s.frames
                .iter()
                .any(|&f| code.iter().any(|&(lo, hi)| f >= lo && f < hi))
        });
        assert!(in_program, "cycle {cycle}: {:?}", table.stacks);
        assert!(
            child.try_wait().unwrap().is_none(),
            "cycle {cycle}: it died"
        );
    }
    drop(child.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = child.wait().unwrap();
    for i in 0..4 {
        assert!(
            rest.contains(&format!("thread {i}: ran, 0 errors\n")),
            "{rest}"
        );
    }
    assert_eq!(status.code(), Some(0), "{rest}");
}

/// A C++ program's new and delete in each form (through libstdc++'s operators, which the hooks
/// pass on) are sampled too: stacks in its code; after the detach it runs on.
#[test]
fn a_cxx_program_is_sampled_through_its_operators() {
    let tables = tempfile::tempdir().unwrap();
    let program = testkit::program("newdelete");
    // Rounds enough for minutes: killed once checked.
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Killed(
        Command::new(program)
            .arg("1000000000000")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    // It says nothing when it runs: past the loader once it has used 50 ms of CPU in all.
    let cpu_ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // utime and stime, fields 14 and 15: the 12th and 13th after the command's name.
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        let tick = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        tick(11) + tick(12)
    };
    testkit::wait_until("the program's start", Duration::from_secs(30), || {
        cpu_ticks() >= 5
    });
    let code = testkit::code_ranges(pid, program);
    let profile = agent::AttachProfile {
        sample_bytes: 4096,
        table_dir: tables.path().to_path_buf(),
    };
    let a = agent::attach_profiled(pid, Duration::from_millis(100), &profile).unwrap();
    let read = || {
        testkit::profile_tables(tables.path(), pid)
            .first()
            .and_then(|p| testkit::read_profile_table(p))
    };
    assert!(
        testkit::poll_until(Duration::from_secs(10), || read()
            .is_some_and(|t| t.samples >= 100)),
        "no samples: {:?}",
        read()
    );
    a.detach();
    assert!(
        testkit::poll_until(Duration::from_secs(10), || read()
            .is_some_and(|t| t.state == testkit::TABLE_DETACHED)),
        "not detached: {:?}",
        read()
    );
    let in_program = read().unwrap().stacks.iter().any(|s| {
        s.frames
            .iter()
            .any(|&f| code.iter().any(|&(lo, hi)| f >= lo && f < hi))
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(in_program, "{:?}", read());
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "it died after the detach"
    );
}

/// A program blocked in read() on a pipe never calls the allocator: the thread blocked in the
/// system call is borrowed, and the read goes on afterwards as if nothing happened: the data
/// written later arrives whole.
#[test]
fn a_program_blocked_in_read_is_attached_and_reads_on() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let a = agent::attach(child.id(), Duration::from_millis(100)).unwrap();
    assert!(
        matches!(
            a.injection.safe_point,
            attach::SafePoint::Syscall { number: 0, .. }
        ),
        "{:?}",
        a.injection.safe_point
    );
    let dir = a.dir.clone();
    assert!(testkit::poll_until(Duration::from_secs(10), || {
        agent::read_snapshots(&dir).is_ok_and(|s| !s.is_empty())
    }));
    a.detach();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello through the pipe\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, b"hello through the pipe\n");
    assert_eq!(out.status.code(), Some(0));
}

/// The allocator that serves the program is the one read: jemalloc preloaded before glibc.
#[test]
fn a_program_with_jemalloc_preloaded_is_read_through_jemalloc() {
    testkit::require!(allocator "jemalloc");
    let jemalloc = testkit::allocator_library("jemalloc").unwrap();
    let (mut child, _out) = busy(2, Some(&jemalloc));
    let a = agent::attach(child.id(), Duration::from_millis(100)).unwrap();
    let dir = a.dir.clone();
    let mut name = String::new();
    assert!(testkit::poll_until(Duration::from_secs(10), || {
        agent::read_snapshots(&dir).is_ok_and(|s| {
            s.first().is_some_and(|s| {
                name = s.allocator.name.clone();
                s.allocator.handed_out.is_some()
            })
        })
    }));
    assert_eq!(name, "jemalloc");
    a.detach();
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// Whether thread `tid` of process `pid` is traced.
fn traced(pid: u32, tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("TracerPid:") && l.trim_end() != "TracerPid:\t0")
    })
}

/// `spin_until FILE ARGS`, attached with a wait for a safe point longer than any test: once
/// `attached(pid)` is true, `end` makes it exit (given its pid and the file it polls). The attach's
/// outcome.
fn attach_while_it_ends(
    args: &[&str],
    attached: impl Fn(u32) -> bool,
    end: impl FnOnce(u32, &std::path::Path),
) -> attach::AttachError {
    let tmp = tempfile::tempdir().unwrap();
    let flag = tmp.path().join("flag");
    std::fs::write(&flag, [0u8]).unwrap();
    let mut child = Command::new(testkit::program("spin_until"))
        .arg(&flag)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "spinning\n");
    let pid = child.id();
    // Killed if the test fails before it ends it: a spinning process must not outlive the test.
    struct KillOnDrop(u32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if std::thread::panicking() {
                // SAFETY: a signal to our own child, not waited for yet.
                unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
            }
        }
    }
    let guard = KillOnDrop(pid);
    let (sender, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let attached = agent::attach_waiting(
            pid,
            Duration::from_millis(100),
            Duration::from_secs(600),
            None,
        );
        sender.send(attached.map(drop)).unwrap();
    });
    testkit::wait_until("the attach", Duration::from_secs(60), || attached(pid));
    assert!(
        !testkit::attach_leftovers(std::path::Path::new("/"), pid).is_empty(),
        "the attach made its lock first"
    );
    end(pid, &flag);
    let err = outcome
        .recv_timeout(Duration::from_secs(60))
        .expect("the attach hangs after the process exited");
    std::mem::forget(guard);
    let err = err.unwrap_err();
    // The tracer may have reaped it already.
    let _ = child.wait();
    assert_eq!(
        testkit::attach_leftovers(std::path::Path::new("/"), pid),
        Vec::<String>::new()
    );
    err
}

/// The process exits, or is killed, while the attach waits for a safe point (it spins without
/// calling the allocator or making a system call), or while its borrowed thread is inside dlopen
/// (waiting for the loader's lock, which another thread of it holds until it exits). The test ends
/// it only once the attach is there, and the waits are long, so that the exit, not a wait's end,
/// is what the attach sees on any machine: one line, no hang, no panic, and neither the lock nor
/// the scratch directory is left in /tmp/alloclens-attach-UID (they were reached through
/// /proc/PID/root, gone with the process).
#[test]
fn a_process_that_exits_during_the_attach_is_said_and_nothing_is_left() {
    let exited = |pid: u32| format!("process {pid} exited while alloclens attached to it");
    let seized = |pid: u32| traced(pid, pid);
    let mut ended = 0;
    let err = attach_while_it_ends(&[], seized, |pid, flag| {
        ended = pid;
        std::fs::write(flag, [1u8]).unwrap();
    });
    assert!(
        matches!(err, attach::AttachError::Exited(p) if p == ended),
        "{err}"
    );
    assert_eq!(err.to_string(), exited(ended));
    let err = attach_while_it_ends(&[], seized, |pid, _| {
        ended = pid;
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    assert!(
        matches!(err, attach::AttachError::Exited(p) if p == ended),
        "{err}"
    );
    assert_eq!(err.to_string(), exited(ended));
    // Borrowed (traced, the other thread released) and blocked in a futex: inside dlopen.
    let in_dlopen = |pid: u32| {
        traced(pid, pid)
            && std::fs::read_dir(format!("/proc/{pid}/task"))
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .all(|tid| tid == pid || !traced(pid, tid))
            && std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/syscall"))
                .is_ok_and(|s| s.starts_with("202 "))
    };
    let err = attach_while_it_ends(&["loader"], in_dlopen, |pid, flag| {
        ended = pid;
        std::fs::write(flag, [1u8]).unwrap();
    });
    assert!(
        matches!(err, attach::AttachError::Exited(p) if p == ended),
        "{err}"
    );
    assert_eq!(err.to_string(), exited(ended));
}
