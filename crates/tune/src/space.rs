//! The search space: every selected allocator's default and a spread of its documented settings,
//! built through the allocators crate (the settings tables `run` validates), so every candidate is
//! a variant `run` would accept. The values and why they were chosen are in docs/tune.md.
use std::path::Path;

use allocators::{
    parse_variant, AllocatorError, Variant, GLIBC, JEMALLOC, MIMALLOC, TBBMALLOC, TCMALLOC,
};
use serde::Serialize;

pub use runner::tune_record::Origin;

/// Values tried for one setting of one allocator, one candidate each (the other settings at their
/// defaults). They bracket the default on the side that trades memory for time and the other.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub allocator: &'static str,
    /// Settings written as in a spec; a preset sets several (`a=1,b=2`).
    pub settings: &'static [&'static str],
}

macro_rules! spread {
    ($allocator:expr, [$($s:expr),* $(,)?]) => {
        Spread { allocator: $allocator, settings: &[$($s),*] }
    };
}

/// The spread of every known allocator (docs/tune.md says why each value).
pub static SPREAD: &[Spread] = &[
    // glibc: arenas per thread group; the trim and mmap thresholds fix the dynamic ones; the tcache.
    spread!(GLIBC, ["arena_max=1", "arena_max=2", "arena_max=4"]),
    spread!(GLIBC, ["trim_threshold=32k", "trim_threshold=1M"]),
    spread!(GLIBC, ["mmap_threshold=32k", "mmap_threshold=1M"]),
    spread!(GLIBC, ["tcache_count=0", "tcache_count=32"]),
    spread!(GLIBC, ["mxfast=0"]),
    // jemalloc: purging (decay times, background threads), arenas, thread caches.
    spread!(
        JEMALLOC,
        [
            "dirty_decay_ms=0",
            "dirty_decay_ms=1000",
            "dirty_decay_ms=30000"
        ]
    ),
    spread!(JEMALLOC, ["dirty_decay_ms=0,muzzy_decay_ms=0"]),
    spread!(JEMALLOC, ["background_thread=true"]),
    spread!(JEMALLOC, ["narenas=1", "narenas=2", "narenas=4"]),
    spread!(JEMALLOC, ["percpu_arena=percpu"]),
    spread!(JEMALLOC, ["tcache_max=4k", "tcache_max=128k"]),
    spread!(JEMALLOC, ["retain=false"]),
    // mimalloc: purge delay, page reset, segment decommit, abandoned pages.
    spread!(
        MIMALLOC,
        ["purge_delay=0", "purge_delay=100", "purge_delay=1000"]
    ),
    spread!(MIMALLOC, ["allow_purge=false"]),
    spread!(MIMALLOC, ["page_reset=true"]),
    spread!(MIMALLOC, ["segment_decommit_delay=0"]),
    spread!(MIMALLOC, ["abandoned_page_purge=true"]),
    // tcmalloc: release rate, decommit, the thread caches' bound.
    spread!(
        TCMALLOC,
        ["release_rate=0", "release_rate=5", "release_rate=10"]
    ),
    spread!(TCMALLOC, ["aggressive_decommit=true"]),
    spread!(
        TCMALLOC,
        [
            "max_total_thread_cache_bytes=4M",
            "max_total_thread_cache_bytes=128M"
        ]
    ),
    // tbbmalloc: huge pages.
    spread!(TBBMALLOC, ["use_huge_pages=true"]),
];

/// One candidate of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub id: usize,
    pub variant: Variant,
    pub origin: Origin,
}

/// What `-a` selects: allocators by name (their default and spread) and given variants.
#[derive(Debug, Clone, Default)]
pub struct SpaceSelection {
    /// Names of known allocators: each brings its default and its spread.
    pub allocators: Vec<String>,
    /// Variants tried as they are.
    pub given: Vec<Variant>,
}

#[derive(Debug, thiserror::Error)]
pub enum SpaceError {
    #[error(transparent)]
    Allocator(#[from] Box<AllocatorError>),
    #[error("cannot read the space file '{path}': {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("space file '{path}' line {line}: {source} (one variant spec per line, as in -a; `#` starts a comment)")]
    Line {
        path: String,
        line: usize,
        source: Box<AllocatorError>,
    },
    #[error("space file '{0}' names no variant (one variant spec per line, as in -a)")]
    Empty(String),
    #[error("variant '{0}' is given twice (give the second one a label: name@label:settings)")]
    Twice(String),
}

/// The candidates: glibc's default first (the baseline), then per selected allocator its default
/// and its spread, then the given variants. A spread value the installed version does not accept
/// (a mimalloc option it lacks) is left out and returned as a note.
pub fn build_space(
    selection: &SpaceSelection,
) -> Result<(Vec<Candidate>, Vec<String>), SpaceError> {
    let parse = |spec: &str| parse_variant(spec).map_err(Box::new);
    let mut out: Vec<(Variant, Origin)> = vec![(parse(GLIBC)?, Origin::Baseline)];
    let mut notes = Vec::new();
    for name in &selection.allocators {
        let default = parse(name)?;
        let allocator = default.allocator.clone();
        if allocator != GLIBC {
            out.push((default, Origin::Default));
        }
        for spread in SPREAD.iter().filter(|s| s.allocator == allocator) {
            for settings in spread.settings {
                match parse_variant(&format!("{allocator}:{settings}")) {
                    Ok(v) => out.push((v, Origin::Spread)),
                    Err(e) => notes.push(format!("left out of the space: {e}")),
                }
            }
        }
    }
    for v in &selection.given {
        if v.label == GLIBC {
            continue;
        }
        out.push((v.clone(), Origin::Given));
    }
    let mut labels: Vec<&str> = out.iter().map(|(v, _)| v.label.as_str()).collect();
    labels.sort_unstable();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        return Err(SpaceError::Twice(w[0].to_string()));
    }
    let candidates = out
        .into_iter()
        .enumerate()
        .map(|(id, (variant, origin))| Candidate {
            id,
            variant,
            origin,
        })
        .collect();
    Ok((candidates, notes))
}

/// `--space FILE`: one variant spec per line (the syntax of -a), `#` comments and blank lines
/// ignored. Every variant is checked as `run` checks -a.
pub fn parse_space_file(path: &Path) -> Result<Vec<Variant>, SpaceError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SpaceError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut variants = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let spec = line.split('#').next().unwrap_or("").trim();
        if spec.is_empty() {
            continue;
        }
        variants.push(parse_variant(spec).map_err(|source| SpaceError::Line {
            path: shown.clone(),
            line: i + 1,
            source: Box::new(source),
        })?);
    }
    if variants.is_empty() {
        return Err(SpaceError::Empty(shown));
    }
    Ok(variants)
}
