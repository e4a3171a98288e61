//! The static catalog of allocators alloclens knows: library file, Debian package, config mechanism.

/// How an allocator reads its settings from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// jemalloc: one `MALLOC_CONF=key:value,key:value` variable.
    MallocConf,
    /// glibc: one `GLIBC_TUNABLES=glibc.malloc.key=value:...` variable.
    GlibcTunables,
    /// mimalloc: one `MIMALLOC_<OPTION>=value` variable per option.
    MimallocEnv,
    /// tcmalloc, tbbmalloc: one fixed variable per setting, named in the settings table.
    EnvPerSetting,
}

/// A library file that provides an allocator, and the Debian package that ships it.
#[derive(Debug, Clone, Copy)]
pub struct LibraryCandidate {
    pub file: &'static str,
    pub package: &'static str,
}

/// One known allocator.
#[derive(Debug, Clone, Copy)]
pub struct AllocatorDef {
    pub name: &'static str,
    pub description: &'static str,
    /// Libraries to preload, in order of preference; empty for the system allocator.
    pub libraries: &'static [LibraryCandidate],
    /// File-name prefix of every library of this allocator (its debug, proxy or profiler builds
    /// included), used to recognise it among the files mapped in a process.
    pub file_prefix: Option<&'static str>,
    pub mechanism: Mechanism,
    /// The variables settings are written to, as shown to users.
    pub settings_via: &'static str,
    /// The package that holds the system allocator (glibc), whose version we report.
    pub system_package: Option<&'static str>,
}

impl AllocatorDef {
    /// The package to install when the allocator is missing.
    pub fn install_package(&self) -> Option<&'static str> {
        self.libraries.first().map(|c| c.package)
    }
}

/// The names of the known allocators, as users write them in `-a` and as the agent reports them:
/// the one spelling every crate uses.
pub const GLIBC: &str = "glibc";
pub const JEMALLOC: &str = "jemalloc";
pub const MIMALLOC: &str = "mimalloc";
pub const TCMALLOC: &str = "tcmalloc";
pub const TBBMALLOC: &str = "tbbmalloc";

pub static CATALOG: &[AllocatorDef] = &[
    AllocatorDef {
        name: GLIBC,
        description: "the system malloc (ptmalloc2 in the C library), nothing to preload",
        libraries: &[],
        file_prefix: None,
        mechanism: Mechanism::GlibcTunables,
        settings_via: "GLIBC_TUNABLES",
        system_package: Some("libc6"),
    },
    AllocatorDef {
        name: JEMALLOC,
        description: "jemalloc: arenas per CPU, time-based purging of dirty pages",
        libraries: &[LibraryCandidate {
            file: "libjemalloc.so.2",
            package: "libjemalloc2",
        }],
        file_prefix: Some("libjemalloc"),
        mechanism: Mechanism::MallocConf,
        settings_via: "MALLOC_CONF",
        system_package: None,
    },
    AllocatorDef {
        name: MIMALLOC,
        description: "Microsoft mimalloc: free-list sharding, segments per thread",
        libraries: &[LibraryCandidate {
            file: "libmimalloc.so.2",
            package: "libmimalloc2.0",
        }],
        file_prefix: Some("libmimalloc"),
        mechanism: Mechanism::MimallocEnv,
        settings_via: "MIMALLOC_<OPTION>",
        system_package: None,
    },
    AllocatorDef {
        name: TCMALLOC,
        description: "gperftools tcmalloc: thread caches over a central page heap",
        libraries: &[
            LibraryCandidate {
                file: "libtcmalloc_minimal.so.4",
                package: "libtcmalloc-minimal4",
            },
            LibraryCandidate {
                file: "libtcmalloc.so.4",
                package: "libgoogle-perftools4",
            },
        ],
        file_prefix: Some("libtcmalloc"),
        mechanism: Mechanism::EnvPerSetting,
        settings_via: "TCMALLOC_<SETTING>",
        system_package: None,
    },
    AllocatorDef {
        name: TBBMALLOC,
        description: "oneTBB scalable allocator, preloaded through its malloc proxy",
        libraries: &[LibraryCandidate {
            file: "libtbbmalloc_proxy.so.2",
            package: "libtbbmalloc2",
        }],
        file_prefix: Some("libtbbmalloc"),
        mechanism: Mechanism::EnvPerSetting,
        settings_via: "TBB_MALLOC_<SETTING>",
        system_package: None,
    },
];

/// The allocator of that name, if known (names are case-insensitive).
pub fn find(name: &str) -> Option<&'static AllocatorDef> {
    CATALOG.iter().find(|a| a.name.eq_ignore_ascii_case(name))
}

/// The known allocator names, comma separated, for error messages.
pub fn known_names() -> String {
    CATALOG
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The known allocator a library file belongs to, judged by its file name.
pub fn owner_of_file(file_name: &str) -> Option<&'static AllocatorDef> {
    CATALOG.iter().find(|a| {
        a.file_prefix.is_some_and(|prefix| {
            file_name.strip_prefix(prefix).is_some_and(|rest| {
                rest.starts_with('.') || rest.starts_with('_') || rest.starts_with('-')
            }) && file_name.contains(".so")
        })
    })
}
