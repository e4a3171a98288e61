//! Warnings stop the shim's build in CI only: a user's newer compiler may warn where ours did not.
#[path = "../../shim_flags.rs"]
mod build_flags;

use std::process::{Command, Output};

/// Compiles a C file that draws an -Wall warning (an unused variable) with `flags`.
fn compile_with(flags: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("warns.c");
    std::fs::write(&src, "int f(void) { int unused; return 0; }\n").unwrap();
    Command::new("cc")
        .args(flags)
        .arg("-c")
        .arg("-o")
        .arg(dir.path().join("warns.o"))
        .arg(&src)
        .output()
        .unwrap()
}

#[test]
fn a_compiler_warning_fails_the_shim_build_only_in_ci() {
    for ci in [None, Some(""), Some("false"), Some("0")] {
        let out = compile_with(&build_flags::warning_flags(ci));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "CI={ci:?}: {stderr}");
        assert!(
            stderr.contains("unused"),
            "CI={ci:?}: the warning is still shown: {stderr}"
        );
    }
    for ci in ["true", "1", "yes"] {
        let out = compile_with(&build_flags::warning_flags(Some(ci)));
        assert!(
            !out.status.success(),
            "CI={ci}: the warning must fail the build"
        );
    }
}
