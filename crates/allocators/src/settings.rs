//! The known settings of each allocator, the kind of value each takes, and value checking.
//!
//! Tables follow the versions Debian 12 ships (jemalloc 5.3, glibc 2.36, mimalloc 2.0.9,
//! gperftools 2.10, oneTBB 2021.8); tests check them against the installed libraries.

/// The kind of value a setting takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A whole number within the bounds.
    Integer { min: i64, max: i64 },
    /// true/false (also 1/0, yes/no, on/off).
    Bool,
    /// A byte count: `131072`, `128k`, `64M`, `1G` (binary multiples).
    Size,
    /// A decimal number, at least `min`.
    Float { min: f64 },
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// A word or path without separators (`,` `:` `=` or blanks).
    Text,
}

impl Kind {
    /// What a valid value looks like, for error messages.
    pub fn expected(&self) -> String {
        match self {
            Kind::Integer { min, max } if *max == i64::MAX => format!("an integer >= {min}"),
            Kind::Integer { min, max } => format!("an integer from {min} to {max}"),
            Kind::Bool => "true or false".to_string(),
            Kind::Size => "a size in bytes, optionally with k, M or G".to_string(),
            Kind::Float { min } => format!("a number >= {min}"),
            Kind::Enum(words) => format!("one of {}", words.join(", ")),
            Kind::Text => "a word or path without `,` `:` `=` or blanks".to_string(),
        }
    }
}

/// A checked value, kept typed so each allocator can spell it its own way.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Integer(i64),
    Bool(bool),
    Bytes(u64),
    Float(String),
    Word(String),
}

impl Value {
    /// The value as the allocator expects it; only jemalloc spells booleans as words.
    pub fn render(&self, bool_words: bool) -> String {
        match self {
            Value::Integer(n) => n.to_string(),
            Value::Bool(b) if bool_words => b.to_string(),
            Value::Bool(b) => u8::from(*b).to_string(),
            Value::Bytes(n) => n.to_string(),
            Value::Float(s) | Value::Word(s) => s.clone(),
        }
    }
}

/// Checks `raw` against `kind`; None when it does not fit.
pub fn check_value(kind: &Kind, raw: &str) -> Option<Value> {
    let raw = raw.trim();
    match kind {
        Kind::Integer { min, max } => raw
            .parse::<i64>()
            .ok()
            .filter(|n| n >= min && n <= max)
            .map(Value::Integer),
        Kind::Bool => parse_bool(raw).map(Value::Bool),
        Kind::Size => parse_size(raw).map(Value::Bytes),
        Kind::Float { min } => raw
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && x >= min)
            .map(|_| Value::Float(raw.to_string())),
        Kind::Enum(words) => words
            .iter()
            .find(|w| w.eq_ignore_ascii_case(raw))
            .map(|w| Value::Word(w.to_string())),
        Kind::Text => (!raw.is_empty()
            && !raw.contains(|c: char| c == ',' || c == ':' || c == '=' || c.is_whitespace()))
        .then(|| Value::Word(raw.to_string())),
    }
}

fn parse_bool(raw: &str) -> Option<bool> {
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `4096`, `4k`, `4K`, `4KiB`, `2M`, `1G` -> bytes (binary multiples).
pub fn parse_size(raw: &str) -> Option<u64> {
    let digits_end = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, suffix) = raw.split_at(digits_end);
    let number: u64 = number.parse().ok()?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

/// One setting an allocator understands.
#[derive(Debug, Clone, Copy)]
pub struct SettingDef {
    /// The name users write in a spec.
    pub name: &'static str,
    pub kind: Kind,
    /// Where it goes: the MALLOC_CONF key, the glibc tunable, the mimalloc option, or the
    /// environment variable (tcmalloc, tbbmalloc).
    pub target: &'static str,
    /// Other names of the same setting in other versions (mimalloc renames options).
    pub aliases: &'static [&'static str],
    pub meaning: &'static str,
}

const fn int(min: i64) -> Kind {
    Kind::Integer { min, max: i64::MAX }
}

