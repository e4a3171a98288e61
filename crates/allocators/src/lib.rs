//! Which memory allocators are installed, how to run a program under one of them with given
//! settings, and whether it really ran under it.
//!
//! - [`discover`] lists the known allocators (glibc, jemalloc, mimalloc, tcmalloc, tbbmalloc):
//!   installed or not, library, version, Debian package.
//! - [`parse_variant`] turns a spec such as `jemalloc:dirty_decay_ms=0` into a [`Variant`],
//!   whose [`Variant::environment`] gives the variables to set on the child (LD_PRELOAD,
//!   MALLOC_CONF, GLIBC_TUNABLES, MIMALLOC_*, TCMALLOC_*, TBB_MALLOC_*).
//! - [`verify`] checks the files mapped in the child for the variant's library.
//!
//! The spec syntax and every setting are documented in docs/allocators.md.

pub mod catalog;
mod discover;
mod elf;
mod error;
mod mimalloc_probe;
pub mod settings;
mod variant;
mod verify;

pub use catalog::{known_names, Mechanism, GLIBC, JEMALLOC, MIMALLOC, TBBMALLOC, TCMALLOC};
pub use discover::{discover, library_dirs, package_version, AllocatorInfo};
pub use error::AllocatorError;
pub use variant::{parse_variant, parse_variant_list, split_variant_list, Variant};
pub use verify::{verify, LoadStatus, Verification};

/// The option names the mimalloc library at `library` reads (from a MIMALLOC_VERBOSE run),
/// None when they cannot be read.
pub fn mimalloc_options(library: &std::path::Path) -> Option<Vec<String>> {
    mimalloc_probe::option_names(library)
}
