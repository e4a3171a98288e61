//! Compiles the watch agent (../../shim/agent) with the system C compiler into a shared library in
//! OUT_DIR, as crates/recorder/build.rs does for the record shim; src/library.rs embeds it.
use std::path::PathBuf;

// The record shim's warning flags (one owner: crates/recorder/shim_flags.rs).
#[path = "../recorder/shim_flags.rs"]
mod shim_flags;

const SOURCES: [&str; 5] = [
    "cxx.c",
    "hooks.c",
    "stats.c",
    "snapshot.c",
    "single_thread.c",
];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let src = manifest.join("../../shim/agent");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in SOURCES
        .iter()
        .chain(&["agent.h", "exports.map", "../cxx_operators.inc"])
    {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=../recorder/shim_flags.rs");
    let target = out.join("liballoclens_agent.so");
    shim_flags::compile_preload("watch agent", &src, &SOURCES, &target);
}
