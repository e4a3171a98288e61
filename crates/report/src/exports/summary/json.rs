//! The summary as JSON: exactly results.json's `summary` (and `run --json`'s stdout).
use std::io::{self, Write};

use runner::Group;

pub(super) fn write(groups: &[Group], out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, groups)?;
    writeln!(out)
}
