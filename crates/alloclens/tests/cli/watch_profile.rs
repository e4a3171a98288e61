//! `watch --profile`: the agent's sampler under a real watch, the snapshots its triggers write into
//! the ring (DIR/snapshots), a snapshot asked for by a signal, and the table of a process the
//! kernel's OOM killer ended in a memory-limited cgroup.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use testkit::alloclens;

/// `sampled_sites` keeping `keep` blocks of 4,000 B, then waiting for its stdin to close.
fn sites_args(keep: u32) -> Vec<String> {
    let keep = keep.to_string();
    ["2000", "64", "4", "65536", "2", &keep, "4000", "wait"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn snapshots(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The stack whose site starts with `function` in `alloclens snapshot --json`'s output (its first
/// process).
fn site<'a>(snapshot: &'a Value, function: &str) -> &'a Value {
    snapshot["snapshots"][0]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"].as_str().is_some_and(|x| x.starts_with(function)))
        .unwrap_or_else(|| panic!("no stack of {function}: {snapshot:#}"))
}

fn snapshot_json(target: &Path, out: &Path) -> Value {
    let o = alloclens()
        .args(["snapshot", "--json", "-o"])
        .arg(out)
        .arg(target)
        .ok();
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A watch of `sampled_sites` with its stdin ours: returns the watch once the program said ready.
fn start_watch(dir: &Path, extra: &[&str]) -> std::process::Child {
    let mut cmd = alloclens();
    cmd.args(["watch", "--profile=4096", "--interval", "100ms", "-o"])
        .arg(dir)
        .args(extra)
        .arg("--")
        .arg(testkit::program("sampled_sites"))
        .args(sites_args(3000))
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    let (child, _) = testkit::spawn_ready(&mut cmd, "ready\n");
    child
}

#[test]
fn the_ring_keeps_the_last_snapshots_and_the_end_one_holds_the_final_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut watch = start_watch(
        &dir,
        &["--snapshot-every", "100ms", "--snapshots-kept", "3"],
    );
    // More snapshots than the ring keeps (however long each takes here).
    testkit::wait_until("five snapshots", Duration::from_secs(60), || {
        snapshots(&dir).iter().any(|n| n.starts_with("000005-"))
    });
    drop(watch.stdin.take());
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let names = snapshots(&dir);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[2].ends_with("-end.pb.gz"), "{names:?}");
    let seq = |n: &str| n[..6].parse::<u32>().unwrap();
    assert!(
        seq(&names[0]) > 3,
        "older snapshots were not removed: {names:?}"
    );
    assert!(names[..2].iter().all(|n| n.ends_with("-every.pb.gz")));
    // The end snapshot read the exited program's final table: alloclens snapshot of the
    // directory now gives the same estimates.
    let now = snapshot_json(&dir, &tmp.path().join("now.pb.gz"));
    let keep = site(&now, "keep");
    let end = dir.join("snapshots").join(&names[2]);
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw", "-sample_index=inuse_space"])
        .arg(&end)
        .output()
        .unwrap();
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let inuse_keep = keep["inuse_space"]["value"].as_f64().unwrap().round() as i64;
    let text = String::from_utf8_lossy(&raw.stdout);
    assert!(
        text.lines().any(|l| l
            .split(':')
            .next()
            .is_some_and(|v| v.split_whitespace().any(|x| x == inuse_keep.to_string()))),
        "keep's {inuse_keep} in-use bytes are not in the end snapshot:\n{text}"
    );
    // 3,000 x 4,000 B kept, sampled once per 4 KiB on average: within 5 standard errors.
    let se = keep["inuse_space"]["stderr"].as_f64().unwrap();
    assert!(
        (inuse_keep as f64 - 12_000_000.0).abs() <= 5.0 * se + 1.0,
        "{inuse_keep} ± {se}"
    );
}

