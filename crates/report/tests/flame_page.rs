//! Flame graphs and the call-site table from generic input (stacks as root-first frame names with a
//! value), opened in headless Chromium (Debian's `chromium`; skipped with a note when it is missing):
//! every graph drawn, the search finds the frames it should with their value, a heading sorts the table.
//! Screenshots are kept under target/test-artifacts/ (flame-*.png).

use std::path::Path;

use report::{Block, Document, FlameGraph, Section, SiteColumn, SiteRow, SiteTable, Unit};
use serde_json::{json, Value};

/// The page's render status (page.js) after opening `html#fragment`, and a screenshot `name.png`.
fn open(html: &Path, fragment: &str, name: &str) -> Option<Value> {
    let url = format!("file://{}#{fragment}", html.display());
    let dom = testkit::open_in_browser(&url, (1280, 1000), name)?;
    Some(testkit::render_status(&dom))
}

/// The call sites: A allocates 1000 blocks through a helper, B 10, C leaks 5 (64 B each).
fn document() -> Document {
    let calls = [
        (vec!["main", "A", "helper"], 1000u64),
        (vec!["main", "B", "helper"], 10),
        (vec!["main", "C <leaks>"], 5),
    ];
    let bytes = calls.iter().map(|(s, n)| (s.clone(), n * 64));
    let leaks = vec![(vec!["main", "C <leaks>"], 5 * 64)];
    let mut s = Section::new("sites", "Call sites");
    s.push_flame(FlameGraph::new(
        "flame-calls",
        "Allocations <by call>",
        Unit::Count,
        calls.clone(),
    ));
    s.push_flame(FlameGraph::new("flame-bytes", "Bytes", Unit::Bytes, bytes));
    s.push_flame(FlameGraph::new(
        "flame-leaks",
        "Leaked bytes",
        Unit::Bytes,
        leaks,
    ));
    s.push_flame(FlameGraph::new(
        "flame-empty",
        "Nothing",
        Unit::Bytes,
        Vec::<(Vec<&str>, u64)>::new(),
    ));
    let row = |name: &str, calls: f64, leaked: f64| SiteRow {
        name: name.into(),
        detail: Some(format!("{name}.c:1")),
        values: vec![calls, calls * 64.0, leaked],
    };
    s.push(Block::Sites(SiteTable {
        id: "sites-table".into(),
        caption: Some("Functions".into()),
        site_label: "function".into(),
        columns: vec![
            SiteColumn {
                label: "calls".into(),
                unit: Unit::Count,
                decimals: None,
            },
            SiteColumn {
                label: "bytes".into(),
                unit: Unit::Bytes,
                decimals: None,
            },
            SiteColumn {
                label: "leaked".into(),
                unit: Unit::Bytes,
                decimals: None,
            },
        ],
        rows: vec![
            row("helper", 1010.0, 0.0),
            row("A", 1000.0, 0.0),
            row("B", 10.0, 0.0),
            row("C <leaks>", 5.0, 320.0),
        ],
        flames: vec![
            "flame-calls".into(),
            "flame-bytes".into(),
            "flame-leaks".into(),
        ],
    }));
    Document {
        title: "flame graphs".into(),
        sections: vec![s],
    }
}

#[test]
fn flame_graphs_draw_search_and_the_table_sorts() {
    let dir = tempfile::tempdir().unwrap();
    let html = report::render_html(&document()).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains(" src="));
    assert!(html.contains("Allocations &lt;by call&gt;") && html.contains("C &lt;leaks&gt;"));
    assert!(
        !html.contains("flame-empty"),
        "an empty flame graph is left out"
    );
    let path = dir.path().join("page.html");
    std::fs::write(&path, &html).unwrap();

    let Some(status) = open(&path, "find=helper&sort=4", "flame-search") else {
        return;
    };
    assert_eq!(status["errors"], json!([]), "{status}");
    assert_eq!(status["blocked"], json!([]), "{status}");
    assert_eq!(status["flames"], 3, "{status}");
    assert_eq!(status["flames_drawn"], 3, "{status}");
    // all, main, A, helper, B, helper, C in calls and bytes; all, main, C in leaks (B's and C's
    // frames are narrow, but wider than a pixel).
    assert_eq!(status["flame_frames"], 7 + 7 + 3, "{status}");
    let search = &status["flame_search"];
    assert_eq!(search["flame-calls"], json!({"frames": 2, "value": 1010}));
    assert_eq!(
        search["flame-bytes"],
        json!({"frames": 2, "value": 1010 * 64})
    );
    assert_eq!(search["flame-leaks"], json!({"frames": 0, "value": 0}));
    // Column 4 is "leaked": sorted descending, C comes first.
    assert_eq!(
        status["sites"]["sites-table"],
        json!({"rows": 4, "sorted": 4, "first": "C <leaks>"})
    );

    let Some(status) = open(&path, "sort=2", "flame-sorted") else {
        return;
    };
    assert_eq!(
        status["sites"]["sites-table"]["first"], "helper",
        "{status}"
    );
    assert_eq!(status["flame_search"], json!({}), "no search without find=");
}
