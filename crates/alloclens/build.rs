//! Puts the commit in `alloclens --version` ("0.1.0 (commit 1a2b3c4)") when built from a git
//! checkout with git installed; elsewhere (a crate tarball, no git) the crate version alone.
use std::process::Command;

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
}

/// The trimmed stdout of `git ARGS` run in this crate's directory, if git ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
