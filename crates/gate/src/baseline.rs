//! The baseline file: the figures of an accepted state, kept in the repository, which "+N%" limits
//! are relative to. JSON, written by `gate --update-baseline`.
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::GateError;

pub const BASELINE_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub schema_version: u32,
    pub tool: String,
    pub created: String,
    /// Figure key (`peak_rss[glibc]`, `allocations`, `site[parse_row].not_freed_bytes`) -> value.
    pub figures: BTreeMap<String, f64>,
}

impl Baseline {
    pub fn new(figures: BTreeMap<String, f64>) -> Baseline {
        Baseline {
            schema_version: BASELINE_VERSION,
            tool: format!("alloclens {}", env!("CARGO_PKG_VERSION")),
            created: chrono::Local::now().to_rfc3339(),
            figures,
        }
    }

    pub fn read(path: &Path) -> Result<Baseline, GateError> {
        let text = std::fs::read_to_string(path).map_err(|source| GateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |what: String| GateError::Baseline {
            path: path.to_path_buf(),
            what,
        };
        let baseline: Baseline = serde_json::from_str(&text).map_err(|e| {
            bad(format!(
                "not a baseline file ({e}); make one with --update-baseline"
            ))
        })?;
        if baseline.schema_version > BASELINE_VERSION {
            return Err(bad(format!(
                "version {} is newer than this alloclens reads ({BASELINE_VERSION}): update alloclens",
                baseline.schema_version
            )));
        }
        Ok(baseline)
    }

    /// Written whole (a regular file replaced by rename; never a device or a link's target
    /// replaced by something else).
    pub fn write(&self, path: &Path) -> Result<(), GateError> {
        safe_output::write_whole(path, |out| {
            serde_json::to_writer_pretty(&mut *out, self)?;
            out.write_all(b"\n")
        })
        .map_err(|source| GateError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}
