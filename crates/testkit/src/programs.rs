//! The C and C++ programs the tests run, after ripgrep's `hay.rs`: their sources in one folder
//! (`crates/testkit/programs/`), how each is built in one table, and each built once per test run.
//!
//! A test asks for a program by name ([`program`]) and gets the path of its executable (or, for a
//! name ending in `.so`, its shared library). The first test that asks builds it; the others of the
//! same test binary reuse it. A new program is a source file in the folder and a line in
//! [`PROGRAMS`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// How one test program is built.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    /// What tests ask for, and the built file's name (`.so`: a preloadable library).
    pub name: &'static str,
    /// Its source, in `crates/testkit/programs/`.
    pub source: &'static str,
    /// The compiler's flags besides `-o OUT SOURCE`.
    pub flags: &'static [&'static str],
    /// Flags after the source (libraries to link).
    pub libs: &'static [&'static str],
}

/// Frame pointers kept and no tail calls: the stacks `record --stacks` and the checks see are the
/// call sites written in the source.
const STACKS: &[&str] = &[
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-pthread",
];
/// A library to preload or to name as an allocator.
const PRELOAD: &[&str] = &["-O1", "-shared", "-fPIC"];
/// Debug information at -O2: what symbols and call-site folding resolve against addr2line.
const DEBUG_O2: &[&str] = &["-g", "-O2"];

const fn p(name: &'static str, source: &'static str, flags: &'static [&'static str]) -> Program {
    Program {
        name,
        source,
        flags,
        libs: &[],
    }
}

/// Every test program: one line each. The flags are the test's needs (a program whose calls are
/// counted is built at -O0 or with `volatile` pointers so the compiler keeps them).
pub const PROGRAMS: &[Program] = &[
    // The recorder's programs with known calls (crates/recorder/tests, `alloclens record`).
    Program {
        libs: &["-ldl"],
        ..p("traced", "traced.c", &["-O1", "-pthread"])
    },
    Program {
        libs: &["-ldl"],
        ..p("sites", "sites.c", STACKS)
    },
    p("newdelete", "newdelete.cpp", &["-O0"]),
    p("plugin.so", "plugin.c", PRELOAD),
    p("counter.so", "counter.c", PRELOAD),
    p("sigsafe.so", "sigsafe.c", PRELOAD),
    p("noisy_forking", "noisy_forking.c", &["-O1"]),
    p("static", "static_free.c", &["-static", "-O1"]),
    // Return addresses and call sites checked against addr2line (symbols, analyze).
    p("captured_sites", "captured_sites.c", DEBUG_O2),
    p("widget", "widget.cpp", DEBUG_O2),
    p("known_sites", "known_sites.c", DEBUG_O2),
    // alloclens gate: iterations with a cache kept and a leak per iteration.
    p("iterations", "iterations.c", STACKS),
    // The command-line tests' programs (crates/alloclens/tests).
    p("forker", "forker.c", &["-O1", "-pthread"]),
    p("usable", "usable.c", &["-O0"]),
    p("signals", "signals.c", &["-O1"]),
    p("lifetimes", "lifetimes.c", &["-O0"]),
    p("threads", "threads.c", &["-O0", "-pthread"]),
    p("leader_exit", "leader_exit.c", &["-O1", "-pthread"]),
    p("waves", "waves.c", &["-O1"]),
    p("keep", "keep.c", &["-O1"]),
    p(
        "deeper",
        "deeper.c",
        &[
            "-O1",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
        ],
    ),
    p("blocks", "blocks.c", &["-O1"]),
    p("noisy", "noisy.c", &["-O1"]),
    p("hold", "hold.c", &["-O0"]),
    p("malloc_large", "malloc_large.c", &["-O1"]),
    p("touch_exit", "touch_exit.c", &["-O1"]),
    p("fast_events", "fast_events.c", &["-O1"]),
    p("markers", "markers.c", &["-O2"]),
    p("bytes", "bytes.c", &[]),
    p("steady", "steady.c", &["-O1"]),
    p("twowaves", "twowaves.c", &["-O1"]),
    // analyze --residency: heap layouts whose resident pages are known, by call site.
    p("residency_every_other", "residency_every_other.c", STACKS),
    p("residency_calloc", "residency_calloc.c", STACKS),
    p("residency_waves", "residency_waves.c", STACKS),
    p("heapwalk_layout", "heapwalk_layout.c", &["-O1", "-pthread"]),
    p("matrix", "matrix.c", &["-O1"]),
    p("matrix_static", "matrix.c", &["-O1", "-static"]),
    p("namespaces", "namespaces.c", &["-O1"]),
    // Attach: threads allocating as fast as they can, checking every block.
    p("busy_threads", "busy_threads.c", &["-O1", "-pthread"]),
    // record --pid: threads whose block sizes number their calls, and a dlopen on command.
    Program {
        libs: &["-ldl"],
        ..p("attach_target", "attach_target.c", &["-O1", "-pthread"])
    },
    // Attach: a process that never reaches a safe point and exits when the test says so; one
    // that may not use ptrace (a seccomp filter), for the refusals.
    p("spin_until", "spin_until.c", &["-O1", "-pthread"]),
    p("no_ptrace", "no_ptrace.c", &["-O1"]),
    // record --leaks against memcheck: its nine cases of pointer chains.
    p("leak_cases", "leak_cases.c", &["-O0", "-g"]),
    p("leak_threads", "leak_threads.c", &["-O0", "-pthread"]),
    p(
        "leak_cases_cxx",
        "leak_cases_cxx.cpp",
        &["-O0", "-g", "-D_GLIBCXX_USE_CXX11_ABI=0"],
    ),
    // Sampled stacks: a thread pair and a fork child drawing their own sample points; sites whose
    // calls and sizes the test sets.
    p("sampled", "sampled.c", &["-O1", "-g", "-pthread"]),
    p("sampled_sites", "sampled_sites.c", STACKS),
    p("mixed_lifetimes", "mixed_lifetimes.c", STACKS),
    // The heap profile's estimates: four sites holding 50/30/15/5 % of the live bytes, the truth
    // printed; waits to be read.
    Program {
        libs: &["-lm"],
        ..p("profile_sites", "profile_sites.c", STACKS)
    },
    // Allocators that misbehave, for the error paths of tune and replay.
    p("libcrash.so", "crash.c", &["-shared", "-fPIC"]),
    p("libbroken.so", "broken.c", &["-shared", "-fPIC"]),
];