#[test]
fn a_signal_to_alloclens_asks_for_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut watch = start_watch(&dir, &["--snapshot-on-signal", "usr2"]);
    // The handler is installed before the program starts: the signal is never alloclens's end.
    // SAFETY: kill has no memory preconditions.
    assert_eq!(unsafe { libc::kill(watch.id() as i32, libc::SIGUSR2) }, 0);
    testkit::wait_until(
        "a snapshot asked by SIGUSR2",
        Duration::from_secs(10),
        || snapshots(&dir).iter().any(|n| n.ends_with("-signal.pb.gz")),
    );
    drop(watch.stdin.take());
    assert!(watch.wait().unwrap().success());
    let names = snapshots(&dir);
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[1].ends_with("-end.pb.gz"), "{names:?}");
}

#[test]
fn triggers_need_the_profile_and_a_bad_signal_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let hold = testkit::program("hold");
    let out = alloclens()
        .args(["watch", "--snapshot-every", "1s", "-o"])
        .arg(tmp.path().join("a"))
        .arg("--")
        .arg(hold)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--profile"));
    let out = alloclens()
        .args(["watch", "--profile", "--snapshot-on-signal", "TERM", "-o"])
        .arg(tmp.path().join("b"))
        .arg("--")
        .arg(hold)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("INT and TERM end the watch"), "{err}");
}

/// A memory cgroup this test may make (v2's memory controller, or v1's hierarchy), or None.
fn memory_cgroup(name: &str, limit: u64) -> Option<(PathBuf, PathBuf)> {
    let v2 = Path::new("/sys/fs/cgroup");
    let unified = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| {
            std::fs::read_to_string(p.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "memory"))
        });
    if let Some(root) = unified {
        let dir = root.join(name);
        std::fs::create_dir(&dir).ok()?;
        std::fs::write(dir.join("memory.max"), limit.to_string()).ok()?;
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        return Some((dir.clone(), dir.join("cgroup.procs")));
    }
    let v1 = v2.join("memory");
    if !v1.join("memory.limit_in_bytes").exists() {
        return None;
    }
    let dir = v1.join(name);
    std::fs::create_dir(&dir).ok()?;
    std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string()).ok()?;
    let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), limit.to_string());
    Some((dir.clone(), dir.join("cgroup.procs")))
}

#[test]
fn an_oom_killed_process_leaves_its_last_state() {
    const LIMIT: u64 = 64 << 20;
    let name = format!("alloclens-test-oom-{}", std::process::id());
    let Some((cgroup, procs)) = memory_cgroup(&name, LIMIT) else {
        // A machine without a memory cgroup alloclens may make (a container): nothing to test.
        eprintln!(
            "skipped: an_oom_killed_process_leaves_its_last_state: no writable memory cgroup"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let agent_dir = tmp.path().join("agent");
    std::fs::create_dir(&agent_dir).unwrap();
    // keep: 4,000-byte blocks until the limit: malloc writes each block's header, so every
    // page is touched and charged.
    let script = format!(
        "echo $$ > '{}' && exec \"$0\" 0 64 0 64 0 100000000 4000",
        procs.display()
    );
    let status = Command::new("sh")
        .args(["-c", &script])
        .arg(testkit::program("sampled_sites"))
        .env("LD_PRELOAD", agent::library_path().unwrap())
        .env(agent::ENV_DIR, &agent_dir)
        .env("ALLOCLENS_PROFILE_BYTES", "65536")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    let _ = std::fs::remove_dir(&cgroup);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let snap = snapshot_json(&agent_dir, &tmp.path().join("oom.pb.gz"));
    assert_eq!(snap["snapshots"][0]["state"], "killed", "{snap:#}");
    let keep = site(&snap, "keep");
    let inuse = keep["inuse_space"]["value"].as_f64().unwrap();
    let se = keep["inuse_space"]["stderr"].as_f64().unwrap();
    // What it held when it was killed: most of the limit (the rest is the program, the agent,
    // the table's pages), never more.
    assert!(
        inuse + 5.0 * se >= LIMIT as f64 / 2.0 && inuse - 5.0 * se <= LIMIT as f64,
        "keep holds {inuse} ± {se} of a {LIMIT}-byte limit"
    );
    let _ = std::io::stderr().flush();
}
