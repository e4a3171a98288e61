//! Issue 35 item 1: an option that writes a file never replaces a device, a pipe or a symbolic
//! link (alloclens runs as root: `-o /dev/null` once turned the machine's /dev/null into a regular
//! file). One table over every option that writes a file, each given a null device made with
//! `mknod` in a temporary directory (never the real one) and a link to a regular file, in its own
//! place or inside the directory it writes into.
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use testkit::{alloclens, record, require};

/// One option that writes: its arguments (`{}` the path given, `{place}` a directory of the case's
/// own); `inner` the file it writes inside that path when the path is a directory (the device or
/// link is put there); `writes`: whether it succeeds through the link, and into the device unless
/// `no_device` (else it refuses in one line: a `--force` into a directory holding a link or a
/// device under one of its names, not its file; a trace, read back with seeks, into a device).
struct Case {
    args: &'static [&'static str],
    inner: Option<&'static str>,
    writes: bool,
    no_device: bool,
}

const fn case(args: &'static [&'static str], inner: Option<&'static str>, writes: bool) -> Case {
    Case {
        args,
        inner,
        writes,
        no_device: false,
    }
}

/// `R` a results directory, `T` a trace (with stacks), both made once.
const CASES: &[Case] = &[
    case(&["report", "R", "-o", "{}"], None, true),
    case(
        &["report", "R", "--svg", "{}"],
        Some("pss-over-time.svg"),
        true,
    ),
    case(
        &["report", "R", "--png", "{}"],
        Some("pss-over-time.png"),
        true,
    ),
    case(
        &["report", "R", "--parquet", "{}"],
        Some("samples.parquet"),
        true,
    ),
    case(
        &[
            "run",
            "-a",
            "glibc",
            "-r",
            "1",
            "-o",
            "{place}/r",
            "--export-json",
            "{}",
            "--",
            "true",
        ],
        None,
        true,
    ),
    case(
        &[
            "run",
            "-a",
            "glibc",
            "-r",
            "1",
            "-o",
            "{place}/r",
            "--export-markdown",
            "{}",
            "--",
            "true",
        ],
        None,
        true,
    ),
    case(
        &[
            "run",
            "-a",
            "glibc",
            "-r",
            "1",
            "-o",
            "{place}/r",
            "--export-csv",
            "{}",
            "--",
            "true",
        ],
        None,
        true,
    ),
    case(
        &[
            "run", "-a", "glibc", "-r", "1", "--force", "-o", "{}", "--", "true",
        ],
        Some("results.json"),
        false,
    ),
    case(&["man", "-o", "{}"], Some("alloclens.1"), true),
    case(
        &["export", "T", "--parquet", "{}"],
        Some("events.parquet"),
        true,
    ),
    case(&["export", "T", "--pprof", "{}"], None, true),
    case(&["analyze", "T", "-o", "{}"], Some("summary.json"), true),
    case(&["merge", "R", "-o", "{}"], Some("dataset.json"), false),
    case(
        &["replay", "T", "--force", "-o", "{}"],
        Some("replay.json"),
        false,
    ),
    case(
        &["tune", "T", "--force", "-o", "{}"],
        Some("candidates.csv"),
        false,
    ),
    case(
        &["watch", "--force", "-o", "{}", "--", "true"],
        Some("watch.json"),
        false,
    ),
    Case {
        no_device: true,
        ..case(&["record", "--force", "-o", "{}", "--", "true"], None, true)
    },
];

#[derive(Clone, Copy, Debug)]
enum Node {
    NullDevice,
    Link,
}

/// Makes `node` at `path`; for a link, its target (a regular file holding "old") is returned.
fn make(node: Node, path: &Path) -> Option<PathBuf> {
    match node {
        Node::NullDevice => {
            let status = std::process::Command::new("mknod")
                .arg(path)
                .args(["c", "1", "3"])
                .status()
                .unwrap();
            assert!(status.success(), "mknod {}", path.display());
            None
        }
        Node::Link => {
            let target = path.with_file_name(format!(
                "target-of-{}",
                path.file_name().unwrap().to_string_lossy()
            ));
            std::fs::write(&target, "old").unwrap();
            std::os::unix::fs::symlink(&target, path).unwrap();
            Some(target)
        }
    }
}