/// The folder of the sources.
pub fn source_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/programs"))
}

/// The path of a source in the folder (for a test that builds it its own way, e.g. with a
/// sanitizer).
pub fn source(file: &str) -> PathBuf {
    let path = source_dir().join(file);
    assert!(path.exists(), "no test program source {}", path.display());
    path
}

/// The built program `name` of [`PROGRAMS`], built on first use by this test binary.
pub fn program(name: &str) -> &'static Path {
    static BUILT: OnceLock<Mutex<HashMap<&'static str, &'static Path>>> = OnceLock::new();
    let entry = PROGRAMS
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no test program {name:?} in testkit's PROGRAMS"));
    // One lock for all: two tests asking for the same program build it once, and the machine's
    // two cores are not better used by parallel compilers than by the tests themselves.
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(path) = built.get(entry.name) {
        return path;
    }
    let path: &'static Path = Box::leak(build(entry).into_boxed_path());
    built.insert(entry.name, path);
    path
}

/// Where this test binary's programs go: under cargo's target directory, a folder per process
/// (each run builds afresh, so an edited source is never stale; no /tmp, which other tests clean).
/// The folders of finished runs are removed.
fn output_dir() -> PathBuf {
    let all = crate::target_dir().join("test-programs");
    if let Ok(entries) = std::fs::read_dir(&all) {
        for e in entries.flatten() {
            let pid = e.file_name();
            if !Path::new("/proc").join(&pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = all.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn build(p: &Program) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let out = DIR.get_or_init(output_dir).join(p.name);
    let compiler = if p.source.ends_with(".cpp") {
        "c++"
    } else {
        "cc"
    };
    let result = Command::new(compiler)
        .args(p.flags)
        .arg("-o")
        .arg(&out)
        .arg(source(p.source))
        .args(p.libs)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        result.status.success(),
        "{compiler} {:?} failed on {}:\n{}",
        p.flags,
        p.source,
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_of_the_table_exists_and_names_are_unique() {
        let mut names = std::collections::HashSet::new();
        for p in PROGRAMS {
            assert!(source_dir().join(p.source).exists(), "{}", p.source);
            assert!(names.insert(p.name), "{} twice", p.name);
        }
    }

    #[test]
    fn a_program_is_built_once() {
        let first = program("markers");
        let modified = std::fs::metadata(first).unwrap().modified().unwrap();
        assert_eq!(program("markers"), first);
        assert_eq!(
            std::fs::metadata(first).unwrap().modified().unwrap(),
            modified
        );
        let out = Command::new(first).arg("2").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "event 0\nevent 1\n");
    }
}