const fn range(min: i64, max: i64) -> Kind {
    Kind::Integer { min, max }
}

macro_rules! setting {
    ($name:expr, $kind:expr, $target:expr, $meaning:expr) => {
        SettingDef {
            name: $name,
            kind: $kind,
            target: $target,
            aliases: &[],
            meaning: $meaning,
        }
    };
    ($name:expr, $kind:expr, $target:expr, $aliases:expr, $meaning:expr) => {
        SettingDef {
            name: $name,
            kind: $kind,
            target: $target,
            aliases: $aliases,
            meaning: $meaning,
        }
    };
}

pub static JEMALLOC: &[SettingDef] = &[
    setting!(
        "dirty_decay_ms",
        int(-1),
        "dirty_decay_ms",
        "time in ms before unused dirty pages are purged (0: at once, -1: never)"
    ),
    setting!(
        "muzzy_decay_ms",
        int(-1),
        "muzzy_decay_ms",
        "time in ms before muzzy (lazily freed) pages are returned (0: at once, -1: never)"
    ),
    setting!(
        "background_thread",
        Kind::Bool,
        "background_thread",
        "purge in background threads instead of in application threads"
    ),
    setting!(
        "max_background_threads",
        int(1),
        "max_background_threads",
        "at most this many background purging threads"
    ),
    // jemalloc clamps more arenas to its limit (MALLOCX_ARENA_LIMIT - 2 = 4094 in 5.3) and says so
    // on stderr: a value above it would run as 4094 under the name the user gave.
    setting!(
        "narenas",
        range(1, 4094),
        "narenas",
        "number of arenas (default 4 per CPU, at most 4094)"
    ),
    setting!(
        "percpu_arena",
        Kind::Enum(&["disabled", "percpu", "phycpu"]),
        "percpu_arena",
        "bind threads to arenas per CPU"
    ),
    setting!(
        "oversize_threshold",
        Kind::Size,
        "oversize_threshold",
        "allocations from this size get a dedicated arena (0: off)"
    ),
    setting!(
        "retain",
        Kind::Bool,
        "retain",
        "keep unused virtual memory mapped (decommitted) instead of unmapping it"
    ),
    setting!(
        "dss",
        Kind::Enum(&["disabled", "primary", "secondary"]),
        "dss",
        "use of sbrk relative to mmap"
    ),
    setting!(
        "metadata_thp",
        Kind::Enum(&["disabled", "auto", "always"]),
        "metadata_thp",
        "transparent huge pages for metadata"
    ),
    setting!(
        "thp",
        Kind::Enum(&["default", "always", "never"]),
        "thp",
        "transparent huge pages for all arenas"
    ),
    setting!("tcache", Kind::Bool, "tcache", "per-thread caches"),
    setting!(
        "tcache_max",
        Kind::Size,
        "tcache_max",
        "largest size class kept in thread caches"
    ),
    setting!(
        "lg_extent_max_active_fit",
        range(0, 63),
        "lg_extent_max_active_fit",
        "log2 of the largest ratio of a reused extent's size to the request"
    ),
    setting!("hpa", Kind::Bool, "hpa", "experimental huge page allocator"),
    setting!(
        "cache_oblivious",
        Kind::Bool,
        "cache_oblivious",
        "randomise large allocations' offset within their first page"
    ),
    setting!(
        "mutex_max_spin",
        int(-1),
        "mutex_max_spin",
        "spins before a mutex blocks"
    ),
    setting!(
        "zero_realloc",
        Kind::Enum(&["alloc", "free", "abort"]),
        "zero_realloc",
        "what realloc(p, 0) does"
    ),
    setting!(
        "junk",
        Kind::Enum(&["true", "false", "alloc", "free"]),
        "junk",
        "fill allocated and/or freed memory with junk bytes"
    ),
    setting!("zero", Kind::Bool, "zero", "zero-fill every allocation"),
    setting!("abort", Kind::Bool, "abort", "abort on warnings"),
    setting!(
        "abort_conf",
        Kind::Bool,
        "abort_conf",
        "abort on an invalid MALLOC_CONF entry"
    ),
    setting!(
        "confirm_conf",
        Kind::Bool,
        "confirm_conf",
        "print the configuration sources at start"
    ),
    setting!(
        "stats_print",
        Kind::Bool,
        "stats_print",
        "print statistics (options included) to stderr at exit"
    ),
    setting!(
        "stats_print_opts",
        Kind::Text,
        "stats_print_opts",
        "letters selecting what stats_print omits (see man jemalloc)"
    ),
    setting!(
        "stats_interval",
        int(-1),
        "stats_interval",
        "print statistics every N allocated bytes (-1: never)"
    ),
    setting!("prof", Kind::Bool, "prof", "heap profiling"),
    setting!(
        "prof_prefix",
        Kind::Text,
        "prof_prefix",
        "file name prefix of heap profile dumps"
    ),
    setting!(
        "prof_active",
        Kind::Bool,
        "prof_active",
        "profiling active at start"
    ),
    setting!(
        "lg_prof_sample",
        range(0, 63),
        "lg_prof_sample",
        "log2 of the mean bytes between profile samples"
    ),
    setting!(
        "lg_prof_interval",
        range(-1, 63),
        "lg_prof_interval",
        "log2 of the bytes allocated between profile dumps (-1: none)"
    ),
    setting!(
        "prof_final",
        Kind::Bool,
        "prof_final",
        "dump a profile at exit"
    ),
    setting!("prof_leak", Kind::Bool, "prof_leak", "report leaks at exit"),
];

