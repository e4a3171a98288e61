//! `alloclens analyze --residency` on programs whose heap layout is known (issue 38): which call
//! sites hold the resident heap pages, which pages only free memory holds and whose frees left
//! them, live bytes never written; the parts sum to each reading's resident bytes, and to the
//! heap `Rss` smaps showed at the same moment.
use std::path::Path;

use serde_json::Value;
use testkit::{alloclens, record};

/// How long the programs hold their layout (ms): the recorder reads the memory every 20 ms.
const HOLD_MS: &str = "400";
const PAGE: u64 = 4096;

/// Records `program` (holding its layout HOLD_MS) with addresses, every stack and a memory sample
/// every 20 ms into DIR/PROGRAM.alt.
fn record_layout(dir: &Path, program: &str) -> std::path::PathBuf {
    let trace = dir.join(format!("{program}.alt"));
    let exe = testkit::program(program);
    record(
        &trace,
        &["--addresses", "--stacks=all", "--memory-interval", "20"],
        &[exe.as_os_str(), HOLD_MS.as_ref()],
    );
    trace
}

/// `analyze --residency --json` of [`record_layout`]'s trace of `program`: its one process image.
fn residency_of(dir: &Path, program: &str) -> Value {
    let trace = record_layout(dir, program);
    let v = alloclens()
        .args(["analyze", "--residency", "--json"])
        .arg(&trace)
        .json();
    assert_eq!(v["processes"].as_array().unwrap().len(), 1, "{v}");
    v["processes"][0].clone()
}

