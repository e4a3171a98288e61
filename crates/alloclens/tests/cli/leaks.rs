//! `record --leaks` (docs/leaks.md): memcheck's nine leak cases classified as memcheck itself
//! classifies them, run side by side on the same program; the global holding a reachable
//! block named; and the degraded mode where ptrace is refused.
use std::collections::BTreeMap;
use std::process::Command;

use testkit::{alloclens_exe, program, require};

/// The LEAKS chunk of a trace, summed per kind: kind -> (blocks, bytes).
fn kinds_in(leaks: &trace::Leaks) -> BTreeMap<String, (u64, u64)> {
    let mut kinds = BTreeMap::new();
    for s in &leaks.sites {
        let k: &mut (u64, u64) = kinds.entry(s.kind.clone()).or_default();
        k.0 += s.blocks;
        k.1 += s.bytes;
    }
    kinds
}

/// `record --leaks --stacks=all` of `program` into `trace`.
fn record_leaks(program: &std::path::Path, trace: &std::path::Path) {
    testkit::record(trace, &["--leaks", "--stacks=all"], &[program]);
}

fn leaks_of(trace: &std::path::Path) -> trace::Leaks {
    let reader = trace::TraceReader::open(trace).unwrap();
    assert_eq!(reader.leaks().len(), 1, "one LEAKS chunk");
    reader.leaks()[0].clone()
}

