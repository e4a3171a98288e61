//! `alloclens watch`, end to end: real programs, real allocators, real /proc, real attaches.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use testkit::{alloclens, wait_until};

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn samples(dir: &Path) -> Vec<csv::StringRecord> {
    let mut r = csv::Reader::from_path(dir.join("samples.csv")).unwrap();
    r.records().filter_map(Result::ok).collect()
}

/// The live bytes of every sample that has them (samples.csv's live_bytes column).
fn json_samples_live(dir: &Path) -> Vec<u64> {
    let mut r = csv::Reader::from_path(dir.join("samples.csv")).unwrap();
    let column = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "live_bytes")
        .unwrap();
    r.records()
        .filter_map(Result::ok)
        .filter_map(|row| row[column].parse().ok())
        .collect()
}

/// The allocator's statistics of a `--pid` process, as its attached agent read them last.
fn attached_stats(json: &Value) -> &Value {
    let p = &json["processes"][0]["snapshot"];
    assert_eq!(p["attached"], true, "{p}");
    &p["allocator"]
}

/// `watch --pid` on a process nobody started under alloclens, with no debugger on the machine's
/// PATH: /proc figures over time, glibc's statistics from the agent loaded into it (cross-checked
/// against the program's own count), and the process goes on unharmed: same output as an
/// unwatched run, same exit status.
#[test]
fn watch_pid_reads_proc_and_glibc_and_leaves_the_process_unharmed() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("steady");
    // 200 rounds of 50 ms: it outlives the watch on a loaded machine. The unwatched run goes on meanwhile.
    let reference = Command::new(prog)
        .arg("200")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    let out_path = tmp.path().join("out.txt");
    let mut child = Command::new(prog)
        .arg("200")
        .stdout(std::fs::File::create(&out_path).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let dir = tmp.path().join("w");
    // No gdb to be found: the attach needs none.
    let watched = alloclens()
        .env("PATH", "/nonexistent")
        .args(["watch", "--interval", "100ms", "--duration", "2s", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&watched.stderr);
    assert!(watched.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&watched.stdout);
    assert!(stdout.starts_with("verdict: "), "{stdout}");
    assert!(stderr.contains("without a debugger"), "{stderr}");

    // The process: unharmed.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    let reference = reference.wait_with_output().unwrap();
    assert_eq!(reference.status.code(), Some(3));
    assert_eq!(std::fs::read(&out_path).unwrap(), reference.stdout);

    // /proc over time.
    let rows = samples(&dir);
    assert!(rows.len() >= 3, "{} samples", rows.len());
    let json = read_json(&dir.join("watch.json"));
    assert_eq!(json["pid"], pid);
    assert_eq!(json["ending"], "duration");
    let last = &json["last"];
    let rss = last["rss"].as_u64().unwrap();
    let split: u64 = ["heap", "file", "stack", "other"]
        .iter()
        .map(|k| last[k].as_u64().unwrap())
        .sum();
    // status VmRSS against the smaps split, read a moment apart of a process that churns in place.
    assert!(rss.abs_diff(split) < 1 << 20, "rss {rss} split {split}");
    assert!(last["heap"].as_u64().unwrap() >= 4_096_000);

    // glibc's statistics from the attached agent, cross-checked against the program's count: in
    // use = its 4,096,000 bytes + chunk headers (8 B per block) + stdio's buffer + what loading
    // the agent itself took (dlopen's link map, the agent thread's start), at most.
    let attach = &json["attach"];
    assert!(attach["error"].is_null(), "{attach}");
    assert!(attach["borrowed_ms"].as_f64().unwrap() > 0.0, "{attach}");
    let stats = attached_stats(&json);
    assert_eq!(stats["allocator"], "glibc", "{stats}");
    let in_use = stats["handed_out"].as_u64().unwrap();
    assert!(
        (4_096_000..4_096_000 + 4000 * 16 + 64 * 1024).contains(&in_use),
        "in use {in_use}"
    );
    assert!(!stats["arenas"].as_array().unwrap().is_empty());
    // Every sample has them, not only two readings.
    let live: Vec<u64> = json_samples_live(&dir);
    assert!(
        live.len() >= 3 && live.iter().all(|&l| l >= 4_096_000),
        "{live:?}"
    );
    assert_eq!(json["verdict"]["class"], "stable", "{}", json["verdict"]);
}

/// Bad input: one line each, nothing left behind that claims to be results.
#[test]
fn watch_pid_bad_input_says_it_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = alloclens()
        .args(["watch", "--pid", "4194300", "-o"])
        .arg(tmp.path().join("w"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        "alloclens: error: no process 4194300: check the pid (ps -p 4194300)\n"
    );

    // A process that exits during the watch: said, and what was collected is kept. It ends once
    // two samples are in, not after a fixed time (a loaded machine started the watch late, a fast
    // one could end a short process before its second sample).
    let mut short = Command::new("sleep").arg("60").spawn().unwrap();
    let dir = tmp.path().join("gone");
    let watcher = alloclens()
        .args([
            "watch",
            "--no-attach",
            "--interval",
            "100ms",
            "--duration",
            "20s",
            "--pid",
        ])
        .arg(short.id().to_string())
        .arg("-o")
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let csv = dir.join("samples.csv");
    let sampled = testkit::poll_until(Duration::from_secs(15), || {
        std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 3)
    });
    short.kill().unwrap();
    short.wait().unwrap();
    let out = watcher.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(sampled, "no 2 samples in 15 s: {stderr}");
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("exited during the watch: the figures up to then are kept"),
        "{stderr}"
    );
    assert!(samples(&dir).len() >= 2);
    assert_eq!(read_json(&dir.join("watch.json"))["ending"], "exited");
}

