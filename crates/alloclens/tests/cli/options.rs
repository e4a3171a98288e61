//! Option spellings that commands share, so that what works in one works in the other.

use std::process::Stdio;

use testkit::{alloclens, alloclens_exe, json_stdout, succeeded};

/// `-a` is `--allocators` in `run` and `--allocator` in `record`: both accept both spellings.
#[test]
fn allocator_and_allocators_are_one_option_in_run_and_record() {
    let dir = tempfile::tempdir().unwrap();
    for spelling in ["--allocator", "--allocators"] {
        let out = dir.path().join(format!("run{spelling}"));
        let summary = json_stdout([
            "run",
            spelling,
            "glibc@mine",
            "-r",
            "1",
            "--json",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ]);
        let variants: Vec<&str> = summary[0]["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["variant"].as_str().unwrap())
            .collect();
        assert_eq!(variants, ["mine"], "run {spelling}");

        let trace = dir.path().join(format!("t{spelling}.alt"));
        succeeded(
            alloclens()
                .args(["record", "-q", spelling, "glibc@mine", "-o"])
                .arg(&trace)
                .args([
                    "--",
                    &alloclens_exe(),
                    "workload",
                    "events",
                    "--events",
                    "2",
                ])
                .stdin(Stdio::null()),
        );
        let out = succeeded(alloclens().arg("analyze").arg(&trace));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("(allocator: mine"),
            "record {spelling}: {text}"
        );
    }
}
