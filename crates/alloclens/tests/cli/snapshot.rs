//! `alloclens snapshot` of a real program under the real agent (its profile table,
//! shim/agent/profile.c): a live process by pid, its directory after it exited and after it was
//! killed, the pprof file read back by `go tool pprof -raw`, and the refusals.
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use testkit::alloclens;

/// Mean bytes between samples: small, so the test's sites are sampled many times.
const SAMPLE_BYTES: &str = "4096";

/// `sampled_sites` under the agent with its sampler on, its tables in `dir`, stopped after its
/// allocations (churn 12,000 x 64 B freed at once; big 20 x 2 MiB of which 5 kept; keep 4,000 x
/// 4,000 B kept) until its standard input closes.
fn start(dir: &Path) -> Child {
    start_keeping(dir, 4000)
}

fn start_keeping(dir: &Path, keep: u32) -> Child {
    let exe = testkit::program("sampled_sites");
    let mut cmd = Command::new(exe);
    let keep = keep.to_string();
    cmd.args(["12000", "64", "20", "2097152", "5", &keep, "4000", "wait"])
        .env("LD_PRELOAD", agent::library_path().unwrap())
        .env(agent::ENV_DIR, dir)
        .env("ALLOCLENS_PROFILE_BYTES", SAMPLE_BYTES)
        .stdin(Stdio::piped());
    testkit::spawn_ready(&mut cmd, "ready\n").0
}

/// `alloclens snapshot ARGS --json -o PROFILE`'s JSON.
fn snapshot_json(target: &str, profile: &Path) -> Value {
    let out = alloclens()
        .args(["snapshot", target, "--json", "-o"])
        .arg(profile)
        .ok();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The stack whose site is `function`.
fn site<'a>(snapshot: &'a Value, function: &str) -> &'a Value {
    snapshot["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"].as_str().is_some_and(|x| x.starts_with(function)))
        .unwrap_or_else(|| panic!("no stack of {function}: {snapshot:#}"))
}

/// Sums of the values of `go tool pprof -raw`'s samples (alloc_objects, alloc_space,
/// inuse_objects, inuse_space).
fn pprof_totals(profile: &Path) -> [i64; 4] {
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(profile)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8(out.stdout).unwrap();
    let samples = raw.split("Samples:").nth(1).unwrap();
    let samples = samples.split("Locations").next().unwrap();
    let mut totals = [0i64; 4];
    for line in samples.lines().skip(2) {
        let Some((values, _)) = line.split_once(':') else {
            continue;
        };
        let values: Vec<i64> = values
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if values.len() == 4 {
            for (t, v) in totals.iter_mut().zip(values) {
                *t += v;
            }
        }
    }
    totals
}

/// The JSON's per-stack values rounded as the profile stores them, summed.
fn json_totals(json: &Value) -> [i64; 4] {
    let mut totals = [0i64; 4];
    for s in json["snapshots"].as_array().unwrap() {
        for st in s["stacks"].as_array().unwrap() {
            let keys = [
                "alloc_objects",
                "alloc_space",
                "inuse_objects",
                "inuse_space",
            ];
            for (t, k) in totals.iter_mut().zip(keys) {
                *t += st[k]["value"].as_f64().unwrap().round() as i64;
            }
        }
    }
    totals
}

#[test]
fn a_live_process_and_its_directory_after_exit() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path());
    let profile = dir.path().join("live.pb.gz");
    let json = snapshot_json(&child.id().to_string(), &profile);
    let s = &json["snapshots"][0];
    assert_eq!(s["state"], "running");
    assert_eq!(s["pid"], child.id());
    assert_eq!(s["sample_bytes"], 4096);
    // 2 MiB blocks are always sampled: the 5 kept are exact, with no error.
    let big = site(s, "big");
    assert_eq!(big["inuse_objects"]["value"], 5.0);
    assert_eq!(big["inuse_space"]["value"], (5u64 << 21) as f64);
    assert_eq!(big["inuse_space"]["stderr"], 0.0);
    // keep's 16 MB, estimated within a few standard errors; churn's blocks are all freed.
    let keep = &site(s, "keep")["inuse_space"];
    let (value, stderr) = (
        keep["value"].as_f64().unwrap(),
        keep["stderr"].as_f64().unwrap(),
    );
    assert!(stderr > 0.0);
    assert!((value - 16e6).abs() < 5.0 * stderr, "{value} ± {stderr}");
    assert_eq!(site(s, "churn")["inuse_space"]["value"], 0.0);
    assert!(site(s, "churn")["alloc_objects"]["value"].as_f64().unwrap() > 1000.0);
    // pprof reads the file; its totals are the JSON's.
    assert_eq!(pprof_totals(&profile), json_totals(&json));

    // After the exit, the directory's table holds the final state.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let after = snapshot_json(dir.path().to_str().unwrap(), &dir.path().join("exit.pb.gz"));
    let s = &after["snapshots"][0];
    assert_eq!(s["state"], "exited");
    assert_eq!(site(s, "big")["inuse_space"]["value"], (5u64 << 21) as f64);

    // The text: the top site (keep's 16 MB, more than big's 10 MiB) alone, the totals against
    // the agent's count.
    let out = alloclens()
        .args(["snapshot", "--top", "1", "-o"])
        .arg(dir.path().join("text.pb.gz"))
        .arg(dir.path())
        .ok();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(sampled_sites.c:"))
        .collect();
    assert!(
        rows.len() == 1 && rows[0].contains("keep (sampled_sites.c:"),
        "{text}"
    );
    assert!(text.contains("the agent's exact count"), "{text}");
}

