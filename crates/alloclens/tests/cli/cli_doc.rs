//! Every option the CLI accepts is documented: docs/cli.md for the commands, docs/workloads.md for
//! the workloads' own flags. Fails when an option is added without its documentation.
use std::collections::BTreeSet;

use testkit::alloclens;

fn long_options(args: &[&str]) -> BTreeSet<String> {
    let out = alloclens().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '=')
        .filter(|w| {
            w.starts_with("--")
                && w.len() > 2
                && w[2..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        .map(String::from)
        .filter(|o| o != "--help" && o != "--version")
        .collect()
}

fn doc(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn every_command_option_is_in_docs_cli_md() {
    let cli = doc("cli.md");
    for command in [
        "run",
        "tune",
        "live",
        "allocators",
        "workload",
        "demo",
        "record",
        "analyze",
        "report",
        "diff",
        "replay",
        "snapshot",
        "export",
        "gate",
        "merge",
        "completions",
        "man",
    ] {
        for option in long_options(&[command]) {
            assert!(
                cli.contains(&format!("## alloclens {command}")) && cli.contains(&option),
                "`alloclens {command} {option}` is not in docs/cli.md (run: sh scripts/cli-doc.sh > docs/cli.md)"
            );
        }
    }
}

#[test]
fn every_workload_flag_is_in_docs_workloads_md() {
    let workloads = doc("workloads.md");
    for name in [
        "twowave",
        "events",
        "xthread",
        "forkworkers",
        "churn",
        "realloc",
        "tree",
    ] {
        for option in long_options(&["workload", name]) {
            assert!(
                workloads.contains(&option),
                "`alloclens workload {name} {option}` is not in docs/workloads.md"
            );
        }
    }
}
