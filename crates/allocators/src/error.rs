//! Typed errors of spec parsing and library checks; each message says what to do next.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocatorError {
    #[error("empty allocator spec (expected e.g. `jemalloc`, `glibc:arena_max=2` or `name=/path/lib.so`)")]
    EmptySpec,

    #[error("bad allocator spec `{spec}`: {reason}")]
    Syntax { spec: String, reason: String },

    #[error(
        "unknown allocator `{name}` (known: {known}; or give a library as `{name}=/path/lib.so`)"
    )]
    UnknownAllocator { name: String, known: String },

    #[error(
        "allocator `{allocator}` is not installed: {library} not found (install it with `apt-get install {package}`)"
    )]
    NotInstalled {
        allocator: String,
        library: String,
        package: String,
    },

    #[error("allocator library {path} for `{name}` does not exist")]
    LibraryMissing { name: String, path: PathBuf },

    #[error("allocator library {path} for `{name}` is not an ELF shared library ({reason})")]
    NotElf {
        name: String,
        path: PathBuf,
        reason: String,
    },

    #[error(
        "allocator library path {path} contains a space or a colon, which LD_PRELOAD cannot carry"
    )]
    UnpreloadablePath { path: PathBuf },

    #[error("unknown setting `{setting}` for {allocator} (known: {known})")]
    UnknownSetting {
        allocator: String,
        setting: String,
        known: String,
    },

    #[error(
        "bad value `{value}` for {allocator} setting `{setting}`: expected {expected} (known settings: {known})"
    )]
    BadValue {
        allocator: String,
        setting: String,
        value: String,
        expected: String,
        known: String,
    },

    #[error(
        "allocator `{allocator}` is a custom library: it has no known settings, so `{setting}` cannot be translated (set raw variables with `env.NAME=VALUE`)"
    )]
    CustomSettings { allocator: String, setting: String },
}