/// memcheck's LEAK SUMMARY: kind -> (blocks, bytes), kinds with no block left out. The C++
/// runtime's exception pool is not freed before the check (`--run-cxx-freeres=no`): we see it
/// too, held by libstdc++.
fn memcheck_kinds(program: &std::path::Path) -> BTreeMap<String, (u64, u64)> {
    let out = Command::new("valgrind")
        .args([
            "--leak-check=full",
            "--show-leak-kinds=all",
            "--run-cxx-freeres=no",
        ])
        .arg(program)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    let mut kinds = BTreeMap::new();
    for kind in [
        "definitely lost",
        "indirectly lost",
        "possibly lost",
        "still reachable",
    ] {
        // "==1== definitely lost: 216 bytes in 3 blocks"
        let line = text
            .lines()
            .find_map(|l| l.split_once(&format!("{kind}: ")).map(|x| x.1))
            .unwrap_or_else(|| panic!("no '{kind}' in memcheck's output:\n{text}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let bytes: u64 = words[0].replace(',', "").parse().unwrap();
        let blocks: u64 = words[3].replace(',', "").parse().unwrap();
        if blocks > 0 {
            kinds.insert(kind.to_string(), (blocks, bytes));
        }
    }
    kinds
}

#[test]
fn record_leaks_classifies_memchecks_nine_cases_as_memcheck_does() {
    require!(program "valgrind");
    let cases = program("leak_cases");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    record_leaks(cases, &trace);
    let leaks = leaks_of(&trace);
    assert!(leaks.scanned && leaks.degraded.is_none(), "{leaks:?}");
    let ours = kinds_in(&leaks);
    // The program's own layout: 3 + 2 + 6 + 4 blocks.
    assert_eq!(ours["definitely lost"].0, 3);
    assert_eq!(ours["indirectly lost"].0, 2);
    assert_eq!(ours["possibly lost"].0, 6);
    assert_eq!(ours["still reachable"].0, 4);
    assert_eq!(ours, memcheck_kinds(cases), "ours, then memcheck's");
    // Case (1)'s block (40 + 8 bytes) hangs from its global, named from the symbol table.
    let case1 = leaks
        .sites
        .iter()
        .filter(|s| s.kind == "still reachable")
        .find(|s| {
            s.root
                .as_deref()
                .is_some_and(|r| r.starts_with("global case1_root in "))
        });
    assert!(case1.is_some(), "{:#?}", leaks.sites);
    // analyze prints them by call site (--all: every site).
    let text = Command::new(alloclens_exe())
        .args(["analyze", "--all"])
        .arg(&trace)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("definitely lost 216 B in 3 blocks")
            && text.contains("held by global case2_root"),
        "{text}"
    );
    // analyze --json: the same check beside the figures, each site named.
    let json = testkit::alloclens()
        .args(["analyze", "--json"])
        .arg(&trace)
        .json();
    let check = &json["leaks"][0];
    let bytes_of = |kind: &str| -> u64 {
        let sites = check["sites"].as_array().expect("a leaks section");
        sites
            .iter()
            .filter(|s| s["kind"] == kind)
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        (bytes_of("definitely lost"), bytes_of("indirectly lost")),
        (216, 184),
        "{check}"
    );
    assert_eq!(
        check["sites"].as_array().unwrap().len(),
        check["site_labels"].as_array().unwrap().len()
    );
}

/// The interior pointers C++ keeps on purpose (new[] of objects with a destructor, a second
/// base, a copy-on-write std::string) are start pointers to memcheck's heuristics, and to ours.
#[test]
fn record_leaks_applies_memchecks_heuristics_to_cxx_interior_pointers() {
    require!(program "valgrind");
    let cases = program("leak_cases_cxx");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    record_leaks(cases, &trace);
    let leaks = leaks_of(&trace);
    let ours = kinds_in(&leaks);
    assert_eq!(ours["definitely lost"], (1, 24), "new Widget[2]");
    assert_eq!(
        ours["possibly lost"],
        (1, 100),
        "new char[100], pointed to 40 bytes in"
    );
    for global in ["array_root", "second_root", "string_root"] {
        assert!(
            leaks.sites.iter().any(|s| s.kind == "still reachable"
                && s.root
                    .as_deref()
                    .is_some_and(|r| r.starts_with(&format!("global {global} in ")))),
            "{global}: {:#?}",
            leaks.sites
        );
    }
    assert_eq!(ours, memcheck_kinds(cases), "ours, then memcheck's");
}

/// Threads' stacks and TLS are roots: a worker still running at the exit (killed by it, held in
/// its own exit stop) keeps a block on its stack, the main thread one in its TLS. memcheck
/// counts the same blocks per kind (its bytes differ only by the worker's DTV, whose size
/// depends on the modules loaded: valgrind preloads its own).
#[test]
fn record_leaks_scans_every_threads_stack_and_tls() {
    require!(program "valgrind");
    let threads = program("leak_threads");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    record_leaks(threads, &trace);
    let leaks = leaks_of(&trace);
    assert_eq!(leaks.threads, 2, "{leaks:#?}");
    let held = |bytes: u64| {
        leaks
            .sites
            .iter()
            .find(|s| s.bytes == bytes && s.kind == "still reachable")
            .and_then(|s| s.root.clone())
            .unwrap_or_default()
    };
    let pid = leaks.pid;
    assert_eq!(held(1234), format!("TLS of thread {pid}"));
    let worker = held(4321);
    assert!(
        worker.starts_with("stack of thread ") && worker != format!("stack of thread {pid}"),
        "{worker}"
    );
    let ours = kinds_in(&leaks);
    assert_eq!(ours["definitely lost"], (1, 777));
    assert_eq!(ours["still reachable"], (2, 4321 + 1234));
    let blocks = |k: &BTreeMap<String, (u64, u64)>| -> Vec<(String, u64)> {
        k.iter().map(|(kind, (n, _))| (kind.clone(), *n)).collect()
    };
    assert_eq!(blocks(&ours), blocks(&memcheck_kinds(threads)));
}

/// The check is of the image running at the exit: a shell that execs the program is checked as
/// the program (before, the shell's blocks were classified against the program's memory).
#[test]
fn record_leaks_checks_the_program_the_command_execs() {
    let cases = program("leak_cases");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let script = format!("exec '{}'", cases.display());
    testkit::record(&trace, &["--leaks"], &["sh", "-c", &script]);
    let leaks = leaks_of(&trace);
    assert_eq!(leaks.exec_index, 1);
    let kinds = kinds_in(&leaks);
    assert_eq!(kinds["definitely lost"], (3, 216), "{kinds:?}");
    assert_eq!(kinds["still reachable"], (4, 216), "{kinds:?}");
}

/// An exec from a thread other than main kills main, which stops in its exit: that is not the
/// process's exit (it runs on as the exec'd program, which is the one checked).
#[test]
fn record_leaks_checks_the_program_a_worker_thread_execs() {
    let cases = program("leak_cases");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let threads = program("leak_threads").as_os_str();
    testkit::record(&trace, &["--leaks"], &[threads, cases.as_os_str()]);
    let leaks = leaks_of(&trace);
    assert_eq!(leaks.exec_index, 1);
    let kinds = kinds_in(&leaks);
    assert_eq!(kinds["definitely lost"], (3, 216), "{kinds:?}");
    assert_eq!(kinds["still reachable"], (4, 216), "{kinds:?}");
}

/// A main thread that ends alone (`pthread_exit`) is not the process's exit: the check waits for
/// the worker's `exit`, and reads the process through it (its own /proc entry is a zombie's).
#[test]
fn record_leaks_waits_for_the_process_exit_when_the_main_thread_ends_first() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let leader_exit = program("leader_exit").as_os_str();
    testkit::record(
        &trace,
        &["--leaks"],
        &[leader_exit, "1".as_ref(), "0".as_ref()],
    );
    let leaks = leaks_of(&trace);
    assert!(leaks.scanned && leaks.degraded.is_none(), "{leaks:#?}");
    assert!(leaks.root_bytes > 0, "{leaks:#?}");
    // The worker freed its 1 MiB before its exit; stdout's buffer is held by libc.
    let kinds = kinds_in(&leaks);
    assert!(!kinds.contains_key("definitely lost"), "{leaks:#?}");
    assert!(leaks.sites.iter().all(|s| s.bytes < 1 << 20), "{leaks:#?}");
}

/// Where ptrace is refused (a seccomp filter on alloclens, as a container's profile may set),
/// the recording goes on and every block still allocated is "not freed at exit", said plainly.
#[test]
fn record_leaks_where_ptrace_is_refused_reports_blocks_not_freed_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.alt");
    let out = Command::new(program("no_ptrace"))
        .arg(alloclens_exe())
        .args(["record", "--leaks", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(program("leak_cases"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("alloclens: warning: --leaks: memory not scanned: the kernel refused ptrace"),
        "{stderr}"
    );
    assert!(stderr.contains("NOT CHECKED"), "{stderr}");
    let leaks = leaks_of(&trace);
    assert!(!leaks.scanned);
    let kinds = kinds_in(&leaks);
    // Every block of the nine cases: 15 blocks, 1152 bytes.
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds["not freed at exit"], (15, 1152));
}
