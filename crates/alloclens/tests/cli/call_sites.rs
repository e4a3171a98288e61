//! Call sites end to end: `record --stacks` of the C program with known call sites
//! (crates/testkit/programs/sites.c), then `analyze --sites` (text, JSON, CSV), the report's
//! call-site section and `diff --sites`: every site's count resolved to the right function.
//! And on a real program (cc1 compiling with -O2), the top 10 allocating functions by calls compared
//! with heaptrack_print's (skipped, with the reason printed, when heaptrack is not installed).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use testkit::{alloclens, csv_rows, json_stdout, record, succeeded};

fn sites_program() -> &'static Path {
    testkit::program("sites")
}

/// Per function of one process: (own calls, inclusive calls, leaked blocks).
fn functions(process: &Value) -> BTreeMap<String, (u64, u64, u64)> {
    process["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap().to_string(),
                (
                    f["figures"]["calls"].as_u64().unwrap(),
                    f["calls_inclusive"].as_u64().unwrap(),
                    f["figures"]["leaked_blocks"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

fn process(sites: &Value, pid: u64) -> &Value {
    sites["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap()
}

#[test]
fn known_sites_resolve_to_their_functions() {
    let dir = tempfile::tempdir().unwrap();
    let exe = sites_program();
    let trace = dir.path().join("sites.alt");
    record(&trace, &["--stacks=all"], &[&exe]);
    let sites = json_stdout(["analyze", "--sites", "--json", trace.to_str().unwrap()]);
    assert_eq!(sites["warnings"], Value::Array(vec![]), "{sites}");
    // A --debug-dir that is no directory is one line, not silently ignored.
    for (debug_dir, what) in [
        ("/nonexistent", "does not exist"),
        ("/etc/passwd", "is not a directory"),
    ] {
        let out = alloclens()
            .args(["analyze", "--sites", "--debug-dir", debug_dir])
            .arg(&trace)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--debug-dir '{debug_dir}' {what}")),
            "{err}"
        );
    }
    let pids: Vec<u64> = sites["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "the program and its fork child: {pids:?}");
    let (parent, child) = (process(&sites, pids[0]), process(&sites, pids[1]));
    let f = functions(parent);
    // alloc_block made the calls of site_a (1000), of the thread's site_t (100) and of site_d before
    // the fork (3); fill_inline, inlined into site_b, made site_b's 10; site_c leaked its 5.
    assert_eq!(f["alloc_block"].0, 1000 + 100 + 3, "{f:?}");
    assert_eq!(f["site_a"], (0, 1000, 0));
    assert_eq!(f["site_t"], (0, 100, 0));
    assert_eq!(f["site_d"], (0, 3, 0));
    assert_eq!(f["fill_inline"].0, 10);
    assert_eq!(f["site_b"], (0, 10, 0));
    assert_eq!(f["site_c"], (5, 5, 5));
    let c = functions(child);
    assert_eq!(c["alloc_block"].0, 3 + 20, "{c:?}");
    assert_eq!(c["site_f"], (0, 20, 0));
    assert_eq!(c["site_d"], (0, 3, 0));
    assert!(
        !c.contains_key("site_a"),
        "the child only runs after the fork"
    );
    // The inlined frame is marked, and has its source line (stacks index the process's frames).
    let frames = parent["frames"].as_array().unwrap();
    let frame = |s: &Value, i: usize| &frames[s["frames"][i].as_u64().unwrap() as usize];
    let b_stack = parent["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| frame(s, 0)["label"] == "fill_inline")
        .expect("site_b's stack");
    assert_eq!(frame(b_stack, 0)["inlined"], true);
    assert_eq!(frame(b_stack, 1)["label"], "site_b");
    assert!(frame(b_stack, 0)["file"]
        .as_str()
        .unwrap()
        .ends_with("sites.c"));
    assert_eq!(b_stack["figures"]["calls"], 10);
    let leak = &f["site_c"];
    assert_eq!(leak.2, 5);

    // Text: the top functions with their counts; CSV: every site, the same counts.
    let out = succeeded(
        alloclens()
            .args(["analyze", "--sites", "--functions", "3"])
            .arg(&trace),
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("alloc_block (sites.c:"), "{text}");
    assert!(text.contains("top 3 of"), "{text}");
    let csv_dir = dir.path().join("csv");
    succeeded(
        alloclens()
            .args(["analyze", "--sites", "-o"])
            .arg(&csv_dir)
            .arg(&trace),
    );
    let rows = csv_rows(csv_dir.join("sites_by_function.csv"));
    let alloc_block = rows
        .iter()
        .find(|r| r["site"] == "alloc_block" && r["pid"] == pids[0].to_string())
        .unwrap();
    assert_eq!(alloc_block["calls"], "1103");
    assert!(!csv_rows(csv_dir.join("sites_by_stack.csv")).is_empty());

    // diff --sites of a trace with itself: every function matched, nothing changed.
    let diff = json_stdout([
        "diff",
        "--sites",
        "--json",
        trace.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    let rows = diff["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["scope"] == "alloc_block (sites)"
        && r["metric"] == "calls"
        && r["a"] == 1126.0));
    assert!(rows.iter().all(|r| r["change"] == 0.0), "{diff}");

    // The report has a call-site section with its flame graphs and table.
    let page = dir.path().join("page.html");
    succeeded(alloclens().arg("report").arg(&trace).arg("-o").arg(&page));
    let html = std::fs::read_to_string(&page).unwrap();
    for id in ["calls", "bytes", "peak", "leaks"] {
        assert!(
            html.contains(&format!("data-flame=\"flame-{}-0-{id}\"", pids[0])),
            "flame graph {id}"
        );
    }
    assert!(html.contains(&format!("id=\"sites-table-{}-0\"", pids[0])));
    // One format per column: the percentage and the microseconds with one decimal in every row
    // (whole values were "12", others "3.400").
    let table = &html[html
        .find(&format!("id=\"sites-table-{}-0\"", pids[0]))
        .unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let heads: Vec<&str> = table
        .split("<th")
        .skip(1)
        .filter(|h| h.contains("</th>"))
        .map(|h| &h[h.find('>').unwrap() + 1..h.find("</th>").unwrap()])
        .collect();
    for label in ["lifetime 0 (%)", "median lifetime (µs)"] {
        // The first two headings (# and the site) have cells of their own kind.
        let column = heads.iter().position(|h| *h == label).unwrap() - 2;
        let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
        assert!(!rows.is_empty());
        for row in rows {
            let cells: Vec<&str> = row.split("<td data-v=").skip(1).collect();
            // The rank's cell, then one per column.
            let cell = cells[column + 1];
            let text = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
            let (whole, decimals) = text.split_once('.').unwrap_or((text, ""));
            assert!(
                !whole.is_empty()
                    && whole.bytes().all(|b| b.is_ascii_digit())
                    && decimals.len() == 1,
                "{label}: {text:?} in {row}"
            );
        }
    }
}

#[test]
fn a_trace_without_stacks_has_no_sites() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("plain.alt");
    record(&trace, &[], &["true"]);
    let out = alloclens()
        .args(["analyze", "--sites"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("alloclens: error: ") && err.contains("record --stacks"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// heaptrack_print's "MOST CALLS TO ALLOCATION FUNCTIONS": (function, calls), in its order.
fn heaptrack_top(data: &Path) -> Vec<(String, u64)> {
    let out = Command::new("heaptrack_print")
        .arg("-f")
        .arg(data)
        .args(["-p", "0", "-T", "0", "-a", "1", "-s", "0", "-n", "10"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut top = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(n) = l.strip_suffix(" peak consumption from") {
            let calls: u64 = n.split_whitespace().next().unwrap().parse().unwrap();
            top.push((lines[i + 1].trim().to_string(), calls));
        }
    }
    top
}

/// heaptrack and alloclens name a function alike, up to the argument list (heaptrack shortens
/// template arguments).
fn same_function(ours: &str, theirs: &str) -> bool {
    let strip = |s: &str| s.split(['<', '(']).next().unwrap_or(s).to_string();
    strip(ours) == strip(theirs)
}

/// Separate runs of cc1 differ by a call or two (its hash tables hash addresses, which differ with
/// another preloaded library): counts agree within 0.1 % and 2 calls.
fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= 2 + a.max(b) / 1000
}

#[test]
fn top_functions_of_a_gcc_compile_agree_with_heaptrack() {
    testkit::require!(program "heaptrack_print");
    let dir = tempfile::tempdir().unwrap();
    let cc1 = String::from_utf8(
        Command::new("gcc")
            .arg("-print-prog-name=cc1")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    // A real compile: a file of this repository's shim, preprocessed, at -O2 (cc1 alone: heaptrack
    // follows no child process; a small file keeps the test fast, its 34 k calls rank the same).
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shim/record");
    let source = dir.path().join("buffer.i");
    succeeded(
        Command::new("gcc")
            .args(["-E", "-O2", "-I"])
            .arg(shim.join("include"))
            .arg(shim.join("buffer.c"))
            .arg("-o")
            .arg(&source),
    );
    let compile = |out: &str| -> Vec<String> {
        vec![
            cc1.clone(),
            "-quiet".into(),
            "-O2".into(),
            source.display().to_string(),
            "-o".into(),
            dir.path().join(out).display().to_string(),
        ]
    };
    let trace = dir.path().join("cc1.alt");
    record(&trace, &["--stacks=all"], &compile("a.s"));
    let data = dir.path().join("cc1.heaptrack");
    let ht = Command::new("heaptrack")
        .arg("-o")
        .arg(&data)
        .args(compile("b.s"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ht.success());
    let data = dir.path().join("cc1.heaptrack.zst");
    let theirs = heaptrack_top(&data);
    assert_eq!(theirs.len(), 10, "heaptrack_print's top 10: {theirs:?}");

    let sites = json_stdout(["analyze", "--sites", "--json", trace.to_str().unwrap()]);
    let ours: Vec<(String, u64)> = sites["processes"][0]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["function"].as_str().unwrap().to_string(),
                f["figures"]["calls"].as_u64().unwrap(),
            )
        })
        .collect();
    let unnamed = |(f, _): &&(String, u64)| f.starts_with("cc1+0x");
    eprintln!("top 10 allocating functions by calls (alloclens | heaptrack_print):");
    for (o, t) in ours.iter().zip(&theirs) {
        eprintln!("  {:>7} {:<50} | {:>7} {}", o.1, o.0, t.1, t.0);
    }
    // heaptrack gives every function without a symbol one entry, shown as the first address it met
    // ("0x676649"): it adds up our `cc1+0x...` functions.
    let our_unnamed: u64 = ours.iter().filter(unnamed).map(|(_, c)| c).sum();
    // The named functions of heaptrack's top 10 are our top named ones, with the same counts (in
    // the same order but for near-ties: two runs differ by a call or two).
    let theirs_named: Vec<&(String, u64)> = theirs
        .iter()
        .filter(|(f, _)| !f.starts_with("0x"))
        .collect();
    let ours_named: Vec<&(String, u64)> = ours
        .iter()
        .filter(|f| !unnamed(f))
        .take(theirs_named.len())
        .collect();
    for (function, calls) in &theirs {
        if function.starts_with("0x") {
            assert!(
                close(our_unnamed, *calls),
                "functions without a name: {our_unnamed} calls here, {calls} in heaptrack"
            );
            continue;
        }
        let Some((_, our_calls)) = ours_named.iter().find(|(o, _)| same_function(o, function))
        else {
            panic!(
                "heaptrack's {function} is not among our top {} named functions: {ours_named:?}",
                ours_named.len()
            );
        };
        assert!(
            close(*our_calls, *calls),
            "calls of {function}: {our_calls} here, {calls} in heaptrack"
        );
    }
}

/// How many chunks of each kind a trace file has (walking the chunk frames of
/// docs/trace-format.md).
fn chunk_kinds(trace: &Path) -> BTreeMap<u8, usize> {
    use trace::format::{CHUNK_FRAME_LEN, FILE_PREFIX_LEN};
    let bytes = std::fs::read(trace).unwrap();
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = FILE_PREFIX_LEN + u32_at(12);
    let mut kinds = BTreeMap::new();
    while at + CHUNK_FRAME_LEN <= bytes.len() {
        assert_eq!(&bytes[at..at + 4], b"ALCK", "a chunk frame at byte {at}");
        *kinds.entry(bytes[at + 4]).or_insert(0) += 1;
        at += CHUNK_FRAME_LEN + u32_at(at + 12);
    }
    assert_eq!(at, bytes.len(), "the file ends with a whole chunk");
    kinds
}

/// Stacks learned a few at a time over a recording go out together, ahead of the events that
/// name them: each STACKS chunk is its own zstd frame, and one per drain of the recorder (as
/// before) made a cc1 compile's stacks twice as large.
#[test]
fn stacks_learned_over_time_share_few_chunks() {
    let dir = tempfile::tempdir().unwrap();
    // 50 distinct stacks (a recursion 1 to 50 deep, within the default --stack-depth of 64), one
    // new stack every 3 ms: about as many recorder drains as stacks.
    let exe = testkit::program("deeper");
    let trace = dir.path().join("deeper.alt");
    record(&trace, &["--stacks=all"], &[&exe]);
    let reader = trace::TraceReader::open(&trace).unwrap();
    assert!(
        reader.stacks().len() >= 50,
        "each depth is its own stack: {} stacks",
        reader.stacks().len()
    );
    let kinds = chunk_kinds(&trace);
    let events = kinds[&trace::format::kind::EVENTS];
    let stacks = kinds[&trace::format::kind::STACKS];
    assert!(
        stacks <= events + 1,
        "{stacks} STACKS chunks for {events} events chunks: {kinds:?}"
    );
    // The events name their stacks: every allocation of `down` has one.
    let sites = json_stdout(["analyze", "--sites", "--json", trace.to_str().unwrap()]);
    assert_eq!(sites["warnings"], Value::Array(vec![]), "{sites}");
    // A --debug-dir that is no directory is one line, not silently ignored.
    for (debug_dir, what) in [
        ("/nonexistent", "does not exist"),
        ("/etc/passwd", "is not a directory"),
    ] {
        let out = alloclens()
            .args(["analyze", "--sites", "--debug-dir", debug_dir])
            .arg(&trace)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("--debug-dir '{debug_dir}' {what}")),
            "{err}"
        );
    }
    let f = functions(&sites["processes"][0]);
    assert_eq!(f["down"].0, 50, "{f:?}");
}