/// `--pid` of a process whose main thread has called pthread_exit while another thread runs on
/// (16 MiB held): /proc/PID shows the zombie leader, which was refused as "permission denied";
/// the process is watched through its live thread, to a verdict, and the agent is loaded by it.
#[test]
fn watch_pid_of_a_process_whose_main_thread_exited() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(testkit::program("leader_exit"))
        .args(["16", "60"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut lines).unwrap();
    assert_eq!(&lines, b"allocated\nready\n");
    let pid = child.id();
    wait_until(
        "the main thread to be a zombie",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        },
    );
    let dir = tmp.path().join("w");
    let out = alloclens()
        .args(["watch", "--interval", "100ms", "--duration", "1s"])
        .arg("--pid")
        .arg(pid.to_string())
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    let running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(running, "the watched process must run on");
    let rows = samples(&dir);
    assert!(rows.len() >= 5, "{} samples", rows.len());
    let headers = csv::Reader::from_path(dir.join("samples.csv"))
        .unwrap()
        .headers()
        .unwrap()
        .clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    for row in &rows {
        assert_eq!(&row[column("processes")], "1");
        assert!(
            row[column("rss")].parse::<u64>().unwrap() >= 16 << 20,
            "{row:?}"
        );
        assert!(
            row[column("heap")].parse::<u64>().unwrap() >= 16 << 20,
            "{row:?}"
        );
    }
    let json = read_json(&dir.join("watch.json"));
    assert_eq!(json["verdict"]["class"], "stable", "{}", json["verdict"]);
    let in_use = attached_stats(&json)["handed_out"].as_u64().unwrap_or(0);
    assert!(in_use >= 16 << 20, "{in_use}");
}

/// kill -9 of alloclens: samples.csv stays readable, and the program runs on to its end.
#[test]
fn killing_alloclens_leaves_samples_and_the_program_running() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("steady");
    let dir = tmp.path().join("w");
    let out_path = tmp.path().join("out.txt");
    let mut watcher = alloclens()
        .args(["watch", "--interval", "100ms", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(prog)
        .arg("40")
        // The program inherits this stdout: a file, as a service's log would be.
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let csv = dir.join("samples.csv");
    wait_until("4 samples", Duration::from_secs(30), || {
        std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 5)
    });
    let children = std::fs::read_to_string(format!(
        "/proc/{}/task/{}/children",
        watcher.id(),
        watcher.id()
    ))
    .unwrap();
    let program: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    watcher.kill().unwrap(); // SIGKILL
    watcher.wait().unwrap();

    let rows = samples(&dir);
    assert!(rows.len() >= 4);
    // The first sample may come before the program made its 4 MB (it was taken 26 µs after the
    // start once in CI); every later one has them.
    for r in &rows[1..] {
        let rss: u64 = r[3].parse().unwrap();
        assert!(rss > 4_000_000, "{r:?}");
    }
    // watch.json written at the start says what was watched; its verdict is made when read.
    let json = read_json(&dir.join("watch.json"));
    assert!(json["ending"].is_null());
    assert!(json["command"][0].as_str().unwrap().ends_with("steady"));

    // The page of the killed watch: its verdict made from samples.csv, its charts drawn from it.
    testkit::succeeded(alloclens().arg("report").arg(&dir));
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("did not finish (alloclens was killed)"));
    assert!(page.contains("\"id\":\"watch-memory\""), "no memory chart");
    assert!(page.contains("\"id\":\"watch-split\""), "no split chart");

    // The program: alive after the kill, and it finishes its work.
    assert!(Path::new(&format!("/proc/{program}")).exists());
    wait_until("the program's last line", Duration::from_secs(60), || {
        std::fs::read_to_string(&out_path).is_ok_and(|t| t.ends_with("done\n"))
    });
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(text.lines().count(), 41);
}