#[test]
fn no_option_replaces_a_device_or_a_link() {
    require!(root);
    let root = tempfile::tempdir().unwrap();
    let results = root.path().join("results");
    alloclens()
        .args(["run", "-a", "glibc", "-r", "1", "--interval", "20ms"])
        .args(["--program-output", "discard", "-o"])
        .arg(&results)
        .args(["--", "sleep", "0.3"])
        .pipe("")
        .ok();
    let trace = root.path().join("t.alct");
    // With stacks: `export --pprof` refuses a trace without them.
    record(&trace, &["--stacks=all"], &["true"]);
    let mut failures = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        for node in [Node::NullDevice, Node::Link] {
            let place = root.path().join(format!("case-{i}-{node:?}"));
            std::fs::create_dir(&place).unwrap();
            let (given, at) = match case.inner {
                None => (place.join("out"), place.join("out")),
                Some(inner) => {
                    let dir = place.join("out");
                    std::fs::create_dir(&dir).unwrap();
                    (dir.clone(), dir.join(inner))
                }
            };
            let target = make(node, &at);
            let given = given.to_str().unwrap();
            let args: Vec<String> = case
                .args
                .iter()
                .map(|a| match *a {
                    "R" => results.display().to_string(),
                    "T" => trace.display().to_string(),
                    a => a
                        .replace("{place}", place.to_str().unwrap())
                        .replace("{}", given),
                })
                .collect();
            let out = alloclens().args(&args).pipe("").run();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("alloclens {} ({node:?})", args.join(" "));
            let meta = std::fs::symlink_metadata(&at);
            let kept = match node {
                Node::NullDevice => meta.is_ok_and(|m| m.file_type().is_char_device()),
                Node::Link => meta.is_ok_and(|m| m.file_type().is_symlink()),
            };
            if !kept {
                failures.push(format!("{what}: {} was replaced", at.display()));
            }
            if stderr.contains("panicked") {
                failures.push(format!("{what}: panicked: {stderr}"));
            }
            let succeeded = out.status.success();
            let expected = case.writes && !(case.no_device && matches!(node, Node::NullDevice));
            if succeeded != expected {
                failures.push(format!("{what}: exit {}: {stderr}", out.status));
            }
            if !succeeded && !stderr.lines().any(|l| l.starts_with("alloclens: error:")) {
                failures.push(format!("{what}: failed without a one-line error: {stderr}"));
            }
            if let (Some(target), true) = (target, case.writes) {
                let content = std::fs::read(&target).unwrap_or_default();
                if content.is_empty() || content == b"old" {
                    let listing: Vec<_> = std::fs::read_dir(at.parent().unwrap())
                        .unwrap()
                        .map(|e| e.unwrap().file_name())
                        .collect();
                    failures.push(format!(
                        "{what}: the link's target did not get the file ({listing:?}): {stderr}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 35 item 6: two sessions into one directory both reported success and one was lost. The
/// second (`--force`) now stops in one line naming the first, whose results stay whole.
#[test]
fn a_second_session_into_a_busy_directory_stops_naming_the_first() {
    let root = tempfile::tempdir().unwrap();
    // Each session with the file it writes as it starts.
    for (first, started) in [
        (
            &[
                "run",
                "-a",
                "glibc",
                "-r",
                "1",
                "--program-output",
                "discard",
            ][..],
            "samples.csv",
        ),
        (&["watch"][..], "watch.json"),
    ] {
        let dir = root.path().join(first[0]);
        let mut holder = std::process::Command::new(testkit::alloclens_exe())
            .args(first)
            .arg("-o")
            .arg(&dir)
            .args(["--", "sleep", "10"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        testkit::wait_until(
            "the first session holds its directory",
            std::time::Duration::from_secs(20),
            || dir.join(started).exists(),
        );
        let second = alloclens()
            .args(first)
            .args(["--force", "-o"])
            .arg(&dir)
            .args(["--", "true"])
            .pipe("")
            .run();
        // Interrupted as Ctrl-C would: the run ends its command (watch leaves it, as it does).
        let _ = std::process::Command::new("kill")
            .args(["-INT", &holder.id().to_string()])
            .status();
        let _ = holder.wait();
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(1), "{}: {stderr}", first[0]);
        assert!(
            stderr.contains(&format!("another alloclens (pid {})", holder.id())),
            "{}: {stderr}",
            first[0]
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}
