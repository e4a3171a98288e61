//! `alloclens watch` and the user's files and programs: --force removes only the watch's own files,
//! a command that cannot start leaves no directory, a program may still enter a user namespace,
//! a damaged samples.csv is named by `report`, and the refusals name what to do instead.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use testkit::alloclens;

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn watch(dir: &Path, args: &[&str], program: &[&str]) -> Output {
    alloclens()
        .arg("watch")
        .args(args)
        .arg("-o")
        .arg(dir)
        .arg("--")
        .args(program)
        .output()
        .unwrap()
}

/// The one `alloclens: error:` line of a refused command (and that it is the only line).
fn one_error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("alloclens: error: "), "{stderr}");
    stderr
}

/// A finished watch of a short dynamic program, with its agent's snapshot in agent/.
fn short_watch(dir: &Path) {
    let out = watch(dir, &["--interval", "100ms"], &["sleep", "0.3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--force` replaces an earlier watch's files, and only those: a file of the user's in agent/
/// (or beside watch.json) makes it refuse, and the file and the earlier watch stay as they were.
#[test]
fn force_removes_only_the_watchs_own_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    short_watch(&dir);
    let agent = dir.join("agent");
    let snaps: Vec<String> = std::fs::read_dir(&agent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        snaps.iter().any(|n| n.ends_with(".snap")),
        "the agent wrote a snapshot: {snaps:?}"
    );
    let before = std::fs::read(dir.join("watch.json")).unwrap();

    for mine in [agent.join("notes.txt"), agent.join("42.snap.bak")] {
        std::fs::write(&mine, "the user's own notes\n").unwrap();
        let out = watch(&dir, &["--force", "--interval", "100ms"], &["true"]);
        let line = one_error_line(&out);
        let name = mine.file_name().unwrap().to_string_lossy();
        assert!(line.contains(&format!("agent/{name}")), "{line}");
        assert!(line.contains("did not write"), "{line}");
        assert_eq!(
            std::fs::read_to_string(&mine).unwrap(),
            "the user's own notes\n"
        );
        assert_eq!(std::fs::read(dir.join("watch.json")).unwrap(), before);
        std::fs::remove_file(&mine).unwrap();
    }
    // A directory of the user's in agent/ too.
    std::fs::create_dir(agent.join("keep")).unwrap();
    let line = one_error_line(&watch(&dir, &["--force"], &["true"]));
    assert!(line.contains("agent/keep"), "{line}");
    assert!(agent.join("keep").is_dir());
    std::fs::remove_dir(agent.join("keep")).unwrap();

    // Only the watch's files left (with the one a kill while thinning leaves): --force replaces them.
    std::fs::write(dir.join("samples.csv.tmp"), "t_s\n").unwrap();
    let out = watch(&dir, &["--force", "--interval", "100ms"], &["true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(std::fs::read(dir.join("watch.json")).unwrap(), before);
    assert!(!dir.join("samples.csv.tmp").exists());
    for old in snaps {
        assert!(
            !agent.join(&old).exists(),
            "{old} of the earlier watch is left"
        );
    }
}

/// A command that cannot start: one error line, and no directory a later `report` would read as
/// a watch killed midway (neither for a file without an execute bit, refused before anything is
/// written, nor for one the kernel refuses to run).
#[test]
fn command_that_cannot_start_leaves_no_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.txt");
    std::fs::write(&text, "not a program\n").unwrap();
    let dir = tmp.path().join("d");
    let line = one_error_line(&watch(&dir, &[], &[text.to_str().unwrap()]));
    assert!(line.contains("is not executable"), "{line}");
    assert!(!dir.exists(), "{line}");

    // Executable, but neither ELF nor script: execve fails with ENOEXEC.
    let junk = tmp.path().join("junk");
    std::fs::write(&junk, [0u8, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o755)).unwrap();
    let line = one_error_line(&watch(&dir, &[], &[junk.to_str().unwrap()]));
    assert!(line.contains("cannot start"), "{line}");
    assert!(!dir.exists(), "{line}");

    // What an earlier alloclens left for such a command: report says there is no sample, not
    // that a watch was killed midway.
    let old = tmp.path().join("old");
    std::fs::create_dir_all(old.join("agent")).unwrap();
    std::fs::write(old.join("samples.csv"), "").unwrap();
    std::fs::write(
        old.join("watch.json"),
        r#"{"schema_version": 1, "command": ["/etc/passwd"], "interval_s": 1.0, "ending": null}"#,
    )
    .unwrap();
    let out = alloclens().arg("report").arg(&old).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no sample was taken"), "{stderr}");
    assert!(stderr.contains("the command could not start"), "{stderr}");
    let page = std::fs::read_to_string(old.join("report.html")).unwrap();
    assert!(page.contains("no sample was taken"));
    assert!(!page.contains("did not finish"));

    // An empty directory the user gave stays, empty.
    std::fs::create_dir(&dir).unwrap();
    one_error_line(&watch(&dir, &[], &[junk.to_str().unwrap()]));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// `watch -- unshare -U ...`: the agent's thread steps aside for the calls the kernel grants only
/// to a single-threaded process, and comes back (its snapshots go on after the call).
#[test]
fn the_watched_program_can_enter_a_user_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let prog = testkit::program("namespaces");
    let alone = std::process::Command::new(prog).output().unwrap();
    if !alone.status.success() {
        eprintln!(
            "skipped: this machine refuses user namespaces to a lone process: {}",
            String::from_utf8_lossy(&alone.stdout)
        );
        return;
    }
    let dir = tmp.path().join("w");
    let out = watch(&dir, &["--interval", "100ms"], &[prog.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("setns=0 setns_errno=0 unshare=0 unshare_errno=0"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The agent's thread was there before (the test means something) and is back after.
    assert!(stdout.contains("threads_before=2 "), "{stdout}");
    assert!(stdout.contains("threads_after=2\n"), "{stdout}");
    assert_eq!(out.status.code(), Some(0));
    let json = read_json(&dir.join("watch.json"));
    let root = &json["root_pid"];
    let snap = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| &p["pid"] == root)
        .map(|p| &p["snapshot"])
        .unwrap();
    // Snapshots went on after the unshare: without the thread back, only the first one (seq 0)
    // and the final one at exit would exist; with it, one at its restart and every 100 ms.
    assert!(snap["seq"].as_u64().unwrap() >= 3, "{snap}");
    assert!(snap["counters"]["allocs"].as_u64().unwrap() >= 1, "{snap}");
}

/// `report` of a watch whose samples.csv was garbled, cut or emptied says so, with the line and
/// the column, on stderr and on the page; the readable samples are still drawn.
#[test]
fn report_names_a_damaged_samples_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    short_watch(&dir);
    let csv = dir.join("samples.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    let report = |expect: &str| {
        let out = alloclens().arg("report").arg(&dir).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("alloclens: warning: "), "{stderr}");
        assert!(stderr.contains(expect), "{stderr}");
        let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
        let html = expect.replace('\'', "&#39;");
        assert!(page.contains(&html), "the page says: {html}");
    };

    // Line 3's RSS garbled.
    let mut garbled: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut fields: Vec<&str> = lines[2].split(',').collect();
    fields[3] = "12x4";
    garbled[2] = fields.join(",");
    std::fs::write(&csv, garbled.join("\n") + "\n").unwrap();
    report("line 3: column `rss` holds '12x4', not a number");
    report(&format!("the {} readable samples", lines.len() - 2));

    // Cut in the middle of its last row.
    let cut = &text[..text.len() - lines.last().unwrap().len() / 2 - 1];
    std::fs::write(&csv, cut).unwrap();
    report(&format!("line {}: cut after", lines.len()));

    // Emptied.
    std::fs::write(&csv, "").unwrap();
    let kept = read_json(&dir.join("watch.json"))["samples_kept"]
        .as_u64()
        .unwrap();
    report(&format!(
        "is empty, but watch.json says {kept} samples were kept"
    ));
}

/// `--duration 7d` (as the help cites) and `run --timeout 1d`: days are a duration unit.
#[test]
fn days_are_a_duration() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let out = watch(&dir, &["--duration", "7d"], &["true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        read_json(&dir.join("watch.json"))["duration_s"].as_f64(),
        Some(7.0 * 86_400.0)
    );
    let line = one_error_line(&watch(
        &tmp.path().join("x"),
        &["--duration", "3651d"],
        &["true"],
    ));
    assert!(line.contains("is too long: at most 3650 days"), "{line}");
    let out = alloclens()
        .args(["run", "-a", "glibc", "--runs", "1", "--timeout", "1d", "-o"])
        .arg(tmp.path().join("r"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Refusals that name the way: `watch -a A,B` (watch takes one variant), and a watch directory
/// given to `diff`, `analyze`, `export` or `report --compare`.
#[test]
fn refusals_name_watch_and_the_way_out() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let line = one_error_line(&watch(&dir, &["-a", "glibc,glibc@two"], &["true"]));
    assert!(
        line.contains("watch takes one allocator variant, -a 'glibc,glibc@two' gives 2"),
        "{line}"
    );
    assert!(line.contains("alloclens run -a glibc,glibc@two"), "{line}");
    assert!(!dir.exists());

    let w = tmp.path().join("w");
    let out = watch(&w, &["--interval", "100ms"], &["true"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w = w.to_str().unwrap();
    let refused = |args: &[&str], what: &str| {
        let line = one_error_line(&alloclens().args(args).output().unwrap());
        assert!(
            line.contains(&format!("'{w}' is a watch directory: {what}")),
            "{line}"
        );
        assert!(line.contains(&format!("alloclens report {w}")), "{line}");
    };
    refused(&["diff", w, w], "diff compares two runs or two traces");
    refused(
        &["diff", "--sites", w, w],
        "diff --sites compares two traces",
    );
    refused(&["analyze", w], "analyze reads a trace");
    refused(
        &[
            "export",
            w,
            "--parquet",
            tmp.path().join("p").to_str().unwrap(),
        ],
        "export reads a trace",
    );
    let r = tmp.path().join("r");
    let out = alloclens()
        .args(["run", "-a", "glibc", "--runs", "1", "-o"])
        .arg(&r)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    refused(
        &["report", r.to_str().unwrap(), "--compare", w],
        "--compare overlays two runs or two traces",
    );
}