/// An allocator without statistics of its own (tbbmalloc): one line, and the watch still gives the /proc
/// figures and the agent's live bytes (cross-checked against the program's own 4,096,000 bytes).
#[test]
fn allocator_without_statistics_is_said_in_one_line() {
    if !testkit::installed("tbbmalloc") {
        eprintln!("skipped: tbbmalloc is not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("steady");
    let dir = tmp.path().join("w");
    let out = alloclens()
        .args(["watch", "-a", "tbbmalloc", "--interval", "100ms", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(prog)
        .arg("20")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The command's own exit status.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("does not report the bytes it holds free"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("alloclens: warning: tbbmalloc does not report"));
    let json = read_json(&dir.join("watch.json"));
    assert_eq!(json["allocator"], "tbbmalloc");
    let last = &json["last"];
    assert!(last["free_resident"].is_null());
    let live = last["live_bytes"].as_u64().unwrap();
    // Its 4000 blocks of 1 KiB, plus stdio's buffer and what the C runtime holds (76 KiB seen).
    assert!(
        (4_096_000..4_096_000 + 128 * 1024).contains(&live),
        "live {live}"
    );
}

/// SIGTERM to alloclens ends the watch cleanly (summary, watch.json) and the program runs on.
#[test]
fn sigterm_ends_the_watch_with_its_summary_and_the_program_runs_on() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("steady");
    let dir = tmp.path().join("w");
    let out_path = tmp.path().join("out.txt");
    let summary_path = tmp.path().join("summary.txt");
    let mut watcher = alloclens()
        .args(["watch", "--interval", "100ms", "-o"])
        .arg(&dir)
        .arg("--")
        .arg(prog)
        .arg("60")
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&summary_path).unwrap())
        .spawn()
        .unwrap();
    let csv = dir.join("samples.csv");
    wait_until("3 samples", Duration::from_secs(30), || {
        std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 4)
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watcher.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = watcher.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let json = read_json(&dir.join("watch.json"));
    assert_eq!(json["ending"], "interrupted");
    assert_eq!(json["still_running"], true);
    assert!(json["verdict"]["class"].is_string());
    let program = json["root_pid"].as_u64().unwrap();
    assert!(Path::new(&format!("/proc/{program}")).exists());
    let stderr = std::fs::read_to_string(&summary_path).unwrap();
    assert!(stderr.contains("alloclens: results in"), "{stderr}");
    // The program shares the stdout file with the summary; it goes on to its last line.
    wait_until("the program's last line", Duration::from_secs(60), || {
        std::fs::read_to_string(&out_path).is_ok_and(|t| t.ends_with("done\n"))
    });
    let text = std::fs::read_to_string(&out_path).unwrap();
    assert!(text.contains("verdict: "), "{text}");
    assert!(text.contains("the program runs on (pid"), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("round ")).count(), 60);
}

/// The process's last agent snapshot (live bytes and the allocator's figures), from watch.json.
fn root_snapshot(json: &Value) -> &Value {
    let root = &json["root_pid"];
    json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| &p["pid"] == root)
        .map(|p| &p["snapshot"])
        .expect("the root process in watch.json")
}

