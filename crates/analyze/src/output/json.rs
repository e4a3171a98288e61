//! The full result as JSON (schema in docs/metrics.md).
use std::io::Write;

use crate::analysis::Analysis;

/// Compact (no indentation): indented, a trace of 400 short commands took 57 KB per image of 574
/// calls, half of it spaces and line breaks (issue 35 item 9); `jq .` indents it for reading.
pub fn write_json<W: Write>(analysis: &Analysis, mut out: W) -> std::io::Result<()> {
    serde_json::to_writer(&mut out, analysis)?;
    out.write_all(b"\n")
}
