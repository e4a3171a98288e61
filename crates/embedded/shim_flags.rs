//! The C compiler's flags for the preload libraries: build.rs uses them, tests/shim_flags.rs checks
//! the warning flags with the real compiler.

/// -Wall -Wextra always; -Werror only when `ci` (the CI environment variable) is set to anything
/// but "", "0" or "false". CI still fails on every warning, while a newer compiler's new warning
/// does not break `cargo install` or `make install` for a user.
pub fn warning_flags(ci: Option<&str>) -> Vec<&'static str> {
    let mut flags = vec!["-Wall", "-Wextra"];
    if ci.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false")) {
        flags.push("-Werror");
    }
    flags
}

/// Compiles the preload library `sources` (in `dir`, with its export map `exports` if it has one)
/// into `target` with the flags every alloclens preload library needs (one owner):
/// position-independent, hidden symbols, initial-exec TLS (no allocation on a thread's first
/// access), unwind tables (operator new may throw through the C++ hooks), no builtin malloc
/// folding, and every PLT entry bound at load (lazy binding would run the dynamic linker, tens of
/// microseconds, inside a hook the first time a libc function is called). `what` names the
/// library in cargo's warnings and in the panic of a failed build.
#[allow(dead_code)] // tests/shim_flags.rs includes this file for warning_flags only
pub fn compile_preload(
    what: &str,
    dir: &std::path::Path,
    sources: &[&str],
    exports: Option<&str>,
    flags: &[&str],
    target: &std::path::Path,
) {
    let ci = std::env::var("CI").ok();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&cc)
        .current_dir(dir)
        .args([
            "-O2",
            "-g",
            "-std=gnu11",
            "-fPIC",
            "-fvisibility=hidden",
            "-ftls-model=initial-exec",
            "-fexceptions",
            "-fno-builtin-malloc",
            "-fno-builtin-calloc",
            "-fno-builtin-free",
            "-fno-builtin-realloc",
            // shim/common: what the libraries share (each library's folder is a sibling).
            "-I../common",
        ])
        .args(flags)
        .args(warning_flags(ci.as_deref()))
        .arg("-shared")
        .args(exports.map(|map| format!("-Wl,--version-script={map}")))
        .arg("-Wl,-z,now")
        .arg("-o")
        .arg(target)
        .args(sources)
        .args(["-ldl", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler '{cc}' to build the {what}: {e}"));
    let diagnostics = String::from_utf8_lossy(&out.stderr);
    // Cargo hides a build script's output when it succeeds: without -Werror a warning would go
    // unseen.
    for line in diagnostics.lines() {
        println!("cargo:warning={what}: {line}");
    }
    assert!(
        out.status.success(),
        "building the {what} with '{cc}' failed ({}):\n{diagnostics}",
        out.status
    );
}