/// The verdict's class, stdout + stderr, and watch.json of `alloclens watch ARGS -o DIR --
/// PROGRAM...` (stdout holds the program's output, then the summary). They go to files, not pipes:
/// a program still running after the watch would hold a pipe open. That program is then killed.
fn watch_verdict(dir: &Path, args: &[&str], program: &[&str]) -> (String, String, Value) {
    std::fs::create_dir_all(dir).unwrap();
    let out_path = dir.with_extension("out");
    let err_path = dir.with_extension("err");
    let status = alloclens()
        .arg("watch")
        .args(args)
        .arg("-o")
        .arg(dir)
        .arg("--")
        .args(program)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .status()
        .unwrap();
    let json = read_json(&dir.join("watch.json"));
    if json["still_running"] == true {
        let root = json["root_pid"].as_u64().unwrap() as i32;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(root),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let text = format!(
        "{}\n{}",
        std::fs::read_to_string(&out_path).unwrap(),
        std::fs::read_to_string(&err_path).unwrap()
    );
    assert!(status.code().is_some(), "alloclens was killed: {text}");
    let class = json["verdict"]["class"].as_str().unwrap().to_string();
    (class, text, json)
}

/// The last `live:` line of a workload (`live: t_ms=.. bytes=.. blocks=..`) as key -> value.
fn last_live_line(output: &str) -> std::collections::BTreeMap<String, u64> {
    let line = output
        .lines()
        .rfind(|l| l.starts_with("live: "))
        .expect("a live: line");
    line["live: ".len()..]
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// W1's `leak` workload is a leak under glibc and under jemalloc, and the agent's live bytes match
/// the workload's own count (within size-class rounding).
#[test]
fn leak_workload_is_a_leak_under_glibc_and_jemalloc() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = testkit::alloclens_exe();
    for allocator in ["glibc", "jemalloc"] {
        if !testkit::installed(allocator) {
            eprintln!("skipped {allocator}: not installed");
            continue;
        }
        let dir = tmp.path().join(allocator);
        let (class, text, json) = watch_verdict(
            &dir,
            &["-a", allocator, "--interval", "200ms"],
            &[
                &exe,
                "workload",
                "leak",
                "--duration-ms",
                "4000",
                "--leak-kb-per-s",
                "2048",
            ],
        );
        assert_eq!(class, "leak", "{allocator}: {text}");
        assert!(text.contains("verdict: leak"), "{text}");
        assert_eq!(json["allocator"], allocator, "{text}");
        // The agent's live bytes against the workload's own count, at its end.
        let own = last_live_line(&text);
        let live = root_snapshot(&json)["counters"]["live_bytes"]
            .as_u64()
            .unwrap();
        let requested = own["bytes"] + own.get("table_bytes").copied().unwrap_or(0);
        assert!(
            live >= own["bytes"] && live <= requested + requested / 4 + (1 << 20),
            "{allocator}: agent {live} B live, workload {own:?}"
        );
        // Live bytes grew by about what was leaked (2 MiB/s over the window).
        let trend = json["verdict"]["live"]["change"].as_f64().unwrap();
        let leaked = (own["leaked_200"] + own["leaked_3000"]) as f64; // bytes
        assert!(
            trend > 0.5 * leaked && trend < 1.5 * leaked,
            "{allocator}: live trend {trend} B, leaked {leaked} B"
        );
    }
}

/// W1's `cache` workload (Venice): under glibc RSS creeps while the live set stays flat
/// (fragmentation, or retention that the trim probe shows); under jemalloc with
/// dirty_decay_ms=0 RSS stays with the live set (stable). The watch ends while the cache holds its
/// values quietly, so the trim probe runs in a live process; the workload is stopped afterwards.
#[test]
fn cache_workload_is_fragmentation_or_retention_under_glibc_and_stable_under_jemalloc() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = testkit::alloclens_exe();
    let cases: [(&str, &[&str]); 2] = [
        ("glibc", &["fragmentation", "retention"]),
        ("jemalloc:dirty_decay_ms=0", &["stable"]),
    ];
    for (variant, expected) in cases {
        let allocator = variant.split(':').next().unwrap();
        if !testkit::installed(allocator) {
            eprintln!("skipped {variant}: not installed");
            continue;
        }
        let dir = tmp.path().join(allocator);
        let (class, text, json) = watch_verdict(
            &dir,
            &[
                "-a",
                variant,
                "--interval",
                "250ms",
                "--duration",
                "7s",
                "--trim-probe",
            ],
            &[
                &exe,
                "workload",
                "cache",
                "--duration-ms",
                "6000",
                "--hold-ms",
                "20000",
            ],
        );
        assert!(
            expected.contains(&class.as_str()),
            "{variant}: {class}: {text}"
        );
        assert_eq!(json["still_running"], true, "{text}");
        assert_eq!(json["trim"].as_array().unwrap().len(), 1, "{text}");
        // The live set stays flat at the capacity: the agent's count against the workload's own.
        let own = last_live_line(&text);
        let live = root_snapshot(&json)["counters"]["live_bytes"]
            .as_u64()
            .unwrap();
        assert!(
            live >= own["bytes"] && live <= own["bytes"] + own["bytes"] / 4 + (1 << 20),
            "{variant}: agent {live} B live, workload {own:?}"
        );
    }
}

