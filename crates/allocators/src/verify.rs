//! Checking, from the files mapped in a child, that a variant's allocator really is in use.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog;
use crate::variant::Variant;

/// Whether the variant's library is mapped in the process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum LoadStatus {
    /// The library is mapped, at this path.
    Loaded { path: PathBuf },
    /// The library is not mapped: a static binary, a setuid program (the loader ignores
    /// LD_PRELOAD paths outside the trusted directories), or a program that clears LD_PRELOAD.
    NotLoaded,
    /// The variant preloads nothing (glibc): there is nothing to look for.
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    pub status: LoadStatus,
    /// Other known allocators mapped in the process anyway (a program that links jemalloc
    /// itself, or a preload inherited from the caller): their names, sorted.
    pub other_allocators: Vec<String>,
}

impl Verification {
    /// A one-line warning when the measurement may not be of the requested allocator.
    pub fn warning(&self, variant: &Variant) -> Option<String> {
        let others = self.other_allocators.join(", ");
        match (&self.status, others.is_empty()) {
            (LoadStatus::NotLoaded, _) => Some(format!(
                "variant `{}`: {} is NOT mapped in the process (static binary, setuid program, or LD_PRELOAD reset?): its figures are not {}'s",
                variant.label,
                variant.library.as_deref().unwrap_or(Path::new("?")).display(),
                variant.allocator
            )),
            (_, false) => Some(format!(
                "variant `{}`: other allocator libraries are mapped too ({others}); they may serve part of the allocations",
                variant.label
            )),
            (_, true) => None,
        }
    }
}

/// Compares the variant's library with `mapped`, the file paths from /proc/PID/maps.
/// Paths are compared canonicalised, so a `.so.2` symlink matches the file it points to.
pub fn verify(variant: &Variant, mapped: &[PathBuf]) -> Verification {
    let mapped: Vec<PathBuf> = mapped.iter().map(|p| canonical(p)).collect();
    let status = match &variant.library {
        None => LoadStatus::NotApplicable,
        Some(library) => {
            let wanted = canonical(library);
            match mapped.iter().find(|p| **p == wanted) {
                Some(path) => LoadStatus::Loaded { path: path.clone() },
                None => LoadStatus::NotLoaded,
            }
        }
    };
    let own_library = variant.library.as_deref().map(canonical);
    let mut other_allocators: Vec<String> = mapped
        .iter()
        .filter(|p| Some(*p) != own_library.as_ref())
        .filter_map(|p| catalog::owner_of_file(p.file_name()?.to_str()?))
        // tbbmalloc's proxy pulls in libtbbmalloc itself: the same allocator, not another.
        .filter(|owner| owner.name != variant.allocator)
        .map(|owner| owner.name.to_string())
        .collect();
    other_allocators.sort_unstable();
    other_allocators.dedup();
    Verification {
        status,
        other_allocators,
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
