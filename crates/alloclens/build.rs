//! Puts the commit in `alloclens --version` ("0.1.0 (commit 1a2b3c4)") when built from a git
//! checkout with git installed; elsewhere (a crate tarball, no git) the crate version alone.
//! Also compiles the KSM preload library (../../shim/ksm) that `run --ksm --ksm-mechanism madvise`
//! embeds (src/cmd/ksm_library.rs).
use std::path::PathBuf;
use std::process::Command;

#[path = "../recorder/shim_flags.rs"]
mod shim_flags;

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let full = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) => format!("{version} (commit {commit})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=ALLOCLENS_VERSION={full}");
    // A new commit or checkout moves HEAD or the branch it names: rebuild the version then. Only
    // files that exist: cargo reruns a build script at every build for a missing one.
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let watched = [
            Some(format!("{git_dir}/HEAD")),
            Some(format!("{common}/packed-refs")),
            branch.map(|b| format!("{common}/{b}")),
        ];
        for path in watched.into_iter().flatten() {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    build_ksm_library();
}

/// liballoclens_ksm.so in OUT_DIR, compiled like the record shim (crates/recorder/build.rs).
fn build_ksm_library() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let source = manifest.join("../../shim/ksm/ksm_merge.c");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-changed=../recorder/shim_flags.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CI");
    let ci = std::env::var("CI").ok();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let result = Command::new(&cc)
        .args(["-O2", "-g", "-std=gnu11", "-fPIC", "-fvisibility=hidden"])
        .args(shim_flags::warning_flags(ci.as_deref()))
        .args(["-shared", "-Wl,-z,now", "-o"])
        .arg(out.join("liballoclens_ksm.so"))
        .arg(&source)
        .arg("-lpthread")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler '{cc}' to build the KSM library: {e}")
        });
    let diagnostics = String::from_utf8_lossy(&result.stderr);
    for line in diagnostics.lines() {
        println!("cargo:warning=ksm library: {line}");
    }
    assert!(
        result.status.success(),
        "building the KSM preload library with '{cc}' failed ({}):\n{diagnostics}",
        result.status
    );
}

/// The trimmed stdout of `git ARGS` run in this crate's directory, if git ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
