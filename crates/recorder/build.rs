//! Compiles the C preload shim (../../shim) with the system C compiler into a shared library in
//! OUT_DIR; src/shim.rs embeds it so the alloclens binary is self-contained.
use std::path::PathBuf;

mod shim_flags;

const SOURCES: [&str; 7] = [
    "bootstrap.c",
    "buffer.c",
    "cxx.c",
    "exec.c",
    "hooks.c",
    "stacks.c",
    "transport.c",
];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let shim = manifest.join("../../shim");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in SOURCES.iter().chain(&[
        "internal.h",
        "include/alloclens_shim.h",
        "exports.map",
        "cxx_operators.inc",
    ]) {
        println!("cargo:rerun-if-changed={}", shim.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=shim_flags.rs");
    let target = out.join("liballoclens_shim.so");
    shim_flags::compile_preload("preload shim", &shim, &SOURCES, &target);
}
