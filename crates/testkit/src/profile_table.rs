//! The watch agent's heap profile tables (shim/agent/profile_table.h), read as tests check them:
//! a few header fields and the stored stacks. An independent reader of the C layout (offsets
//! written out here), so a test does not take the figures from the code it checks.
use std::path::{Path, PathBuf};

/// `state` values.
pub const TABLE_RUNNING: u32 = 1;
pub const TABLE_EXITED: u32 = 2;
pub const TABLE_DETACHED: u32 = 3;
/// `flags`: made by an agent attached to a running process.
pub const TABLE_FLAG_ATTACHED: u32 = 1;

#[derive(Debug, Clone)]
pub struct ProfileTable {
    pub sample_bytes: u64,
    pub pid: u32,
    pub state: u32,
    pub flags: u32,
    /// Sampled allocations since the table was made.
    pub samples: u64,
    pub live_entries: u64,
    /// The stored stacks with at least one sample.
    pub stacks: Vec<TableStack>,
}

#[derive(Debug, Clone)]
pub struct TableStack {
    pub samples: u64,
    /// Return addresses, innermost first.
    pub frames: Vec<u64>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The table at `path`, or None when it is not one (no magic yet, cut short).
pub fn read_profile_table(path: &Path) -> Option<ProfileTable> {
    let b = std::fs::read(path).ok()?;
    if b.len() < 4096 || &b[..8] != b"ALPROF01" || b.len() as u64 != u64_at(&b, 16) {
        return None;
    }
    let index_off = u64_at(&b, 88) as usize;
    let index_slots = u64_at(&b, 96) as usize;
    let stacks_off = u64_at(&b, 104) as usize;
    let mut stacks = Vec::new();
    for i in 0..index_slots {
        let slot = u64_at(&b, index_off + i * 8);
        if slot == 0 {
            continue;
        }
        let at = stacks_off + (slot & 0xffff_ffff) as usize * 8;
        let depth_commit = u32_at(&b, at);
        let samples = u64_at(&b, at + 16);
        if depth_commit == 0 || samples == 0 {
            continue;
        }
        let frames = (0..depth_commit as usize - 1)
            .map(|f| u64_at(&b, at + 56 + f * 8))
            .collect();
        stacks.push(TableStack { samples, frames });
    }
    Some(ProfileTable {
        sample_bytes: u64_at(&b, 24),
        pid: u32_at(&b, 32),
        state: u32_at(&b, 52),
        flags: u32_at(&b, 1264),
        samples: u64_at(&b, 152),
        live_entries: u64_at(&b, 160),
        stacks,
    })
}

/// The tables of process `pid` in `dir` (`PID-N.prof`), in N's order.
pub fn profile_tables(dir: &Path, pid: u32) -> Vec<PathBuf> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let n = name
                .strip_prefix(&format!("{pid}-"))?
                .strip_suffix(".prof")?;
            Some((n.parse().ok()?, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// The executable code of `file` mapped in process `pid` (/proc/PID/maps): start and end of
/// each executable range.
pub fn code_ranges(pid: u32, file: &Path) -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let file = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
    maps.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            if fields.len() < 6 || !fields[1].contains('x') || Path::new(fields[5]) != file {
                return None;
            }
            let (a, b) = fields[0].split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}