/// `--pid --trim-probe` on the two waves: glibc's in-use bytes are the program's, malloc_trim(0)
/// (made by the attached agent's thread) gives back most of what glibc holds free, and the verdict
/// is retention.
#[test]
fn watch_pid_trim_probe_finds_retention_in_the_two_waves() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("twowaves");
    let mut child = Command::new(prog)
        .arg("30")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 5];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"held\n");
    let dir = tmp.path().join("w");
    let out = alloclens()
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "2s",
            "--trim-probe",
        ])
        .arg("--pid")
        .arg(child.id().to_string())
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = read_json(&dir.join("watch.json"));
    assert_eq!(json["verdict"]["class"], "retention", "{text}");
    assert!(text.contains("malloc_trim(0) returned"), "{text}");
    // in use: 12,500 kept blocks of 500 bytes (+ 8 B header each) and the 1.6 MB pointer array.
    let own = 12_500 * 500 + 200_000 * 8;
    let in_use = json["last"]["handed_out"].as_u64().unwrap();
    assert!(
        in_use >= own && in_use < own + 12_500 * 16 + (256 << 10),
        "in use {in_use}, the program's own {own}"
    );
    // glibc held ~90 MiB free (187,500 freed blocks); the trim gave most of it back.
    let free = json["last"]["free_resident"].as_u64().unwrap();
    assert!(free > 80 << 20, "free {free}");
    let trim = &json["trim"][0];
    assert_eq!(trim["call"], "malloc_trim(0)", "{trim}");
    let given = trim["rss_before"].as_u64().unwrap() - trim["rss_after"].as_u64().unwrap();
    assert!(given > 40 << 20, "trim gave back {given} B: {text}");
}

/// What one watch of the matrix gave: its exit code, stdout + stderr (the program's output and
/// the summary), watch.json when it could be written, and the samples kept.
struct Watched {
    code: Option<i32>,
    text: String,
    json: Value,
    rows: Vec<std::collections::BTreeMap<String, String>>,
}

impl Watched {
    fn class(&self) -> String {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix("verdict: "))
            .unwrap_or("(no verdict line)")
            .to_string()
    }

    /// The verdict's sentences (the summary's lines up to the remedy).
    fn verdict_text(&self) -> String {
        let start = self.text.find("verdict: ").unwrap_or(0);
        let rest = &self.text[start..];
        rest[..rest.find("\n\n").unwrap_or(rest.len())].to_string()
    }
}

/// `alloclens watch ARGS -o DIR [-- PROGRAM...]`, output to files beside DIR (a program running
/// on would hold a pipe open); `during` runs while the watch does.
fn watch_matrix(dir: &Path, args: &[&str], program: &[&str], during: impl FnOnce(u32)) -> Watched {
    watch_logged(dir, dir, args, program, during)
}

