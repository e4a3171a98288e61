//! `alloclens workload NAME`: the real binary, real processes, real allocators (LD_PRELOAD).

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

use assert_cmd::cargo::cargo_bin;
use predicates::prelude::*;

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

fn workload(args: &[&str]) -> Command {
    let mut cmd = Command::new(cargo_bin("alloclens"));
    cmd.arg("workload").args(args);
    // The glibc runs must not inherit an allocator from the environment.
    cmd.env_remove("LD_PRELOAD").env_remove("MALLOC_CONF");
    cmd
}

fn run_ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().expect("alloclens starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The rate of the last line, which must be `throughput: <rate> <unit>/s`.
fn throughput(stdout: &str, unit: &str) -> f64 {
    let last = stdout.lines().last().unwrap_or_default();
    let rest = last
        .strip_prefix("throughput: ")
        .and_then(|r| r.strip_suffix(&format!(" {unit}/s")))
        .unwrap_or_else(|| panic!("last line is not a {unit} throughput line: {last:?}"));
    rest.parse().expect("a number")
}

fn done_field<'a>(stdout: &'a str, key: &str) -> &'a str {
    let done = stdout
        .lines()
        .find(|l| l.starts_with("done: "))
        .expect("a done: line");
    done.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {done:?}"))
}

#[test]
fn events_prints_a_marker_per_event_and_a_throughput() {
    let out = run_ok(&mut workload(&[
        "events",
        "--events",
        "15",
        "--objects",
        "200",
    ]));
    let events: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("event "))
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(events, (1..=15).collect::<Vec<_>>());
    assert!(throughput(&out, "events") > 0.0);
}

#[test]
fn same_seed_same_allocation_sequence() {
    let args = |seed: &'static str| {
        [
            "events",
            "--events",
            "8",
            "--objects",
            "300",
            "--seed",
            seed,
        ]
    };
    let a = run_ok(&mut workload(&args("7")));
    let b = run_ok(&mut workload(&args("7")));
    let c = run_ok(&mut workload(&args("8")));
    assert_eq!(done_field(&a, "checksum"), done_field(&b, "checksum"));
    assert_eq!(
        done_field(&a, "allocator_calls"),
        done_field(&b, "allocator_calls")
    );
    assert_ne!(done_field(&a, "checksum"), done_field(&c, "checksum"));
}

#[test]
fn thread_and_churn_workloads_report_their_rates() {
    let x = run_ok(&mut workload(&[
        "xthread",
        "--threads",
        "3",
        "--objects",
        "20000",
    ]));
    assert!(throughput(&x, "objects") > 0.0);
    assert_eq!(done_field(&x, "ops"), "60000");
    let c = run_ok(&mut workload(&[
        "churn",
        "--ops",
        "50000",
        "--threads",
        "2",
    ]));
    assert!(throughput(&c, "ops") > 0.0);
    let r = run_ok(&mut workload(&[
        "realloc",
        "--appends",
        "30000",
        "--growth",
        "doubling",
    ]));
    assert!(throughput(&r, "appends") > 0.0);
}

/// Lines `<prefix><index> ... pid <pid> ...` as (index, pid).
fn index_and_pid(stdout: &str, prefix: &str) -> Vec<(u32, u32)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .filter(|rest| rest.contains(" pid "))
        .map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let pid_at = words.iter().position(|w| *w == "pid").unwrap() + 1;
            (words[0].parse().unwrap(), words[pid_at].parse().unwrap())
        })
        .collect()
}