/// The readings taken while the program held its layout (those after its last call: it touches
/// no page after it), after checking that every reading's parts sum to its resident bytes and
/// that each of these agrees with smaps's heap `Rss` within 1 %.
fn held(process: &Value) -> Vec<Value> {
    let readings = process["readings"].as_array().unwrap();
    for r in readings {
        let part = |k: &str| r[k].as_u64().unwrap();
        assert_eq!(
            part("live_blocks") + part("free_only") + part("metadata") + part("outside"),
            part("resident"),
            "{r}"
        );
        let regions: u64 = r["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["resident"].as_u64().unwrap())
            .sum();
        assert_eq!(regions, part("resident"), "{r}");
    }
    let last = readings.iter().map(|r| r["seq"].as_u64().unwrap()).max();
    let held: Vec<Value> = readings
        .iter()
        .filter(|r| Some(r["seq"].as_u64().unwrap()) == last && r["calls_during"] == 0)
        .cloned()
        .collect();
    assert!(
        !held.is_empty(),
        "no reading while the program held: {process}"
    );
    for r in &held {
        let (resident, smaps) = (
            r["resident"].as_u64().unwrap(),
            r["smaps_heap"].as_u64().unwrap(),
        );
        assert!(
            resident.abs_diff(smaps) * 100 <= smaps,
            "resident {resident} vs smaps heap {smaps}: {r}"
        );
    }
    held
}

/// The row of `site` in a reading (all zeros when absent).
fn site(reading: &Value, name: &str) -> [u64; 4] {
    let row = reading["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == name);
    let get = |k: &str| row.map_or(0, |s| s[k].as_u64().unwrap());
    [
        get("resident"),
        get("free_left"),
        get("live_bytes"),
        get("live_not_resident"),
    ]
}

/// 64 pages each hold one block of keep_block, and 64 pages held one block of temp_block, freed
/// by free_temps: the kept pages are keep_block's, the freed ones are free memory left by
/// temp_block's blocks, and MADV_DONTNEED of them would return 64 pages.
#[test]
fn every_other_block_freed_leaves_its_pages_to_the_freed_site() {
    let dir = tempfile::tempdir().unwrap();
    let p = residency_of(dir.path(), "residency_every_other");
    for r in held(&p) {
        let [resident, free_left, live, not_resident] = site(&r, "keep_block");
        assert_eq!(resident, 64 * PAGE, "{r}");
        assert_eq!(
            (free_left, live, not_resident),
            (0, 64 * (PAGE - 16), 0),
            "{r}"
        );
        let [resident, free_left, live, _] = site(&r, "temp_block");
        assert_eq!((resident, free_left, live), (0, 64 * PAGE, 0), "{r}");
        // Only temp_block's pages hold free memory alone.
        assert_eq!(r["free_only"].as_u64().unwrap(), 64 * PAGE, "{r}");
        assert_eq!(r["reclaimable"].as_u64().unwrap(), 64 * PAGE, "{r}");
    }
}

/// A 64 MiB calloc never written is live and not resident; 4 MiB written are.
#[test]
fn a_calloc_never_written_is_live_and_not_resident() {
    let dir = tempfile::tempdir().unwrap();
    let p = residency_of(dir.path(), "residency_calloc");
    for r in held(&p) {
        let [resident, _, live, not_resident] = site(&r, "unwritten");
        assert_eq!(live, 64 << 20, "{r}");
        // glibc writes the chunk header on its first page, nothing more.
        assert!(resident <= PAGE && not_resident >= (64 << 20) - PAGE, "{r}");
        let [resident, _, live, not_resident] = site(&r, "written");
        assert_eq!((live, not_resident), (4 << 20, 0), "{r}");
        assert!((4 << 20..=(4 << 20) + 2 * PAGE).contains(&resident), "{r}");
        assert!(
            r["live_not_resident"].as_u64().unwrap() >= (64 << 20) - PAGE,
            "{r}"
        );
    }
}

/// Two waves under glibc: wave A all freed, wave B (one block after every 16 of A) kept. The pages
/// wave B's blocks lie on are wave_b's; the others hold only wave A's free memory, which glibc
/// keeps resident, and are wave_a's.
#[test]
fn the_free_pages_of_two_waves_are_the_first_waves() {
    let dir = tempfile::tempdir().unwrap();
    let p = residency_of(dir.path(), "residency_waves");
    for r in held(&p) {
        let free_only = r["free_only"].as_u64().unwrap();
        let [resident_a, free_left_a, live_a, _] = site(&r, "wave_a");
        let [resident_b, free_left_b, live_b, _] = site(&r, "wave_b");
        assert_eq!((resident_a, live_a, free_left_b), (0, 0, 0), "{r}");
        assert_eq!(live_b, 2500 * 500, "{r}");
        // 42,500 chunks of 512 bytes, one in 17 kept: wave B holds about every other page, and
        // the pages between are wave A's free memory.
        let pages = 42_500 * 512 / PAGE;
        assert!(free_left_a * 100 >= free_only * 99, "{r}");
        assert!(
            (pages / 4 * PAGE..=pages * 3 / 4 * PAGE).contains(&free_left_a),
            "{r}"
        );
        assert!(
            (pages / 4 * PAGE..=pages * 3 / 4 * PAGE).contains(&resident_b),
            "{r}"
        );
    }
}

/// A trace without addresses has no readings: one line naming the fix.
#[test]
fn a_trace_without_addresses_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let exe = testkit::program("residency_calloc");
    record(
        &trace,
        &["--memory-interval", "20"],
        &[exe.as_os_str(), "0".as_ref()],
    );
    let err = alloclens()
        .args(["analyze", "--residency"])
        .arg(&trace)
        .fails_with(1);
    assert!(err.contains("record --addresses"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `export --pprof` of such a trace has `resident_space` and `free_left_space` at the image's last
/// reading: keep_block's 64 pages held, temp_block's 64 pages left free.
#[test]
fn pprof_has_the_resident_and_free_left_space_of_each_stack() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record_layout(dir.path(), "residency_every_other");
    let file = dir.path().join("heap.pb.gz");
    alloclens()
        .args(["export", "--pprof"])
        .arg(&file)
        .arg(&trace)
        .ok();
    let profile = profiles::pprof::read(&std::fs::read(&file).unwrap()).unwrap();
    let name = |i: i64| profile.string_table[i as usize].as_str();
    let types: Vec<&str> = profile.sample_type.iter().map(|t| name(t.r#type)).collect();
    assert_eq!(
        types,
        [
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space",
            "resident_space",
            "free_left_space"
        ]
    );
    // The leaf function of each sample -> (resident_space, free_left_space).
    let leaf = |s: &profiles::pprof::proto::Sample| -> String {
        let location = profile
            .location
            .iter()
            .find(|l| l.id == s.location_id[0])
            .unwrap();
        let function = profile
            .function
            .iter()
            .find(|f| f.id == location.line[0].function_id)
            .unwrap();
        name(function.name).to_string()
    };
    let of = |function: &str| -> [i64; 2] {
        profile
            .sample
            .iter()
            .filter(|s| leaf(s) == function)
            .fold([0, 0], |t, s| [t[0] + s.value[4], t[1] + s.value[5]])
    };
    let page = PAGE as i64;
    assert_eq!(of("keep_block"), [64 * page, 0]);
    assert_eq!(of("temp_block"), [0, 64 * page]);
}

/// `report` of such a trace draws the split against time on the process's page and lists the
/// sites holding the pages; a trace without readings has neither.
#[test]
fn the_report_page_shows_the_split_and_its_sites() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record_layout(dir.path(), "residency_every_other");
    let (html, svg) = (dir.path().join("t.html"), dir.path().join("svg"));
    alloclens()
        .arg("report")
        .arg(&trace)
        .arg("-o")
        .arg(&html)
        .arg("--svg")
        .arg(&svg)
        .ok();
    assert!(svg.join("p0-residency-by-time.svg").exists());
    let page = std::fs::read_to_string(&html).unwrap();
    let table = &page[page
        .find("Call sites holding the heap")
        .expect("the sites table")..];
    let row = |site: &str| {
        let at = table
            .find(&format!(">{site}<"))
            .unwrap_or_else(|| panic!("{site}"));
        table[at..table[at..].find("</tr>").unwrap() + at].to_string()
    };
    assert!(
        row("keep_block").contains("256 KiB"),
        "{}",
        row("keep_block")
    );
    assert!(
        row("temp_block").contains("256 KiB"),
        "{}",
        row("temp_block")
    );
    // The call sites' flame graphs of resident and free-left bytes carry the same figures.
    let marker = "id=\"report-data\">";
    let data = &page[page.find(marker).unwrap() + marker.len()..];
    let data: Value = serde_json::from_str(&data[..data.find("</script>").unwrap()]).unwrap();
    let flame_value = |suffix: &str, frame: &str| -> u64 {
        let flame = data["flames"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"].as_str().unwrap().ends_with(suffix))
            .unwrap_or_else(|| panic!("no flame graph {suffix}"));
        let names = flame["names"].as_array().unwrap();
        let nodes = flame["name"].as_array().unwrap();
        (0..nodes.len())
            .filter(|&i| names[nodes[i].as_u64().unwrap() as usize] == frame)
            .map(|i| flame["value"][i].as_u64().unwrap())
            .sum()
    };
    assert_eq!(flame_value("-resident", "keep_block"), 64 * PAGE);
    assert_eq!(flame_value("-resident", "temp_block"), 0);
    assert_eq!(flame_value("-free-left", "temp_block"), 64 * PAGE);

    let bare = dir.path().join("bare.alt");
    let exe = testkit::program("residency_every_other");
    record(
        &bare,
        &["--stacks=all", "--memory-interval", "20"],
        &[exe.as_os_str(), "0".as_ref()],
    );
    let bare_svg = dir.path().join("bare-svg");
    alloclens()
        .arg("report")
        .arg(&bare)
        .arg("--svg")
        .arg(&bare_svg)
        .ok();
    assert!(!bare_svg.join("p0-residency-by-time.svg").exists());
}

/// Issue 38: `watch` quotes the share of the heap's resident pages that hold no live block, read
/// from outside (glibc's heap walked, no block addresses), and it agrees with the exact split of
/// `record --addresses` + `analyze --residency` on the same program within a few points.
#[test]
fn watch_quotes_the_free_share_of_the_heap_that_analyze_splits_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let exact = held(&residency_of(dir.path(), "residency_waves"));
    let part = |r: &Value, k: &str| r[k].as_u64().unwrap() as f64;
    let r = &exact[0];
    let exact_pct = 100.0 * part(r, "free_only")
        / (part(r, "live_blocks") + part(r, "free_only") + part(r, "metadata"));

    let out = dir.path().join("w");
    // Held 3 s: readings are at least 1 s apart, the last ones while the layout holds.
    let text = alloclens()
        .args(["watch", "--interval", "100ms", "-o"])
        .arg(&out)
        .arg("--")
        .arg(testkit::program("residency_waves"))
        .arg("3000")
        .ok();
    let stdout = String::from_utf8_lossy(&text.stdout).to_string();
    let json: Value =
        serde_json::from_slice(&std::fs::read(out.join("watch.json")).unwrap()).unwrap();
    let q = &json["residency"];
    assert_eq!(q["allocator"], "glibc", "{json}");
    assert!(q["readings"].as_u64().unwrap() >= 2, "{q}");
    let split = &q["split"];
    let quoted =
        100.0 * split["free_only"].as_f64().unwrap() / split["arena_resident"].as_f64().unwrap();
    assert!(
        (quoted - exact_pct).abs() <= 3.0,
        "watch {quoted:.1} % against analyze --residency {exact_pct:.1} %: {q}\n{r}"
    );
    // About half the pages: wave B holds every other one.
    assert!((25.0..=75.0).contains(&quoted), "{q}");
    let sentence = format!("{quoted:.0} % of the heap's resident pages hold no live block");
    assert!(stdout.contains(&sentence), "{sentence:?} not in {stdout}");
    assert!(stdout.contains("alloclens analyze --residency"), "{stdout}");
}

/// jemalloc counts its dirty pages (free whole pages, resident): the quote gives them as a lower
/// bound of the heap's free pages; mimalloc counts none: "not known for mimalloc".
#[test]
fn watch_quotes_jemallocs_dirty_pages_and_says_mimalloc_is_not_known() {
    testkit::require!(allocator "jemalloc");
    testkit::require!(allocator "mimalloc");
    let dir = tempfile::tempdir().unwrap();
    for (allocator, expected) in [
        (
            "jemalloc",
            "% of the heap's resident pages hold no live block (",
        ),
        (
            "mimalloc",
            "which of the heap's resident pages hold no live block is not known for mimalloc.",
        ),
    ] {
        let out = dir.path().join(allocator);
        let text = alloclens()
            .args(["watch", "-a", allocator, "--interval", "100ms", "-o"])
            .arg(&out)
            .arg("--")
            .arg(testkit::program("residency_waves"))
            .arg("1500")
            .ok();
        let stdout = String::from_utf8_lossy(&text.stdout).to_string();
        let json: Value =
            serde_json::from_slice(&std::fs::read(out.join("watch.json")).unwrap()).unwrap();
        let q = &json["residency"];
        assert_eq!(q["allocator"], allocator, "{json}");
        assert!(stdout.contains(expected), "{expected:?} not in {stdout}");
        if allocator == "jemalloc" {
            // Wave A's 20 MB freed: jemalloc keeps several MiB of them dirty.
            assert!(q["free_pages"].as_u64().unwrap() >= 1 << 20, "{q}");
            assert!(stdout.contains("at least "), "{stdout}");
        }
    }
}

/// `analyze --sites` of such a trace gives each site's resident and free-left bytes beside its
/// requested bytes, at the reading it names (text, JSON, CSV): keep_block holds its 64 pages,
/// temp_block's frees left 64; a trace without readings has neither column.
#[test]
fn sites_have_their_resident_and_free_left_pages() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record_layout(dir.path(), "residency_every_other");
    let v = alloclens()
        .args(["analyze", "--sites", "--json"])
        .arg(&trace)
        .json();
    let p = &v["processes"][0];
    assert!(
        p["residency"]["resident"].as_u64().unwrap() >= 128 * PAGE,
        "{p}"
    );
    let figures = |name: &str| {
        let f = p["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name)
            .unwrap_or_else(|| panic!("{name}: {p}"));
        let get = |k: &str| f["figures"][k].as_u64().unwrap();
        [get("resident_bytes"), get("free_left_bytes")]
    };
    assert_eq!(figures("keep_block"), [64 * PAGE, 0]);
    assert_eq!(figures("temp_block"), [0, 64 * PAGE]);

    let csv = dir.path().join("csv");
    let text = alloclens()
        .args(["analyze", "--sites", "-o"])
        .arg(&csv)
        .arg(&trace)
        .ok_stdout();
    let rows = testkit::csv_rows(csv.join("sites_by_function.csv"));
    let keep = rows.iter().find(|r| r["site"] == "keep_block").unwrap();
    assert_eq!(keep["resident_bytes"], (64 * PAGE).to_string(), "{keep:?}");
    assert!(
        text.contains("heap residency at the reading of the peak heap RSS"),
        "{text}"
    );
    let header = text
        .lines()
        .find(|l| l.ends_with("function (location, module)"))
        .unwrap();
    // Right-aligned columns: a value ends where its heading does.
    let cell = |site: &str, heading: &str| {
        let row = text
            .lines()
            .find(|l| l.contains(&format!(" {site} (")))
            .unwrap();
        let end = header.find(heading).unwrap() + heading.len();
        row[end - 10..end].trim().to_string()
    };
    let pages = trace::human_bytes(64 * PAGE);
    assert_eq!(cell("keep_block", "resident"), pages, "{text}");
    assert_eq!(cell("temp_block", "free left"), pages, "{text}");

    let bare = dir.path().join("bare.alt");
    let exe = testkit::program("residency_every_other");
    record(&bare, &["--stacks=all"], &[exe.as_os_str(), "0".as_ref()]);
    let json = alloclens()
        .args(["analyze", "--sites", "--json"])
        .arg(&bare)
        .ok_stdout();
    assert!(
        !json.contains("resident") && !json.contains("free_left"),
        "{json}"
    );
    let text = alloclens()
        .args(["analyze", "--sites"])
        .arg(&bare)
        .ok_stdout();
    assert!(
        !text.contains("resident") && !text.contains("free left"),
        "{text}"
    );
}

/// python3 recorded with addresses and every stack: its readings (the shim's own mappings among
/// them) are written whole and read back without damage. PAGEMAP_SCAN returned runs there that
/// overlapped, were written past their mapping's end, and the reader refused the rest of the file.
#[test]
fn a_python3_trace_with_readings_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("py.alt");
    let script = "import json\nd=[{'a': str(i)} for i in range(20000)]\nfor _ in range(3): d=json.loads(json.dumps(d))";
    record(
        &trace,
        &["--addresses", "--stacks=all", "--memory-interval", "20"],
        &["python3", "-c", script],
    );
    let out = alloclens()
        .args(["analyze", "--residency"])
        .arg(&trace)
        .ok();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning"), "{err}");
}