pub static GLIBC: &[SettingDef] = &[
    setting!("arena_max", int(1), "glibc.malloc.arena_max", "largest number of arenas (default 8 per CPU on 64-bit)"),
    setting!("arena_test", int(1), "glibc.malloc.arena_test", "arenas created before arena_max is checked"),
    setting!("trim_threshold", Kind::Size, "glibc.malloc.trim_threshold", "free memory at the top of the heap above which it is given back (disables the dynamic threshold)"),
    setting!("top_pad", Kind::Size, "glibc.malloc.top_pad", "extra bytes asked from the system at each heap growth"),
    setting!("mmap_threshold", Kind::Size, "glibc.malloc.mmap_threshold", "allocations from this size are served by mmap (disables the dynamic threshold)"),
    setting!("mmap_max", range(0, i32::MAX as i64), "glibc.malloc.mmap_max", "largest number of mmap-served chunks at once"),
    setting!("mxfast", Kind::Size, "glibc.malloc.mxfast", "largest size served by fastbins"),
    setting!("tcache_max", Kind::Size, "glibc.malloc.tcache_max", "largest size kept in the per-thread cache"),
    setting!("tcache_count", range(0, 65535), "glibc.malloc.tcache_count", "chunks kept per tcache bin"),
    setting!("tcache_unsorted_limit", int(0), "glibc.malloc.tcache_unsorted_limit", "unsorted chunks scanned when filling the tcache (0: no limit)"),
    setting!("perturb", range(0, 255), "glibc.malloc.perturb", "fill allocated and freed memory with this byte"),
    setting!("hugetlb", range(0, 2), "glibc.malloc.hugetlb", "1: madvise transparent huge pages, 2: use hugetlbfs pages (glibc >= 2.35)"),
    setting!("check", range(0, 3), "glibc.malloc.check", "heap consistency checks (needs libc_malloc_debug.so preloaded since glibc 2.34)"),
];