#[test]
fn forkworkers_workers_are_separate_processes_sharing_the_parents_pages() {
    let child = workload(&[
        "forkworkers",
        "--workers",
        "3",
        "--events",
        "4",
        "--objects",
        "100",
        "--shared-mb",
        "48",
        "--report-rss",
    ])
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let parent = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");

    let workers = index_and_pid(&stdout, "worker ");
    let indices: BTreeSet<u32> = workers.iter().map(|w| w.0).collect();
    let pids: BTreeSet<u32> = workers.iter().map(|w| w.1).collect();
    assert_eq!(indices, (0..3).collect());
    assert_eq!(pids.len(), 3, "{workers:?}");
    assert!(!pids.contains(&parent));
    let event_lines = stdout
        .lines()
        .filter(|l| l.starts_with("worker ") && l.contains(" event "))
        .count();
    assert_eq!(event_lines, 3 * 4);
    assert_eq!(done_field(&stdout, "ops"), "12");

    // 48 MiB written by the parent and shared by 4 processes: PSS far below RSS in every worker.
    for l in stdout.lines().filter(|l| l.contains(" rss_kb=")) {
        let kb = |key: &str| -> f64 {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key))
                .unwrap()
                .parse()
                .unwrap()
        };
        let (rss, pss) = (kb("rss_kb="), kb("pss_kb="));
        assert!(rss > 40_000.0, "{l}");
        assert!(pss < 0.75 * rss, "worker pages are not shared: {l}");
    }
    assert_eq!(stdout.lines().filter(|l| l.contains(" rss_kb=")).count(), 3);
}

#[test]
fn tree_runs_every_process_including_grandchildren() {
    let child = workload(&["tree", "--procs", "6", "--mb", "2", "--seconds", "0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let root = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let procs = index_and_pid(&stdout, "tree: process ");
    let indices: BTreeSet<u32> = procs.iter().map(|p| p.0).collect();
    let pids: BTreeSet<u32> = procs.iter().map(|p| p.1).collect();
    assert_eq!(indices, (0..6).collect());
    assert_eq!(pids.len(), 6);
    assert!(procs.contains(&(0, root)), "process 0 is the one started");
}

/// VmRSS after freeing wave A (at the end of the hold), over the peak after wave B.
fn twowave_retention(cmd: &mut Command) -> f64 {
    let out = run_ok(cmd);
    let rss = |phase: &str| -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("vmrss: {phase} ")))
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no vmrss for {phase} in:\n{out}"))
            .parse()
            .unwrap()
    };
    rss("end") / rss("wave-b")
}

#[test]
fn twowave_glibc_keeps_wave_a_while_jemalloc_with_decay_0_returns_it() {
    let args = [
        "twowave",
        "--wave-mb",
        "32",
        "--hold-ms",
        "200",
        "--report-rss",
    ];
    let glibc = twowave_retention(&mut workload(&args));
    // glibc cannot trim below wave B: almost everything stays resident.
    assert!(glibc > 0.85, "glibc retention {glibc:.2}");
    testkit::require!(allocator "jemalloc");
    let jemalloc = twowave_retention(
        workload(&args)
            .env("LD_PRELOAD", JEMALLOC)
            .env("MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0"),
    );
    // Wave A is half of the peak's heap: purging it must show as a clear drop.
    assert!(
        jemalloc < glibc - 0.25,
        "jemalloc retention {jemalloc:.2} vs glibc {glibc:.2}"
    );
}

#[test]
fn bad_flags_are_clap_errors() {
    assert_cmd::Command::new(cargo_bin("alloclens"))
        .args(["workload", "events", "--events", "many"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("invalid value"));
    assert_cmd::Command::new(cargo_bin("alloclens"))
        .args(["workload", "nosuch"])
        .assert()
        .failure();
}

#[test]
fn invalid_options_are_one_line_errors() {
    assert_cmd::Command::new(cargo_bin("alloclens"))
        .args(["workload", "twowave", "--min-size", "600"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("min_size").and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn running_out_of_memory_is_reported_not_a_panic() {
    let mut cmd = workload(&["twowave", "--wave-mb", "512", "--hold-ms", "0"]);
    // SAFETY: setrlimit is async-signal-safe; it caps the child's address space at 256 MiB.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256 << 20,
                rlim_max: 256 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("out of memory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