/// As [`watch_matrix`], the output in LOGS.out and LOGS.err.
fn watch_logged(
    dir: &Path,
    logs: &Path,
    args: &[&str],
    program: &[&str],
    during: impl FnOnce(u32),
) -> Watched {
    let out_path = logs.with_extension("out");
    let err_path = logs.with_extension("err");
    let mut cmd = alloclens();
    cmd.arg("watch").args(args).arg("-o").arg(dir);
    if !program.is_empty() {
        cmd.arg("--").args(program);
    }
    let mut child = cmd
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    during(child.id());
    let code = child.wait().unwrap().code();
    let text = format!(
        "{}\n{}",
        std::fs::read_to_string(&out_path).unwrap(),
        std::fs::read_to_string(&err_path).unwrap()
    );
    let json = std::fs::read(dir.join("watch.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    // Whole rows only (a full disk may have cut the last one).
    let rows = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(dir.join("samples.csv"))
        .map(|mut r| {
            let headers = r.headers().cloned().unwrap_or_default();
            r.records()
                .filter_map(Result::ok)
                .filter(|rec| rec.len() == headers.len())
                .map(|rec| {
                    headers
                        .iter()
                        .zip(rec.iter())
                        .map(|(h, v)| (h.to_string(), v.to_string()))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    Watched {
        code,
        text,
        json,
        rows,
    }
}

/// Checks shared by every case: no sample of an empty tree, and "fragmentation" said only when
/// it is the verdict.
fn common_checks(w: &Watched) -> Result<(), String> {
    if let Some(r) = w
        .rows
        .iter()
        .find(|r| r["processes"] == "0" || r["rss"] == "0")
    {
        return Err(format!("a sample of an empty tree: {r:?}"));
    }
    let text = w.verdict_text();
    if w.class() != "fragmentation"
        && (text.contains("Verdict: fragmentation") || text.contains(": fragmentation."))
    {
        return Err("fragmentation said beside another verdict".into());
    }
    Ok(())
}

fn expect_class(w: &Watched, class: &str) -> Result<(), String> {
    common_checks(w)?;
    if w.class() != class {
        return Err(format!("{} instead of {class}", w.class()));
    }
    Ok(())
}

fn expect_text(w: &Watched, what: &str) -> Result<(), String> {
    if !w.text.contains(what) {
        return Err(format!("no '{what}'"));
    }
    Ok(())
}

/// A running program for `--pid`, killed when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The verdict over real processes: each case gives its right class, or `undetermined` with its
/// reason, never a confident wrong one (issue 24). Cases run three at a time.
#[test]
fn verdict_matrix_over_real_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path();
    let m = testkit::program("matrix").display().to_string();
    let ms = testkit::program("matrix_static").display().to_string();
    let steady = testkit::program("steady").display().to_string();
    let w100 = ["--interval", "100ms"];
    type Check = Box<dyn Fn(&Path) -> Result<(), String> + Send + Sync>;
    let mut cases: Vec<(&str, Check)> = Vec::new();
    let (m1, ms1, st) = (m.clone(), ms.clone(), steady.clone());
    cases.push((
        "leak",
        Box::new(move |d| {
            expect_class(
                &watch_matrix(d, &w100, &[&m1, "leak", "3000"], |_| {}),
                "leak",
            )
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "fragmentation",
        Box::new(move |d| {
            let w = watch_matrix(d, &w100, &[&m1, "frag", "3000"], |_| {});
            expect_class(&w, "fragmentation")?;
            expect_text(&w, "and the allocator's free memory with it")?;
            // The free memory quoted is the window's last sample's (the last with the agent's
            // figures), not the snapshot taken at exit after the program freed everything.
            let last = w
                .rows
                .iter()
                .rev()
                .find(|r| !r["free_resident"].is_empty())
                .ok_or("no sample with the allocator's figures")?;
            let (free, used): (f64, f64) = (
                last["free_resident"].parse().unwrap(),
                last["handed_out"].parse().unwrap(),
            );
            expect_text(
                &w,
                &format!("({:.0} % of the heap)", 100.0 * free / (free + used)),
            )
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "retention",
        Box::new(move |d| {
            expect_class(
                &watch_matrix(d, &w100, &[&m1, "retain", "3000"], |_| {}),
                "retention",
            )
        }),
    ));
    cases.push((
        "stable",
        Box::new(move |d| expect_class(&watch_matrix(d, &w100, &[&st, "40"], |_| {}), "stable")),
    ));
    let m1 = m.clone();
    cases.push((
        "private mmap growth",
        Box::new(move |d| {
            let w = watch_matrix(d, &w100, &[&m1, "mmap", "3000"], |_| {});
            expect_class(&w, "outside-heap")?;
            expect_text(&w, "in private anonymous mappings while live bytes")
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "shared memory growth",
        Box::new(move |d| {
            let w = watch_matrix(d, &w100, &[&m1, "shm", "3000"], |_| {});
            expect_class(&w, "outside-heap")?;
            expect_text(&w, "but the heap does not")
        }),
    ));
    cases.push((
        "static leak",
        Box::new(move |d| {
            let w = watch_matrix(d, &w100, &[&ms1, "leak", "2000"], |_| {});
            expect_class(&w, "undetermined")?;
            expect_text(&w, "live bytes were not measured (process")?;
            expect_text(&w, "is statically linked")?;
            expect_text(&w, "link it dynamically")
        }),
    ));
    let ms1 = ms.clone();
    cases.push((
        "static leak behind exec",
        Box::new(move |d| {
            let line = format!("exec {ms1} leak 2000");
            let w = watch_matrix(d, &w100, &["sh", "-c", &line], |_| {});
            expect_class(&w, "undetermined")?;
            expect_text(&w, "is statically linked")
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "leak behind exec",
        Box::new(move |d| {
            let line = format!("exec {m1} leak 2000");
            expect_class(
                &watch_matrix(d, &w100, &["sh", "-c", &line], |_| {}),
                "leak",
            )
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "LD_PRELOAD cleared",
        Box::new(move |d| {
            let w = watch_matrix(
                d,
                &w100,
                &["env", "-u", "LD_PRELOAD", &m1, "leak", "2000"],
                |_| {},
            );
            expect_class(&w, "undetermined")?;
            expect_text(&w, "runs without the agent in LD_PRELOAD")?;
            expect_text(&w, "alloclens watch --pid PID")
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "shorter than the interval",
        Box::new(move |d| {
            let w = watch_matrix(d, &["--interval", "1s"], &[&m1, "leak", "50"], |_| {});
            expect_class(&w, "undetermined")?;
            expect_text(&w, "too few to tell a start-up fill from growth")?;
            if w.text.contains("the agent wrote no snapshot") {
                return Err("its final snapshot was not used".into());
            }
            if w.json["processes"][0]["snapshot"]["final_"] != true {
                return Err(format!("no final snapshot: {}", w.json["processes"]));
            }
            Ok(())
        }),
    ));
    cases.push((
        // Two waves allocated, the first freed, gone in half a second: four samples (eight would
        // take a run slowed down 2.5 times), whose live bytes' trend was called a leak.
        "allocates, frees half and exits within a few samples",
        Box::new(move |d| {
            let exe = testkit::alloclens_exe();
            let w = watch_matrix(
                d,
                &["--interval", "150ms"],
                &[
                    &exe,
                    "workload",
                    "twowave",
                    "--wave-mb",
                    "8",
                    "--hold-ms",
                    "200",
                ],
                |_| {},
            );
            expect_class(&w, "undetermined")?;
            expect_text(&w, "too few to tell a start-up fill from growth")
        }),
    ));
    let m1 = m.clone();
    cases.push((
        "disk fills",
        Box::new(move |d| {
            let Some(disk) = testkit::SmallDisk::mount("2m") else {
                return Ok(());
            };
            let dir = disk.path().join("w");
            let csv = dir.join("samples.csv");
            // The output beside `d`, outside the small disk.
            let w = watch_logged(&dir, d, &w100, &[&m1, "leak", "4000"], |_| {
                wait_until("6 samples", Duration::from_secs(30), || {
                    std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 7)
                });
                let mut f = std::fs::File::create(disk.path().join("filler")).unwrap();
                while std::io::Write::write_all(&mut f, &[0u8; 65536]).is_ok() {}
            });
            if w.code != Some(1) {
                return Err(format!("exit status {:?} with files incomplete", w.code));
            }
            expect_text(&w, "were no longer renewed after")?;
            expect_text(&w, "not carried forward")?;
            // A write that failed leaves no temporary file behind.
            let left: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".tmp"))
                .collect();
            if !left.is_empty() {
                return Err(format!("temporary files left: {left:?}"));
            }
            common_checks(&w)?;
            match w.class().as_str() {
                "leak" | "undetermined" => Ok(()),
                c => Err(format!("{c} from frozen figures")),
            }
        }),
    ));
    {
        for (name, what, class) in [
            ("--pid leak", "leak", "leak"),
            ("--pid fragmentation", "frag", "fragmentation"),
        ] {
            let m1 = m.clone();
            cases.push((
                name,
                Box::new(move |d| {
                    let child = Command::new(&m1)
                        .args([what, "20000", "250"])
                        .stdout(Stdio::null())
                        .spawn()
                        .unwrap();
                    let pid = child.id().to_string();
                    std::thread::sleep(Duration::from_millis(300));
                    let running = Running(child);
                    let w = watch_matrix(
                        d,
                        &["--interval", "100ms", "--duration", "2s", "--pid", &pid],
                        &[],
                        |_| {},
                    );
                    drop(running);
                    expect_class(&w, class)?;
                    expect_text(&w, "in-use bytes (the allocator's statistics)")
                }),
            ));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, check)) = cases.get(i) else {
                    break;
                };
                let dir = work.join(format!("case{i}"));
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&dir)))
                    .unwrap_or_else(|_| Err("panicked".into()));
                if let Err(e) = result {
                    let text = std::fs::read_to_string(dir.with_extension("out"))
                        .unwrap_or_default()
                        + &std::fs::read_to_string(dir.with_extension("err")).unwrap_or_default();
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{name}: {e}\n{text}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n----\n"));
}

/// A watch stopped for a while (SIGSTOP, a suspended laptop) skips the ticks it missed instead of
/// taking them in a burst, and the summary says how far apart the samples really are.
#[test]
fn missed_ticks_are_skipped_not_taken_in_a_burst() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("steady");
    let dir = tmp.path().join("w");
    let csv = dir.join("samples.csv");
    let w = watch_matrix(
        &dir,
        &["--interval", "50ms"],
        &[prog.to_str().unwrap(), "50"],
        |watcher| {
            wait_until("5 samples", Duration::from_secs(30), || {
                std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 6)
            });
            let pid = nix::unistd::Pid::from_raw(watcher as i32);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
            std::thread::sleep(Duration::from_millis(1500));
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
        },
    );
    assert_eq!(w.code, Some(3), "{}", w.text);
    let t: Vec<f64> = w.rows.iter().map(|r| r["t_s"].parse().unwrap()).collect();
    // The 30 ticks missed during the stop are not made up: at most 2 samples in any 50 ms.
    for (i, a) in t.iter().enumerate() {
        let within = t[i..].iter().take_while(|b| **b - a < 0.05).count();
        assert!(within <= 2, "{within} samples from {a} s on: {t:?}");
    }
    let line = w
        .text
        .lines()
        .find(|l| l.contains(" samples every "))
        .unwrap();
    assert!(
        line.contains("every 0.05 s asked,")
            && line.contains("ticks skipped: alloclens was stopped"),
        "{line}"
    );
}

/// What `watch --pid` cannot attach to is said in one line naming the fix, before the process is
/// touched, and the watch goes on with /proc figures: a stopped process, a static program, and a
/// process another alloclens is attached to.
#[test]
fn watch_pid_says_why_it_cannot_attach_and_watches_from_proc() {
    let tmp = tempfile::tempdir().unwrap();
    let watch_pid = |pid: u32, name: &str| {
        let out = alloclens()
            .args(["watch", "--interval", "100ms", "--duration", "1s", "--pid"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(tmp.path().join(name))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert!(tmp.path().join(name).join("samples.csv").exists());
        stderr
    };
    // Stopped: left stopped (attaching would not resume it).
    let mut stopped = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = stopped.id();
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    wait_until("the process to stop", Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") T "))
    });
    let stderr = watch_pid(pid, "stopped");
    assert!(
        stderr.contains(&format!(
            "process {pid} is stopped (state T): resume it first (kill -CONT {pid})"
        )),
        "{stderr}"
    );
    assert!(std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap()
        .contains(") T "));
    stopped.kill().unwrap();
    stopped.wait().unwrap();

    // Static: nothing can be loaded.
    let mut fixed = Command::new(testkit::program("matrix_static"))
        .args(["mmap", "60000", "1000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = watch_pid(fixed.id(), "static");
    assert!(stderr.contains("is statically linked"), "{stderr}");
    fixed.kill().unwrap();
    fixed.wait().unwrap();

    // Two alloclens at once: the second is refused, the first keeps its agent.
    let mut busy = Command::new(testkit::program("busy_threads"))
        .arg("2")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = busy.id();
    let first = alloclens()
        .args(["watch", "--interval", "100ms", "--duration", "4s", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(tmp.path().join("first"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let csv = tmp.path().join("first").join("samples.csv");
    wait_until("the first watch's samples", Duration::from_secs(20), || {
        std::fs::read_to_string(&csv).is_ok_and(|t| t.lines().count() >= 2)
    });
    let stderr = watch_pid(pid, "second");
    assert!(
        stderr.contains(&format!("another alloclens is attached to process {pid}")),
        "{stderr}"
    );
    let first = first.wait_with_output().unwrap();
    let first_err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{first_err}");
    assert!(first_err.contains("without a debugger"), "{first_err}");
    drop(busy.stdin.take());
    assert_eq!(busy.wait().unwrap().code(), Some(0));
}
