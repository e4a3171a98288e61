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

/// The record shim's sources; the attach shim adds its own two.
const RECORD_SOURCES: [&str; 7] = [
    "bootstrap.c",
    "buffer.c",
    "cxx.c",
    "exec.c",
    "hooks.c",
    "stacks.c",
    "transport.c",
];

const RECORD_INPUTS: [&str; 5] = [
    "internal.h",
    "include/alloclens_shim.h",
    "exports.map",
    "../common/cxx_operators.inc",
    "../common/cxx_next.inc",
];

const LIBRARIES: [Preload; 4] = [
    Preload {
        what: "preload shim",
        dir: "shim/record",
        sources: &RECORD_SOURCES,
        inputs: &RECORD_INPUTS,
        exports: Some("exports.map"),
        flags: &[],
        target: "liballoclens_shim.so",
    },
    // The same shim for record --pid: dynamic TLS, hooks patched into the GOT (shim/record/internal.h).
    Preload {
        what: "attach shim",
        dir: "shim/record",
        sources: &[
            "bootstrap.c",
            "buffer.c",
            "cxx.c",
            "exec.c",
            "hooks.c",
            "stacks.c",
            "transport.c",
            "attach.c",
            "got.c",
        ],
        inputs: &[
            "internal.h",
            "include/alloclens_shim.h",
            "attach_exports.map",
            "../common/cxx_operators.inc",
            "../common/cxx_next.inc",
        ],
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
        ],
        inputs: &[
            "agent.h",
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