/// A process killed with SIGKILL leaves its table: a snapshot of its directory reads its last
/// state, and says it did not exit. The default file name is numbered rather than written over
/// a file that is there.
#[test]
fn a_killed_process_leaves_its_last_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path());
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let json = snapshot_json(dir.path().to_str().unwrap(), &dir.path().join("k.pb.gz"));
    let s = &json["snapshots"][0];
    assert_eq!(s["state"], "killed");
    assert_eq!(site(s, "big")["inuse_objects"]["value"], 5.0);

    let cwd = tempfile::tempdir().unwrap();
    let taken = cwd
        .path()
        .join(format!("alloclens.sampled_sites.{pid}.snapshot.pb.gz"));
    std::fs::write(&taken, "not ours").unwrap();
    alloclens()
        .current_dir(cwd.path())
        .arg("snapshot")
        .arg(dir.path())
        .ok();
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "not ours");
    let numbered = cwd
        .path()
        .join(format!("alloclens.sampled_sites.{pid}.snapshot.1.pb.gz"));
    assert!(profiles::pprof::read(&std::fs::read(numbered).unwrap()).is_ok());
}

/// A process without the agent, a number that is no process, a file that is no table: one line
/// each, naming the fix.
#[test]
fn what_has_no_table_is_refused_in_one_line() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let out = alloclens()
        .args(["snapshot", &sleeper.id().to_string()])
        .fails();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("keeps no heap profile table") && err.contains("watch --profile"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("1-0.prof");
    std::fs::File::create(&junk)
        .unwrap()
        .write_all(&[7; 5000])
        .unwrap();
    let out = alloclens().arg("snapshot").arg(&junk).fails();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1-0.prof") && err.contains("no ALPROF01 magic"),
        "{err}"
    );
}

/// Two runs, the second keeping 4,000 more blocks of 4,000 bytes: diff finds keep's 16 MB growth
/// (within 5 standard errors, marked) though the runs' addresses differ, big's none; its pprof
/// of B - A is read by pprof, its totals the rows' growth.
#[test]
fn diff_of_two_snapshots_finds_the_growing_site() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let mut profiles = Vec::new();
    for (name, keep) in [("a", 2000), ("b", 6000)] {
        let run = dir.path().join(name);
        std::fs::create_dir(&run).unwrap();
        let mut child = start_keeping(&run, keep);
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        let profile = dir.path().join(format!("{name}.pb.gz"));
        snapshot_json(run.to_str().unwrap(), &profile);
        profiles.push(profile);
    }
    let growth = dir.path().join("growth.pb.gz");
    let out = alloclens()
        .arg("diff")
        .args(&profiles)
        .arg("--json")
        .arg("-o")
        .arg(&growth)
        .ok();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let row = |f: &str| {
        rows.iter()
            .find(|r| r["site"].as_str().unwrap().starts_with(f))
            .unwrap_or_else(|| panic!("no {f}: {json:#}"))
    };
    let keep = &row("keep")["inuse_space"];
    let (g, se) = (
        keep["growth"].as_f64().unwrap(),
        keep["stderr"].as_f64().unwrap(),
    );
    assert!((g - 16e6).abs() < 5.0 * se, "{g} ± {se}");
    assert_eq!(
        rows[0]["site"],
        row("keep")["site"],
        "the largest growth first"
    );
    assert_eq!(row("big")["inuse_space"]["growth"], 0.0);
    let total: f64 = rows
        .iter()
        .map(|r| r["inuse_space"]["growth"].as_f64().unwrap())
        .sum();
    assert!((pprof_totals(&growth)[3] as f64 - total).abs() <= rows.len() as f64);

    let text = alloclens().arg("diff").args(&profiles).ok_stdout();
    let first = text.lines().nth(1).unwrap();
    assert!(
        first.contains("keep (sampled_sites.c:") && first.ends_with('*'),
        "{text}"
    );
}

/// A directory with the tables of several processes gives one profile, each sample labelled
/// with its process: here two runs of sampled_sites started by one shell (which has its own).
#[test]
fn the_processes_of_a_directory_are_one_profile_labelled_by_pid() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("sampled_sites");
    let run = format!("{} 100 64 3 2097152 3 10 4000", exe.display());
    let status = Command::new("sh")
        .args(["-c", &format!("{run} & {run}; wait")])
        .env("LD_PRELOAD", agent::library_path().unwrap())
        .env(agent::ENV_DIR, dir.path())
        .env("ALLOCLENS_PROFILE_BYTES", SAMPLE_BYTES)
        .status()
        .unwrap();
    assert!(status.success());
    let profile = dir.path().join("all.pb.gz");
    let json = snapshot_json(dir.path().to_str().unwrap(), &profile);
    let runs: Vec<u64> = json["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["exe"].as_str().unwrap().ends_with("/sampled_sites"))
        .inspect(|s| assert_eq!(site(s, "big")["inuse_objects"]["value"], 3.0))
        .map(|s| s["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{json:#}");
    let p = profiles::pprof::read(&std::fs::read(&profile).unwrap()).unwrap();
    let pid_key = p.string_table.iter().position(|s| s == "pid").unwrap() as i64;
    for pid in runs {
        let held: i64 = p
            .sample
            .iter()
            .filter(|s| {
                s.label
                    .iter()
                    .any(|l| l.key == pid_key && l.num == pid as i64)
            })
            .map(|s| s.value[3])
            .sum();
        assert!(held >= 3 << 21, "pid {pid} holds its 3 x 2 MiB: {held}");
    }
}
