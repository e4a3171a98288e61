//! Compiles the C preload shim (../../shim) with the system C compiler into a shared library in
//! OUT_DIR; src/shim.rs embeds it so the alloclens binary is self-contained.
use std::path::PathBuf;
use std::process::Command;

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
    for f in SOURCES
        .iter()
        .chain(&["internal.h", "include/alloclens_shim.h", "exports.map"])
    {
        println!("cargo:rerun-if-changed={}", shim.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=shim_flags.rs");
    let ci = std::env::var("CI").ok();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let target = out.join("liballoclens_shim.so");
    let out = Command::new(&cc)
        .current_dir(&shim)
        .args([
            "-O2",
            "-g",
            "-std=gnu11",
            "-fPIC",
            "-fvisibility=hidden",
            "-ftls-model=initial-exec",
            // operator new may throw through cxx.c: its guard cleanup must run on unwinding.
            "-fexceptions",
        ])
        .args([
            "-fno-builtin-malloc",
            "-fno-builtin-calloc",
            "-fno-builtin-free",
            "-fno-builtin-realloc",
        ])
        .args(shim_flags::warning_flags(ci.as_deref()))
        .args([
            "-shared",
            "-Wl,--version-script=exports.map",
            // Every PLT entry bound at load: lazy binding would run the dynamic linker (tens of
            // microseconds) inside a hook the first time a libc function is called.
            "-Wl,-z,now",
        ])
        .arg("-o")
        .arg(&target)
        .args(SOURCES)
        .args(["-ldl", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}' to build the shim: {e}"));
    let diagnostics = String::from_utf8_lossy(&out.stderr);
    // Cargo hides a build script's output when it succeeds: without -Werror a warning would go
    // unseen.
    for line in diagnostics.lines() {
        println!("cargo:warning=shim: {line}");
    }
    assert!(
        out.status.success(),
        "building the preload shim with '{cc}' failed ({}):\n{diagnostics}",
        out.status
    );
}
