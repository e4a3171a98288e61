//! The summary as JSON: exactly results.json's `summary` (and `run --json`'s stdout); with
//! `--ksm`, an object of results.json's `summary` and `ksm_savings`.
use std::io::{self, Write};

use runner::{Group, KsmSaving};

pub(crate) fn write_summary(
    groups: &[Group],
    ksm: &[KsmSaving],
    out: &mut dyn Write,
) -> io::Result<()> {
    if ksm.is_empty() {
        serde_json::to_writer_pretty(&mut *out, groups)?;
    } else {
        let both = serde_json::json!({ "summary": groups, "ksm_savings": ksm });
        serde_json::to_writer_pretty(&mut *out, &both)?;
    }
    writeln!(out)
}
