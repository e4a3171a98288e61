//! results.json read with the runner's own types, so a test names its fields (`runs[0].memory`)
//! and a field renamed in the runner fails to compile rather than reading `null`.

use std::path::Path;

/// DIR/results.json, as the runner wrote it. Panics (failing the test) when it is missing or does
/// not parse. Fields absent from the file take the runner's defaults: a test that checks a field
/// is written at all reads the raw JSON instead.
pub fn results(dir: &Path) -> runner::RunResults {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} not readable: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not a results.json: {e}", path.display()))
}
