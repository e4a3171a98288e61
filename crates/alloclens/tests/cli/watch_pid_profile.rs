//! `watch --pid --profile`: the agent attached to a process nobody started under alloclens samples
//! its heap (its hooks patched into the process's GOT), the table stays in DIR/agent after the
//! watch (read by `alloclens snapshot DIR`), and the process runs on with its GOT put back.
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use testkit::alloclens;

/// attach_target (4 threads allocating and freeing blocks of 10000+ bytes), once it printed
/// "ready".
struct Target {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Target {
    fn start(preload: Option<&Path>) -> Target {
        let mut command = Command::new(testkit::program("attach_target"));
        command.stdin(Stdio::piped());
        if let Some(library) = preload {
            command.env("LD_PRELOAD", library);
        }
        let (child, out) = testkit::spawn_ready(&mut command, "ready\n");
        Target { child, out }
    }

    fn command(&mut self, line: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.out.read_line(&mut answer).unwrap();
        answer
    }

    /// Ends the program: it exited 0 (no block read back wrong) with its output whole.
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the program failed ({status}): {rest}");
        assert!(rest.ends_with("done\n"), "{rest}");
    }
}

/// Watches the program 2 s with `--profile=4096` and checks the table, the GOT during and after
/// the watch, and the program's end.
fn profile_while_watched(preload: Option<&Path>) {
    let mut target = Target::start(preload);
    let pid = target.child.id();
    let code = testkit::code_ranges(pid, testkit::program("attach_target"));
    assert!(!code.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w");
    // A relative DIR: the process has a working directory of its own.
    let watch = alloclens()
        .current_dir(dir.path())
        .args(["watch", "--interval", "100ms", "--duration", "2s"])
        .args(["--profile=4096", "--pid", &pid.to_string(), "-o", "w"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tables = out.join("agent");
    let table = || {
        testkit::profile_tables(&tables, pid)
            .first()
            .and_then(|p| testkit::read_profile_table(p))
    };
    let sampling = testkit::poll_until(Duration::from_secs(10), || {
        table().is_some_and(|t| t.samples > 0)
    });
    assert!(sampling, "no samples while watched: {:?}", table());
    assert_eq!(target.command("got"), "malloc slot: hook\n");
    let watched = watch.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&watched.stderr);
    assert!(watched.status.success(), "{said}");
    // The watch removed the attach's directory: the agent puts the GOT back at its next interval.
    let detached = testkit::poll_until(Duration::from_secs(10), || {
        table().is_some_and(|t| t.state == testkit::TABLE_DETACHED)
    });
    assert!(detached, "{:?}", table());
    assert_eq!(target.command("got"), "malloc slot: allocator\n");
    let t = table().unwrap();
    assert_eq!(
        (t.pid, t.sample_bytes, t.flags),
        (pid, 4096, testkit::TABLE_FLAG_ATTACHED)
    );
    let in_program = t.stacks.iter().any(|s| {
        s.frames
            .iter()
            .any(|&f| code.iter().any(|&(lo, hi)| f >= lo && f < hi))
    });
    assert!(
        in_program,
        "no sampled stack in attach_target's code: {:?}",
        t.stacks
    );
    // Read after the watch, by the directory: the workers' function is a site.
    let profile = dir.path().join("after.pb.gz");
    let json = alloclens()
        .args(["snapshot", "--json", "-o"])
        .arg(&profile)
        .arg(&out)
        .ok();
    let text = String::from_utf8_lossy(&json.stdout);
    assert!(text.contains("\"work"), "{text}");
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["snapshots"][0]["state"], "detached", "{text}");
    // It allocates on a moment unhooked, then finishes whole.
    std::thread::sleep(Duration::from_millis(300));
    target.finish();
}

/// glibc's malloc, the chunk headers of the blocks from before the attach never read.
#[test]
fn watch_pid_profile_samples_the_running_program_and_puts_its_got_back() {
    profile_while_watched(None);
}

/// The same on jemalloc preloaded: its blocks from before the attach are freed through the hooks.
#[test]
fn watch_pid_profile_samples_a_program_on_jemalloc() {
    testkit::require!(allocator "jemalloc");
    let jemalloc = testkit::allocator_library("jemalloc").unwrap();
    profile_while_watched(Some(&jemalloc));
}

/// A process with a /tmp of its own (another mount namespace) does not see the watch's directory
/// under our /tmp: the watch goes on without the profile and says why, and the process finishes
/// whole.
#[test]
fn a_process_that_cannot_see_the_watch_directory_is_watched_without_the_profile() {
    testkit::require!(root);
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut out) = testkit::spawn_with_private_tmp();
    let pid = child.id();
    let dir = tmp.path().join("w");
    let watched = alloclens()
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "1s",
            "--profile",
        ])
        .args(["--pid", &pid.to_string(), "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&watched.stderr);
    assert!(watched.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "no heap profile of process {pid}: process {pid} does not see"
        )),
        "{err}"
    );
    assert!(testkit::profile_tables(&dir.join("agent"), pid).is_empty());
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{rest}");
}

/// `live --pid`'s background collector (run here as its viewer starts it, `live --collector`):
/// `live --pid PID --stop` ends it with the GOT put back and its results written; a collector
/// started again for the stopped session ends by itself after `--duration`, leaving nothing.
#[test]
fn a_live_collector_stopped_or_at_its_duration_puts_the_got_back() {
    let mut target = Target::start(None);
    let pid = target.child.id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("session");
    let collector = |extra: &[&str]| {
        Command::new(testkit::alloclens_exe())
            .args([
                "live",
                "--collector",
                "--interval",
                "100ms",
                "--profile=4096",
            ])
            .args(["--pid", &pid, "-o"])
            .arg(&out)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let tables = out.join("agent");
    let hooked = |target: &mut Target| target.command("got") == "malloc slot: hook\n";
    let mut first = collector(&[]);
    let sampling = testkit::poll_until(Duration::from_secs(10), || {
        testkit::profile_tables(&tables, target.child.id())
            .first()
            .and_then(|p| testkit::read_profile_table(p))
            .is_some_and(|t| t.samples > 0)
    });
    assert!(sampling, "no samples under the collector");
    assert!(hooked(&mut target));
    assert!(out.join("collector.pid").exists());
    alloclens()
        .args(["live", "--stop", "--pid", &pid, "-o"])
        .arg(&out)
        .ok();
    // Ended as `watch` ends on SIGTERM with the program still running.
    assert_eq!(first.wait().unwrap().code(), Some(130));
    assert!(!out.join("collector.pid").exists());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("watch.json")).unwrap()).unwrap();
    assert_eq!(json["ending"], "interrupted", "{json}");
    let put_back = testkit::poll_until(Duration::from_secs(10), || !hooked(&mut target));
    assert!(put_back, "the GOT still holds the hook after --stop");
    let kept = json["samples_kept"].as_u64().unwrap();

    // Again, for 1 s: the session goes on and the collector ends by itself.
    let mut second = collector(&["--duration", "1s"]);
    assert!(second.wait().unwrap().success());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("watch.json")).unwrap()).unwrap();
    assert_eq!(json["ending"], "duration", "{json}");
    assert!(json["samples_kept"].as_u64().unwrap() > kept, "{json}");
    assert!(!out.join("collector.pid").exists());
    let put_back = testkit::poll_until(Duration::from_secs(10), || !hooked(&mut target));
    assert!(put_back, "the GOT still holds the hook after --duration");
    target.finish();
}