/// mimalloc options under their newest names; `aliases` are the names older (or newer)
/// versions use. The installed library decides which name is written.
pub static MIMALLOC: &[SettingDef] = &[
    setting!(
        "purge_delay",
        int(-1),
        "purge_delay",
        &["decommit_delay", "reset_delay"],
        "ms before freed memory is returned to the OS (0: at once, -1: never)"
    ),
    setting!(
        "allow_purge",
        Kind::Bool,
        "allow_purge",
        &["allow_decommit"],
        "return freed memory to the OS at all"
    ),
    setting!(
        "purge_decommits",
        Kind::Bool,
        "purge_decommits",
        &["reset_decommits"],
        "purge by decommitting rather than resetting pages"
    ),
    setting!(
        "purge_extend_delay",
        int(0),
        "purge_extend_delay",
        &["decommit_extend_delay"],
        "extra delay when a purge is re-scheduled"
    ),
    setting!(
        "arena_purge_mult",
        int(0),
        "arena_purge_mult",
        "arena purge delay as a multiple of purge_delay"
    ),
    setting!(
        "segment_decommit_delay",
        int(-1),
        "segment_decommit_delay",
        "ms before a free segment is decommitted (2.0)"
    ),
    setting!(
        "abandoned_page_purge",
        Kind::Bool,
        "abandoned_page_purge",
        &["abandoned_page_decommit", "abandoned_page_reset"],
        "purge the free pages of a thread that exits"
    ),
    setting!(
        "page_reset",
        Kind::Bool,
        "page_reset",
        "reset page memory as soon as a page is free (2.0)"
    ),
    setting!(
        "eager_commit",
        Kind::Bool,
        "eager_commit",
        "commit whole segments at once"
    ),
    setting!(
        "eager_commit_delay",
        int(0),
        "eager_commit_delay",
        "segments per thread not committed eagerly"
    ),
    setting!(
        "arena_eager_commit",
        range(0, 2),
        "arena_eager_commit",
        "commit arenas eagerly (2: only where overcommit is on)"
    ),
    setting!(
        "large_os_pages",
        Kind::Bool,
        "large_os_pages",
        &["allow_large_os_pages"],
        "use 2 MiB OS pages when available"
    ),
    setting!(
        "reserve_huge_os_pages",
        int(0),
        "reserve_huge_os_pages",
        "1 GiB huge pages reserved at start"
    ),
    setting!(
        "reserve_huge_os_pages_at",
        int(-1),
        "reserve_huge_os_pages_at",
        "NUMA node of the reserved huge pages (-1: spread)"
    ),
    setting!(
        "reserve_os_memory",
        Kind::Size,
        "reserve_os_memory",
        "memory reserved at start"
    ),
    setting!(
        "use_numa_nodes",
        int(0),
        "use_numa_nodes",
        "NUMA nodes to use (0: all)"
    ),
    setting!(
        "limit_os_alloc",
        Kind::Bool,
        "limit_os_alloc",
        "only use the reserved memory, never ask the OS for more"
    ),
    setting!(
        "max_segment_reclaim",
        int(0),
        "max_segment_reclaim",
        "abandoned segments reclaimed per allocation"
    ),
    setting!(
        "destroy_on_exit",
        Kind::Bool,
        "destroy_on_exit",
        "release all memory at exit"
    ),
    setting!(
        "show_stats",
        Kind::Bool,
        "show_stats",
        "print statistics at exit"
    ),
    setting!(
        "show_errors",
        Kind::Bool,
        "show_errors",
        "print errors and warnings"
    ),
    setting!(
        "verbose",
        int(0),
        "verbose",
        "print the options and other messages at start"
    ),
];

