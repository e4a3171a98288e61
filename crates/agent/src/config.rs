//! What the watched command's environment needs to run the agent.
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::{library_path, AgentError};

/// The directory the agent writes its snapshots to (and reads trim requests from).
pub const ENV_DIR: &str = "ALLOCLENS_AGENT_DIR";
/// Milliseconds between two snapshots (at least 1).
pub const ENV_INTERVAL_MS: &str = "ALLOCLENS_AGENT_INTERVAL_MS";
/// Mean requested bytes between two sampled allocations of the heap profile's sampler; unset (or
/// 0): no sampler. The agent then keeps its table in the directory (shim/agent/profile_table.h).
pub const ENV_PROFILE_BYTES: &str = "ALLOCLENS_PROFILE_BYTES";
/// The sampler's default interval: jemalloc's `lg_prof_sample` 19 and Go's `MemProfileRate`, so
/// that profiles compare.
pub const DEFAULT_PROFILE_BYTES: u64 = 512 * 1024;

/// Where the agent of a watched command writes and how often.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub dir: PathBuf,
    pub interval: Duration,
    /// The heap profile's sampling interval in bytes, when it is on (`watch --profile`).
    pub profile_bytes: Option<u64>,
}

impl AgentConfig {
    /// The variables to add to the watched command's environment (besides LD_PRELOAD, see
    /// [`AgentConfig::preload`]).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let ms = self.interval.as_millis().clamp(1, u64::MAX as u128) as u64;
        let mut env = vec![
            (ENV_DIR.into(), self.dir.clone().into_os_string()),
            (ENV_INTERVAL_MS.into(), ms.to_string().into()),
        ];
        if let Some(bytes) = self.profile_bytes.filter(|b| *b > 0) {
            env.push((ENV_PROFILE_BYTES.into(), bytes.to_string().into()));
        }
        env
    }

    /// The LD_PRELOAD value: the agent first (it forwards every call to the next definition,
    /// dlsym(RTLD_NEXT)), then the allocator variant's own value if any.
    pub fn preload(&self, allocator_preload: Option<&OsStr>) -> Result<OsString, AgentError> {
        let lib = library_path()?;
        if lib
            .as_os_str()
            .as_bytes()
            .iter()
            .any(|b| *b == b' ' || *b == b':')
        {
            return Err(AgentError::PreloadPath { path: lib });
        }
        let mut v = lib.into_os_string();
        if let Some(rest) = allocator_preload.filter(|p| !p.is_empty()) {
            v.push(" ");
            v.push(rest);
        }
        Ok(v)
    }
}
