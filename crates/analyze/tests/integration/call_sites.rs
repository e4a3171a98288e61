//! Folding per-stack figures into call sites, on real stacks: a C program (testkit's
//! `known_sites`, gcc -g -O2) captures its stacks with glibc's backtrace() and prints them with its
//! /proc/self/maps; the test gives each distinct stack known figures (as `analyze::sites` would)
//! and checks the folded sites.
use std::process::Command;

use analyze::call_sites::{address_space, fold, FoldInput, SortKey};
use analyze::sites::SiteStats;
use trace::{Module, ProcessInfo, StackTable};

struct Program {
    stacks: Vec<Vec<u64>>,
    modules: Vec<Module>,
}

fn run_program() -> Program {
    let exe = testkit::program("known_sites");
    let out = Command::new(exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let stacks = text
        .lines()
        .filter_map(|l| l.strip_prefix("stack "))
        .map(|l| l.split_whitespace().map(hex).collect())
        .collect();
    // One module per file, as `record --stacks` records it: lowest to highest mapping, bias = where
    // its offset-0 mapping is (PIE executables and shared libraries).
    let mut modules: Vec<Module> = Vec::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("map ")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 6 || !f[5].starts_with('/') {
            continue;
        }
        let (start, end) = f[0].split_once('-').unwrap();
        let (start, end, offset) = (hex(start), hex(end), hex(f[2]));
        match modules.iter_mut().find(|m| m.path == f[5]) {
            Some(m) => m.end = m.end.max(end),
            None => modules.push(Module {
                pid: 1,
                exec_index: 0,
                path: f[5].to_string(),
                start,
                end,
                file_offset: offset,
                bias: start - offset,
                build_id: None,
                unix_ns: 0,
            }),
        }
    }
    Program { stacks, modules }
}

#[test]
fn figures_fold_by_function_and_by_stack() {
    let program = run_program();
    // A's 3 calls come from one line (one stack), then B, then C: 3 distinct stacks.
    assert_eq!(program.stacks.len(), 5);
    assert_eq!(program.stacks[0], program.stacks[2]);
    let mut table = StackTable::new();
    let mut ids = Vec::new();
    for s in &program.stacks[2..] {
        ids.push(table.push(s));
    }
    // Stack figures: A's stack 1000 calls, B's 10, C's 5 leaked blocks of 64 B; one call without stack.
    let site = |stack, calls: u64, leaked_blocks: u64| SiteStats {
        stack,
        pid: 1,
        calls,
        requested_bytes: calls * 64,
        peak_live_bytes: leaked_blocks * 64,
        leaked_bytes: leaked_blocks * 64,
        leaked_blocks,
        ..Default::default()
    };
    let sites = vec![
        site(ids[0], 1000, 0),
        site(ids[1], 10, 0),
        site(ids[2], 5, 5),
        site(0, 1, 0),
    ];
    let info = ProcessInfo {
        pid: 1,
        ppid: 0,
        exec_index: 0,
        cmdline: vec!["known_sites".into()],
        start_unix_ns: 0,
        truncated: false,
    };
    let space = address_space(&info, std::slice::from_ref(&info), &program.modules);
    let mut symbolizer = symbols::Symbolizer::new(vec![]);
    let input = FoldInput {
        info: &info,
        sites: &sites,
        space,
        residency: None,
    };
    let folded = fold(vec![input], &table, &mut symbolizer, SortKey::Calls);
    assert_eq!(folded.warnings, Vec::<String>::new());
    let p = &folded.processes[0];

    let f = |name: &str| {
        p.functions
            .iter()
            .find(|f| f.function == name)
            .unwrap_or_else(|| panic!("no {name}: {:?}", p.functions))
    };
    assert_eq!(
        (f("helper").figures.calls, f("helper").calls_inclusive),
        (1010, 1010)
    );
    assert_eq!((f("A").figures.calls, f("A").calls_inclusive), (0, 1000));
    assert_eq!(
        (
            f("inlined_step").figures.calls,
            f("inlined_step").calls_inclusive
        ),
        (0, 10)
    );
    assert_eq!((f("B").figures.calls, f("B").calls_inclusive), (0, 10));
    assert_eq!((f("C").figures.calls, f("C").figures.leaked_blocks), (5, 5));
    assert_eq!(f("main").calls_inclusive, 1015);
    assert_eq!(
        f("helper")
            .location
            .as_deref()
            .map(|l| l.starts_with("known_sites.c:")),
        Some(true)
    );
    // Sorted by calls: helper first; its figures summed over A's and B's stacks.
    assert_eq!(p.functions[0].function, "helper");
    assert_eq!(p.functions[0].figures.stacks, 2);
    assert_eq!(p.without_stack.calls, 1);

    let labels: Vec<Vec<&str>> = p.stacks.iter().map(|s| s.root_first()).collect();
    fn inner<'a>(l: &[&'a str]) -> Vec<&'a str> {
        l[l.iter().position(|f| *f == "main").unwrap()..].to_vec()
    }
    assert_eq!(inner(&labels[0]), ["main", "A", "helper"]);
    assert_eq!(inner(&labels[1]), ["main", "B", "inlined_step", "helper"]);
    assert_eq!(inner(&labels[2]), ["main", "C"]);
    assert_eq!(
        p.stacks.iter().map(|s| s.figures.calls).collect::<Vec<_>>(),
        [1000, 10, 5]
    );
    assert!(
        p.stacks[1]
            .frames
            .iter()
            .find(|f| f.label == "inlined_step")
            .unwrap()
            .inlined
    );

    // The text: the function table and the stacks with their frames.
    let mut text = Vec::new();
    let images: Vec<usize> = (0..folded.processes.len()).collect();
    let options = analyze::output::sites::SitesTextOptions {
        images: &images,
        functions: 2,
        sort: analyze::call_sites::SortKey::Calls,
        sort_label: "calls",
    };
    analyze::output::sites::write_sites_text(&folded, &options, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    eprintln!("{text}");
    assert!(
        text.contains("top 2 of 2 allocating functions by calls"),
        "{text}"
    );
    assert!(text.contains("top 2 of 3 stacks by calls"), "{text}");
    let helper = text
        .lines()
        .find(|l| l.contains(" helper (known_sites.c:"))
        .unwrap();
    assert!(helper.trim_start().starts_with("1,010 "), "{helper}");
    assert!(
        text.contains("    inlined_step at known_sites.c:"),
        "{text}"
    );
    assert!(text.contains("[inlined]"), "{text}");
}
