//! `export --pprof` read back by the real `go tool pprof` (docs/profile.md): a trace of the C
//! program with known call sites (crates/testkit/programs/sites.c) recorded with `--stacks=all`,
//! whose totals must equal `analyze --json`'s and whose sites must have their known figures; a
//! sampled trace (sampled_sites.c), whose sites must carry `analyze --sites`'s estimates; and the
//! refusal of a trace without stacks.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use testkit::{alloclens, json_stdout, record};

/// The values of a sample, in the profile's order: alloc_objects, alloc_space, inuse_objects,
/// inuse_space.
type Values = [i64; 4];

const SAMPLE_TYPES: [&str; 4] = [
    "alloc_objects",
    "alloc_space",
    "inuse_objects",
    "inuse_space",
];

/// `go tool pprof ARGS PROFILE`'s standard output; it must succeed.
fn go_pprof(args: &[&str], profile: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .output()
        .expect("go tool pprof runs");
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One sample of `go tool pprof -raw`: its values, its pid label and the functions of its stack.
#[derive(Debug)]
struct RawSample {
    values: Values,
    pid: u64,
    functions: Vec<String>,
}

/// Parses `-raw`'s Samples and Locations sections.
fn raw_samples(raw: &str) -> Vec<RawSample> {
    // The lines of each section, by its heading.
    let mut sections: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut heading = "";
    for line in raw.lines() {
        match line {
            "Samples:" | "Locations" | "Mappings" => heading = line,
            _ => sections.entry(heading).or_default().push(line.trim()),
        }
    }
    // Location id -> its functions (an inlined function's line comes first, on its own line).
    let mut functions: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut current = 0;
    for line in &sections["Locations"] {
        let name = if let Some((id, rest)) = line.split_once(": ") {
            current = id.parse().unwrap();
            // "0xADDR M=1 function file:line:col s=0"
            rest.split_whitespace().nth(2)
        } else {
            line.split_whitespace().next()
        };
        if let Some(name) = name {
            functions.entry(current).or_default().push(name.to_string());
        }
    }
    let mut samples: Vec<RawSample> = Vec::new();
    // The first line names the sample types.
    for line in &sections["Samples:"][1..] {
        if line.starts_with(|c: char| c.is_ascii_alphabetic()) {
            // The labels: "exec_index:[1] pid:[1234]".
            if let Some((_, pid)) = line.split_once("pid:[") {
                let pid = &pid[..pid.find(']').unwrap()];
                samples.last_mut().unwrap().pid = pid.parse().unwrap();
            }
        } else if let Some((values, stack)) = line.split_once(':') {
            let values: Vec<i64> = values
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            samples.push(RawSample {
                values: values.try_into().unwrap(),
                pid: 0,
                functions: stack
                    .split_whitespace()
                    // An unnamed location has none.
                    .flat_map(|id| {
                        functions
                            .get(&id.parse::<u64>().unwrap())
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect(),
            });
        }
    }
    samples
}

/// The total `go tool pprof -top` gives for each sample type, in plain units.
fn top_totals(profile: &Path) -> Values {
    SAMPLE_TYPES.map(|t| {
        let top = go_pprof(
            &[
                "-top",
                "-nodefraction=0",
                "-unit=byte",
                &format!("-sample_index={t}"),
            ],
            profile,
        );
        let line = top
            .lines()
            .find(|l| l.starts_with("Showing nodes accounting for"))
            .unwrap_or_else(|| panic!("no totals in {top}"));
        let total = line
            .split(" of ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        total
            .trim_end_matches("byte")
            .trim_end_matches('B')
            .parse()
            .unwrap()
    })
}

fn sum(samples: &[RawSample]) -> Values {
    samples.iter().fold([0; 4], |mut t, s| {
        for (a, b) in t.iter_mut().zip(s.values) {
            *a += b;
        }
        t
    })
}

/// Records `program` with `stacks` and exports its profile: (trace, profile).
fn profile_of(
    dir: &Path,
    stacks: &str,
    program: &[String],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let trace = dir.join("trace.alt");
    record(&trace, &[stacks], program);
    let profile = dir.join("heap.pb.gz");
    alloclens()
        .args(["export", "--pprof"])
        .arg(&profile)
        .arg(&trace)
        .ok();
    (trace, profile)
}

#[test]
fn every_call_of_a_full_stack_trace_is_in_pprof_at_its_site() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("sites").to_string_lossy().into_owned();
    let (trace, profile) = profile_of(dir.path(), "--stacks=all", &[exe]);

    // pprof's totals are alloclens's own: requests, requested bytes, and the blocks still live
    // at the end (the leaks of analyze) of both processes.
    let analysis = json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let processes = analysis["processes"].as_array().unwrap();
    let expected = processes.iter().fold([0i64; 4], |t, p| {
        let s = &p["stats"];
        let v = |x: &Value| x.as_i64().unwrap();
        [
            t[0] + v(&s["requests"]),
            t[1] + v(&s["requested_bytes"]),
            t[2] + v(&s["leaks"]["count"]),
            t[3] + v(&s["leaks"]["bytes"]),
        ]
    });
    let samples = raw_samples(&go_pprof(&["-raw"], &profile));
    assert_eq!(sum(&samples), expected, "{samples:#?}");
    assert_eq!(top_totals(&profile), expected);
    let top = go_pprof(&["-top"], &profile);
    assert!(top.starts_with("File: sites\n"), "the main binary: {top}");

    // Each known site with its figures (sites.c), labelled with its process.
    let pids: Vec<u64> = processes
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    let (parent, child) = (pids[0], pids[1]);
    let at = |site: &str, pid: u64| -> Values {
        let found: Vec<&RawSample> = samples
            .iter()
            .filter(|s| s.pid == pid && s.functions.iter().any(|f| f == site))
            .collect();
        assert_eq!(found.len(), 1, "{site} in pid {pid}: {samples:#?}");
        found[0].values
    };
    assert_eq!(at("site_a", parent), [1000, 1000 * 48, 0, 0]);
    assert_eq!(at("site_b", parent), [10, 10 * 4096, 0, 0]);
    assert_eq!(at("site_c", parent), [5, 5 * 777, 5, 5 * 777]);
    assert_eq!(at("site_t", parent), [100, 100 * 200, 0, 0]);
    assert_eq!(at("site_d", parent), [3, 3 * 99, 0, 0]);
    assert_eq!(at("site_d", child), [3, 3 * 99, 0, 0]);
    assert_eq!(at("site_f", child), [20, 20 * 300, 0, 0]);
    // site_b's allocation is in fill_inline, inlined into it: one location, both functions.
    let b = samples
        .iter()
        .find(|s| s.functions.contains(&"site_b".into()))
        .unwrap();
    assert_eq!(b.functions[..2], ["fill_inline", "site_b"]);
}

/// A binary alloclens cannot read when it exports (gone since the recording, as on another
/// machine) leaves its locations unnamed, with their mapping: pprof symbolises them itself from the
/// binary it is given.
#[test]
fn pprof_symbolises_from_the_mappings_what_alloclens_could_not() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let (run, kept) = (dir.path().join("run"), dir.path().join("kept"));
    std::fs::create_dir_all(&run).unwrap();
    std::fs::create_dir_all(&kept).unwrap();
    let exe = run.join("sites");
    std::fs::copy(testkit::program("sites"), &exe).unwrap();
    let trace = dir.path().join("trace.alt");
    record(&trace, &["--stacks=all"], &[&exe]);
    std::fs::rename(&exe, kept.join("sites")).unwrap();
    let profile = dir.path().join("heap.pb.gz");
    let out = alloclens()
        .args(["export", "--pprof"])
        .arg(&profile)
        .arg(&trace)
        .ok();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot read") && err.contains("sites"),
        "{err}"
    );
    // The functions of every sample as `go tool pprof -raw [BINARY] PROFILE` names them.
    let functions = |binary: Option<&Path>| {
        let out = Command::new("go")
            .args(["tool", "pprof", "-raw"])
            .args(binary)
            .arg(&profile)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        raw_samples(&String::from_utf8(out.stdout).unwrap())
            .into_iter()
            .flat_map(|s| s.functions)
            .collect::<Vec<String>>()
    };
    let unnamed = functions(None);
    assert!(!unnamed.iter().any(|f| f == "site_a"), "{unnamed:?}");
    // Given the binary where it now is, pprof symbolises the first mapping (the executable) from
    // its recorded start, limit and file offset.
    let found = functions(Some(&kept.join("sites")));
    for site in ["site_a", "site_c", "site_f", "main"] {
        assert!(found.iter().any(|f| f == site), "{site} not in {found:?}");
    }
}

/// "In use" is the state at the end of each image's stream: for a process killed with blocks live,
/// those blocks (which `analyze --sites` does not call leaks: a cut says nothing of whether they
/// would have been freed), so pprof's in-use totals are `analyze --json`'s live blocks at the end
/// of every image. And the executable heads `-top`, though the shim did not see it first.
#[test]
fn in_use_is_what_each_image_held_at_its_end_even_when_killed() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.alt");
    // The shell holds seq's output in a variable when it kills itself.
    let out = alloclens()
        .args(["record", "-q", "--stacks=all", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", "x=$(seq 1 20000); kill -9 $$"])
        .run();
    assert_eq!(
        out.status.code(),
        Some(137),
        "record ends with the command's status"
    );
    let profile = dir.path().join("heap.pb.gz");
    alloclens()
        .args(["export", "--pprof"])
        .arg(&profile)
        .arg(&trace)
        .ok();
    let analysis = json_stdout(["analyze".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    let killed = analysis["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["truncated"] == true)
        .expect("the killed shell's image is cut short");
    let killed_pid = killed["pid"].as_u64().unwrap();
    let held = killed["stats"]["leaks"]["bytes"].as_i64().unwrap();
    assert!(held > 0, "{killed}");
    let samples = raw_samples(&go_pprof(&["-raw"], &profile));
    let in_use: i64 = samples
        .iter()
        .filter(|s| s.pid == killed_pid)
        .map(|s| s.values[3])
        .sum();
    assert_eq!(in_use, held);
    let sites = json_stdout([
        "analyze".as_ref(),
        "--sites".as_ref(),
        "--json".as_ref(),
        trace.as_os_str(),
    ]);
    let leaked: i64 = sites["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pid"] == killed_pid)
        .flat_map(|p| p["stacks"].as_array().unwrap())
        .map(|s| s["figures"]["leaked_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(leaked, 0, "no leaks by site in a cut image");
    let top = go_pprof(&["-top"], &profile);
    let file = top.lines().next().unwrap();
    assert!(
        file.starts_with("File: ") && !file.contains(".so"),
        "the executable is the main binary: {top}"
    );
}

/// Sampled stacks: each site's values are `analyze --sites`'s estimates (the same estimator),
/// and pprof's totals their sums.
#[test]
fn a_sampled_trace_gives_pprof_the_estimates_of_analyze_sites() {
    testkit::require!(program "go");
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("sampled_sites")
        .to_string_lossy()
        .into_owned();
    // churn 12,000 x 64 B freed at once, big 20 x 2 MiB (5 kept), keep 8,000 x 4,000 B kept.
    let mut command = vec![exe];
    command.extend(["12000", "64", "20", "2097152", "5", "8000", "4000"].map(String::from));
    let (trace, profile) = profile_of(dir.path(), "--stacks", &command);

    let sites = json_stdout([
        "analyze".as_ref(),
        "--sites".as_ref(),
        "--json".as_ref(),
        trace.as_os_str(),
    ]);
    assert_eq!(
        sites["stack_sample_bytes"], 16384,
        "sampled at the default rate"
    );
    let process = &sites["processes"][0];
    let frames = process["frames"].as_array().unwrap();
    let samples = raw_samples(&go_pprof(&["-raw"], &profile));
    let mut expected_total = [0i64; 4];
    for stack in process["stacks"].as_array().unwrap() {
        let site = frames[stack["frames"][0].as_u64().unwrap() as usize]["label"]
            .as_str()
            .unwrap();
        let f = &stack["figures"];
        let v = |k: &str| f[k].as_i64().unwrap();
        let expected = [
            v("calls"),
            v("requested_bytes"),
            v("leaked_blocks"),
            v("leaked_bytes"),
        ];
        for (t, x) in expected_total.iter_mut().zip(expected) {
            *t += x;
        }
        let found = samples
            .iter()
            .find(|s| s.functions.first().is_some_and(|f| f == site))
            .unwrap_or_else(|| panic!("no sample of {site}: {samples:#?}"));
        assert_eq!(found.values, expected, "{site}");
    }
    // The kept blocks are in use: all of keep's and big's 5.
    let keep = samples.iter().find(|s| s.functions[0] == "keep").unwrap();
    assert!(keep.values[3] > 0);
    let big = samples.iter().find(|s| s.functions[0] == "big").unwrap();
    assert_eq!(
        big.values[2..],
        [5, 5 << 21],
        "2 MiB blocks are always sampled"
    );
    assert_eq!(sum(&samples), expected_total);
    assert_eq!(top_totals(&profile), expected_total);
    let raw = go_pprof(&["-raw"], &profile);
    assert!(raw.contains("Period: 16384"), "{raw}");
}

#[test]
fn a_trace_without_stacks_is_refused_naming_record_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("plain.alt");
    let exe = testkit::program("sites").to_string_lossy().into_owned();
    record(&trace, &[], &[exe]);
    let profile = dir.path().join("heap.pb.gz");
    let err = alloclens()
        .args(["export", "--pprof"])
        .arg(&profile)
        .arg(&trace)
        .fails_with(1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("recorded without stacks") && err.contains("alloclens record --stacks"),
        "{err}"
    );
    assert!(!profile.exists(), "no profile written");
    // A --debug-dir that is no directory is refused, not silently ignored.
    let err = alloclens()
        .args(["export", "--debug-dir", "/nonexistent", "--pprof"])
        .arg(&profile)
        .arg(&trace)
        .fails_with(1);
    assert!(
        err.lines().count() == 1 && err.contains("--debug-dir '/nonexistent' does not exist"),
        "{err}"
    );
    // One output at least: neither is a usage error.
    let err = alloclens().arg("export").arg(&trace).fails_with(2);
    assert!(
        err.contains("--parquet") && err.contains("--pprof"),
        "{err}"
    );
}
