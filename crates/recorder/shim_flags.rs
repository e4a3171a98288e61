//! The C compiler's warning flags for the shim: build.rs uses them, tests/shim_flags.rs checks them
//! with the real compiler.

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
