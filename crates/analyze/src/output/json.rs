//! The full result as JSON (schema in docs/metrics.md).
use std::io::Write;

use crate::analysis::Analysis;

pub fn write_json<W: Write>(analysis: &Analysis, mut out: W) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut out, analysis)?;
    out.write_all(b"\n")
}
