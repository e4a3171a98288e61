//! Compiles the watch agent (../../shim/agent) with the system C compiler into a shared library in
//! OUT_DIR, as crates/recorder/build.rs does for the record shim; src/library.rs embeds it.
use std::path::PathBuf;
use std::process::Command;

// The record shim's warning flags (one owner: crates/recorder/shim_flags.rs).
#[path = "../recorder/shim_flags.rs"]
mod shim_flags;

const SOURCES: [&str; 4] = ["cxx.c", "hooks.c", "stats.c", "snapshot.c"];

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let src = manifest.join("../../shim/agent");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in SOURCES.iter().chain(&["agent.h", "exports.map"]) {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-changed=../recorder/shim_flags.rs");
    let ci = std::env::var("CI").ok();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let target = out.join("liballoclens_agent.so");
    let out = Command::new(&cc)
        .current_dir(&src)
        .args([
            "-O2",
            "-g",
            "-std=gnu11",
            "-fPIC",
            "-fvisibility=hidden",
            "-ftls-model=initial-exec",
            // operator new may throw through cxx.c: its guard cleanup must run on unwinding.
            "-fexceptions",
            "-fno-builtin-malloc",
            "-fno-builtin-calloc",
            "-fno-builtin-free",
            "-fno-builtin-realloc",
        ])
        .args(shim_flags::warning_flags(ci.as_deref()))
        .args([
            "-shared",
            "-Wl,--version-script=exports.map",
            // Every PLT entry bound at load: no dynamic linker work inside a hook.
            "-Wl,-z,now",
        ])
        .arg("-o")
        .arg(&target)
        .args(SOURCES)
        .args(["-ldl", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}' to build the agent: {e}"));
    let diagnostics = String::from_utf8_lossy(&out.stderr);
    for line in diagnostics.lines() {
        println!("cargo:warning=agent: {line}");
    }
    assert!(
        out.status.success(),
        "building the watch agent with '{cc}' failed ({}):\n{diagnostics}",
        out.status
    );
}
