//! The agent library (`embedded::WATCH_AGENT`), written once to a cache file at run time so the
//! single alloclens binary works anywhere, as the record shim and the KSM library are.
use std::path::PathBuf;

use crate::AgentError;

/// Environment variable that points alloclens at another agent build (e.g. one built with ASan).
pub const ENV_AGENT_OVERRIDE: &str = "ALLOCLENS_AGENT";

/// The path of a usable agent library: `$ALLOCLENS_AGENT`, or the embedded one written to
/// `$XDG_CACHE_HOME/alloclens/agent-<crc>-<len>.so` (else `~/.cache/...`, else
/// `/tmp/alloclens-<uid>/`).
pub fn library_path() -> Result<PathBuf, AgentError> {
    if let Some(p) = std::env::var_os(ENV_AGENT_OVERRIDE).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    embedded::WATCH_AGENT
        .cached()
        .map_err(|e| AgentError::Library {
            path: e.path,
            source: e.source,
        })
}
