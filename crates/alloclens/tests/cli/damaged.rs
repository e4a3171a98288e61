//! Damaged traces through every command that reads them (`analyze`, `report`, `report --compare`,
//! `diff`, `export`): each says what was lost, the same way, and uses what is readable (issue 15,
//! "Nothing lost, nothing silent"). The damage is made on a real recording: cut, a byte flipped, the
//! trailer removed.
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use testkit::{alloclens, alloclens_exe, record};

/// A real recording of four processes (a parent and three forked workers), each stream with its
/// events chunk(s), about 260 k calls.
fn recording() -> &'static Path {
    static T: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.alt");
        record(
            &path,
            &[],
            &[
                &alloclens_exe(),
                "workload",
                "forkworkers",
                "--workers",
                "3",
                "--events",
                "30",
            ],
        );
        (dir, path)
    });
    path
}

/// `(offset, kind, payload length)` of every chunk of a trace (docs/trace-format.md: a 20-byte prefix
/// whose bytes 12..16 are the header length, then 24-byte frames with the kind at 4 and the payload
/// length at 12).
fn chunks(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut offset = 20 + u32_at(12);
    let mut out = Vec::new();
    while offset < bytes.len() {
        assert_eq!(&bytes[offset..offset + 4], b"ALCK", "a chunk at {offset}");
        let len = u32_at(offset + 12);
        out.push((offset, bytes[offset + 4], len));
        offset += 24 + len;
    }
    out
}

const EVENTS: u8 = 2;
const TRAILER: u8 = 5;

/// Writes `bytes` as DIR/NAME and returns its path.
fn damaged(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs alloclens with `args`; it must succeed.
fn ok(args: &[&Path]) -> Output {
    let out = alloclens().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn analysis(trace: &Path) -> Value {
    serde_json::from_slice(&ok(&[Path::new("analyze"), trace, Path::new("--json")]).stdout).unwrap()
}

fn calls(analysis: &Value) -> u64 {
    analysis["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats"]["calls_total"].as_u64().unwrap())
        .sum()
}

/// Asserts that every command reading `trace` succeeds and warns with `expected` (a piece of the
/// sentence `analyze` prints), and that each uses the same readable part: the calls `analyze` counts.
/// Returns those calls and what `export` said.
fn every_command_warns(trace: &Path, expected: &str, dir: &Path) -> (u64, String) {
    let base = recording();
    let warned = |what: &str, out: &Output| {
        let text = stderr(out);
        assert!(
            text.lines()
                .any(|l| l.starts_with("alloclens: warning: ") && l.contains(expected)),
            "{what} of {}: no warning with {expected:?} in: {text}",
            trace.display()
        );
    };
    let analyzed = ok(&[Path::new("analyze"), trace, Path::new("--json")]);
    warned("analyze", &analyzed);
    let a: Value = serde_json::from_slice(&analyzed.stdout).unwrap();
    assert!(
        a["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(expected)),
        "{a:?}"
    );
    let recovered = calls(&a);
    assert!(recovered > 0, "nothing recovered");

    let diffed = ok(&[Path::new("diff"), base, trace, Path::new("--json")]);
    warned("diff", &diffed);
    let d: Value = serde_json::from_slice(&diffed.stdout).unwrap();
    let row = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scope"] == "all processes" && r["metric"] == "calls")
        .unwrap()
        .clone();
    assert_eq!(row["b"].as_f64().unwrap() as u64, recovered);
    assert!(
        d["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(expected)),
        "{d:?}"
    );

    let html = dir.join("report.html");
    warned(
        "report",
        &ok(&[Path::new("report"), trace, Path::new("-o"), &html]),
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("class=\"warning\""), "no warning on the page");
    warned(
        "report --compare",
        &ok(&[
            Path::new("report"),
            base,
            Path::new("--compare"),
            trace,
            Path::new("-o"),
            &html,
        ]),
    );

    let parquet = dir.join("parquet");
    let exported = ok(&[Path::new("export"), trace, Path::new("--parquet"), &parquet]);
    warned("export", &exported);
    let (rows, _) = report::describe_parquet(&parquet.join("events.parquet")).unwrap();
    assert_eq!(
        rows as u64, recovered,
        "export and analyze read the same part"
    );
    let names: Vec<_> = std::fs::read_dir(&parquet)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["events.parquet"],
        "nothing else left in the directory"
    );
    (recovered, stderr(&exported))
}

#[test]
fn a_cut_trace_is_said_by_every_command_and_read_up_to_the_cut() {
    let bytes = std::fs::read(recording()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = damaged(dir.path(), "cut.alt", &bytes[..bytes.len() * 9 / 10]);
    let (part, _) = every_command_warns(&cut, "is truncated after chunk", dir.path());
    assert!(part < calls(&analysis(recording())));
}

#[test]
fn a_corrupt_chunk_is_said_by_every_command_and_what_precedes_is_read() {
    let mut bytes = std::fs::read(recording()).unwrap();
    // A byte in the middle of the largest events chunk: its checksum no longer matches. The streams
    // of the other processes are read in full (export used to stop there with exit 2).
    let (offset, _, len) = chunks(&bytes)
        .into_iter()
        .filter(|c| c.1 == EVENTS)
        .max_by_key(|c| c.2)
        .unwrap();
    bytes[offset + 24 + len / 2] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let flipped = damaged(dir.path(), "flipped.alt", &bytes);
    let (part, exported) = every_command_warns(&flipped, "checksum mismatch", dir.path());
    let whole = calls(&analysis(recording()));
    assert!(part < whole, "{part} of {whole} calls");
    assert!(
        exported.contains("is corrupt: checksum mismatch; exported its first"),
        "{exported}"
    );
}

#[test]
fn a_trace_without_its_trailer_says_the_recorder_did_not_finish() {
    let bytes = std::fs::read(recording()).unwrap();
    let last = *chunks(&bytes).last().unwrap();
    assert_eq!(
        last.1, TRAILER,
        "a finished recording ends with its trailer"
    );
    let dir = tempfile::tempdir().unwrap();
    let unfinished = damaged(dir.path(), "unfinished.alt", &bytes[..last.0]);
    let (part, _) = every_command_warns(&unfinished, "the recorder did not finish", dir.path());
    // Every stream ended: the figures are those of the whole recording, but the analysis says it.
    let (whole, unfinished_json) = (analysis(recording()), analysis(&unfinished));
    assert_eq!(calls(&whole), part);
    assert_eq!(whole["recorder_finished"], true);
    assert_eq!(unfinished_json["recorder_finished"], false);
    let text = ok(&[Path::new("analyze"), &unfinished]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|l| l.starts_with("UNFINISHED recording")),
        "{text}"
    );
    let whole_text = ok(&[Path::new("analyze"), recording()]);
    assert!(!String::from_utf8_lossy(&whole_text.stdout).contains("UNFINISHED"));
    let html = dir.path().join("u.html");
    ok(&[Path::new("report"), &unfinished, Path::new("-o"), &html]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("UNFINISHED: no trailer"), "no recording fact");
}
