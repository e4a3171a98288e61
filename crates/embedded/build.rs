//! Builds the three preload libraries alloclens carries, from shim/, with the system C compiler
//! into OUT_DIR; src/lib.rs embeds them. One place for their sources, flags and names: the
//! record shim (`record`), the attach shim (`record --pid`), the watch agent (`watch`) and the KSM library (`run --ksm`).
use std::path::PathBuf;

mod shim_flags;

/// A preload library: its directory under shim/, its sources, its export map (if any) and the
/// file built in OUT_DIR.
struct Preload {
    what: &'static str,
    dir: &'static str,
    sources: &'static [&'static str],
    /// Other files it is built from (headers, export map), for cargo's rebuild checks.
    inputs: &'static [&'static str],
    exports: Option<&'static str>,
    /// Compiler flags after the common ones (a later -ftls-model wins).
    flags: &'static [&'static str],
    target: &'static str,
}

/// The record shim's sources and inputs, then those of one build of it (the attach shim adds two
/// sources and has an export map of its own).
macro_rules! record_shim {
    (sources: [$($source:literal),*], exports: $exports:literal) => {
        (
            &[
                "bootstrap.c",
                "buffer.c",
                "cxx.c",
                "exec.c",
                "hooks.c",
                "stacks.c",
                "transport.c",
                $($source),*
            ],
            &[
                "internal.h",
                "include/alloclens_shim.h",
                "../common/sampling.h",
                "../common/elf_module.h",
                "../common/unwinder.h",
                "../common/cxx_operators.inc",
                "../common/cxx_next.inc",
                "../common/got.h",
                $exports,
            ],
        )
    };
}

const RECORD_SHIM: (&[&str], &[&str]) = record_shim!(sources: [], exports: "exports.map");
const ATTACH_SHIM: (&[&str], &[&str]) =
    record_shim!(sources: ["attach.c", "got.c", "../common/got.c"], exports: "attach_exports.map");

const LIBRARIES: [Preload; 4] = [
    Preload {
        what: "preload shim",
        dir: "shim/record",
        sources: RECORD_SHIM.0,
        inputs: RECORD_SHIM.1,
        exports: Some("exports.map"),
        flags: &[],
        target: "liballoclens_shim.so",
    },
    // The same shim for record --pid: dynamic TLS, hooks patched into the GOT (shim/record/internal.h).
    Preload {
        what: "attach shim",
        dir: "shim/record",
        sources: ATTACH_SHIM.0,
        inputs: ATTACH_SHIM.1,
        exports: Some("attach_exports.map"),
        flags: &["-DAL_ATTACH_BUILD", "-ftls-model=global-dynamic"],
        target: "liballoclens_attach.so",
    },
    Preload {
        what: "watch agent",
        dir: "shim/agent",
        sources: &[
            "cxx.c",
            "hooks.c",
            "stats.c",
            "snapshot.c",
            "single_thread.c",
            "profile.c",
            "got_hooks.c",
            "../common/got.c",
        ],
        inputs: &[
            "agent.h",
            "profile_table.h",
            "../common/sampling.h",
            "../common/elf_module.h",
            "../common/unwinder.h",
            "../common/got.h",
            "exports.map",
            "../common/cxx_operators.inc",
            "../common/cxx_next.inc",
        ],
        exports: Some("exports.map"),
        flags: &[],
        target: "liballoclens_agent.so",
    },
    Preload {
        what: "KSM library",
        dir: "shim/ksm",
        sources: &["ksm_merge.c"],
        inputs: &[],
        exports: None,
        flags: &[],
        target: "liballoclens_ksm.so",
    },
];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=shim_flags.rs");
    for lib in &LIBRARIES {
        let dir = root.join(lib.dir);
        for f in lib.sources.iter().chain(lib.inputs) {
            println!("cargo:rerun-if-changed={}", dir.join(f).display());
        }
        shim_flags::compile_preload(
            lib.what,
            &dir,
            lib.sources,
            lib.exports,
            lib.flags,
            &out.join(lib.target),
        );
    }
}
