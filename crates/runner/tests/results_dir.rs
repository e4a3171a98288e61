//! A results directory written by an earlier alloclens (schema version 1) loads, and nothing of its
//! results.json is lost on the way: the types of `runner` hold every field the writer wrote.
use std::path::Path;

use runner::results_dir::{ResultsDirContents, SCHEMA_VERSION};

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results-v1"
    ))
}

#[test]
fn results_of_an_earlier_alloclens_load() {
    let read = ResultsDirContents::load(fixture()).unwrap();
    let r = &read.results;
    assert_eq!(r.schema_version, SCHEMA_VERSION);
    assert_eq!(r.variants.len(), 2);
    assert_eq!(r.runs.len(), 2);
    assert!(r.runs.iter().all(|run| run.ending.ok()));
    assert!(r.runs.iter().all(|run| run.memory.pss.peak > 0));
    assert_eq!(r.summary.len(), 1);
    assert_eq!(read.samples.len(), 4);
    assert!(read.samples.iter().all(|s| s.pss > 0));
}

#[test]
fn every_field_of_an_earlier_results_json_is_read() {
    let text = std::fs::read_to_string(fixture().join("results.json")).unwrap();
    let written: serde_json::Value = serde_json::from_str(&text).unwrap();
    let read = ResultsDirContents::load(fixture()).unwrap();
    let again = serde_json::to_value(&read.results).unwrap();
    assert_eq!(
        again, written,
        "a field of results.json is not in runner's types"
    );
}