pub static TCMALLOC: &[SettingDef] = &[
    setting!(
        "release_rate",
        Kind::Float { min: 0.0 },
        "TCMALLOC_RELEASE_RATE",
        "how fast free pages are returned to the OS (0: never, default 1, 10: aggressive)"
    ),
    setting!(
        "max_total_thread_cache_bytes",
        Kind::Size,
        "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
        "bound on all thread caches together (default 32 MiB)"
    ),
    setting!(
        "aggressive_decommit",
        Kind::Bool,
        "TCMALLOC_AGGRESSIVE_DECOMMIT",
        "return every free span to the OS at once"
    ),
    setting!(
        "heap_limit_mb",
        int(0),
        "TCMALLOC_HEAP_LIMIT_MB",
        "heap size limit in MiB (0: none)"
    ),
    setting!(
        "large_alloc_report_threshold",
        Kind::Size,
        "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD",
        "print a report for allocations from this size"
    ),
    setting!(
        "transfer_num_obj",
        int(1),
        "TCMALLOC_TRANSFER_NUM_OBJ",
        "objects moved at once between thread and central caches"
    ),
    setting!(
        "skip_sbrk",
        Kind::Bool,
        "TCMALLOC_SKIP_SBRK",
        "never use sbrk"
    ),
    setting!(
        "skip_mmap",
        Kind::Bool,
        "TCMALLOC_SKIP_MMAP",
        "never use mmap"
    ),
    setting!(
        "disable_memory_release",
        Kind::Bool,
        "TCMALLOC_DISABLE_MEMORY_RELEASE",
        "never return memory to the OS"
    ),
    setting!(
        "memfs_malloc_path",
        Kind::Text,
        "TCMALLOC_MEMFS_MALLOC_PATH",
        "allocate from hugetlbfs files under this path"
    ),
    setting!(
        "memfs_limit_mb",
        int(0),
        "TCMALLOC_MEMFS_LIMIT_MB",
        "limit of the hugetlbfs allocation in MiB"
    ),
];

pub static TBBMALLOC: &[SettingDef] = &[
    setting!(
        "use_huge_pages",
        Kind::Bool,
        "TBB_MALLOC_USE_HUGE_PAGES",
        "use huge pages when the system has them"
    ),
    setting!(
        "huge_size_threshold",
        Kind::Size,
        "TBB_MALLOC_SET_HUGE_SIZE_THRESHOLD",
        "objects from this size are cached as huge objects"
    ),
];

/// The settings table of a known allocator.
pub fn table(allocator: &str) -> &'static [SettingDef] {
    match allocator {
        "jemalloc" => JEMALLOC,
        "glibc" => GLIBC,
        "mimalloc" => MIMALLOC,
        "tcmalloc" => TCMALLOC,
        "tbbmalloc" => TBBMALLOC,
        _ => &[],
    }
}

/// The setting of that name (or alias) in a table.
pub fn lookup(table: &'static [SettingDef], name: &str) -> Option<&'static SettingDef> {
    table
        .iter()
        .find(|s| s.name == name || s.aliases.contains(&name))
}

/// Setting names of a table, comma separated, for error messages.
pub fn names(table: &[SettingDef]) -> String {
    table.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("131072"), Some(131072));
        assert_eq!(parse_size("128k"), Some(128 << 10));
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1.5M"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    #[test]
    fn values_are_checked_against_their_kind() {
        assert_eq!(check_value(&int(-1), "-1"), Some(Value::Integer(-1)));
        assert_eq!(check_value(&int(-1), "-2"), None);
        assert_eq!(check_value(&range(0, 2), "3"), None);
        assert_eq!(check_value(&Kind::Bool, "yes"), Some(Value::Bool(true)));
        assert_eq!(check_value(&Kind::Bool, "maybe"), None);
        assert_eq!(
            check_value(&Kind::Float { min: 0.0 }, "2.5"),
            Some(Value::Float("2.5".into()))
        );
        assert_eq!(check_value(&Kind::Float { min: 0.0 }, "nan"), None);
        assert_eq!(
            check_value(&Kind::Enum(&["disabled", "percpu"]), "PERCPU"),
            Some(Value::Word("percpu".into()))
        );
        assert_eq!(check_value(&Kind::Text, "a:b"), None);
    }

    #[test]
    fn booleans_are_words_only_for_jemalloc() {
        assert_eq!(Value::Bool(true).render(true), "true");
        assert_eq!(Value::Bool(true).render(false), "1");
        assert_eq!(Value::Bytes(4096).render(false), "4096");
    }

    #[test]
    fn every_name_and_alias_is_unique_within_a_table() {
        for t in [JEMALLOC, GLIBC, MIMALLOC, TCMALLOC, TBBMALLOC] {
            let mut all: Vec<&str> = t
                .iter()
                .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
                .collect();
            let n = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), n);
        }
    }
}
