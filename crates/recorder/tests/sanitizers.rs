//! The shim under the sanitizers. Its own test binary: it sets ALLOCLENS_SHIM for the process.
//!
//! - AddressSanitizer: the test program is built with ASan+UBSan and traced with the normal shim
//!   preloaded in front of ASan's allocator, so every pointer the shim hands back or forwards is
//!   checked (no arena pointer leaking into the real free, no double free, no overflow).
//! - UBSan: the shim itself is built with -fsanitize=undefined and no recovery, so undefined
//!   behaviour in the hot path aborts the traced program.
//!
//! Building the shim itself with ASan does not work as a preload: ASan's own start-up calls dlsym,
//! which allocates, which enters the instrumented shim before ASan's shadow memory exists.
mod common;

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use trace::Op;

fn cc(args: &[&str]) {
    let ok = Command::new("cc").args(args).status().unwrap();
    assert!(ok.success(), "cc {args:?}");
}

/// Records `command` (with `env`) into `trace`; the sanitizer must not have stopped it (`what`
/// names the run). Returns the trace's images.
fn record_clean(
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    trace: &Path,
    what: &str,
) -> Vec<common::Image> {
    let mut o = recorder::RecordOptions::new(command, trace.to_path_buf());
    o.env = env;
    let summary = recorder::record(&o).unwrap();
    assert!(summary.status.success(), "{what}: {:?}", summary.status);
    common::read_trace(trace)
}

#[test]
fn shim_runs_clean_under_asan_and_ubsan() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let prog = testkit::source("traced.c");
    let shim = root.join("../../shim/record");
    let src = |f: &str| shim.join(f).to_str().unwrap().to_string();

    cc(&[
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-g",
        "-O1",
        "-pthread",
        "-o",
        &d("traced_asan"),
        prog.to_str().unwrap(),
        "-ldl",
    ]);
    let mut ubsan_shim = vec![
        "-fsanitize=undefined",
        "-fno-sanitize-recover=all",
        "-g",
        "-O1",
        "-std=gnu11",
        "-fPIC",
    ];
    ubsan_shim.extend(["-fvisibility=hidden", "-ftls-model=initial-exec"]);
    let common = format!("-I{}", root.join("../../shim/common").display());
    ubsan_shim.extend(["-fexceptions", "-shared", common.as_str()]);
    let map = format!("-Wl,--version-script={}", src("exports.map"));
    let out = d("shim_ubsan.so");
    let sources = [
        src("bootstrap.c"),
        src("buffer.c"),
        src("cxx.c"),
        src("exec.c"),
        src("hooks.c"),
        src("stacks.c"),
        src("transport.c"),
    ];
    let mut args: Vec<&str> = ubsan_shim.clone();
    args.extend([map.as_str(), "-o", out.as_str()]);
    args.extend(sources.iter().map(String::as_str));
    args.extend(["-ldl", "-lpthread"]);
    cc(&args);

    // ASan program, normal shim.
    for mode in [["threads", "20000", "4"], ["fork", "3000", ""]] {
        let trace = dir.path().join(format!("asan-{}.alt", mode[0]));
        let mut command = vec![d("traced_asan").into(), mode[0].into(), mode[1].into()];
        if !mode[2].is_empty() {
            command.push(mode[2].into());
        }
        let env = vec![(
            "ASAN_OPTIONS".into(),
            "verify_asan_link_order=0:detect_leaks=0:abort_on_error=0".into(),
        )];
        let what = format!("ASan reported an error in mode {}", mode[0]);
        let images = record_clean(command, env, &trace, &what);
        if mode[0] == "threads" {
            assert_eq!(images[0].count(Op::Malloc, 2003), 20000);
        } else {
            assert_eq!(images.len(), 2);
            assert_eq!(images[1].count(Op::Malloc, 1202), 3000);
        }
    }

    // UBSan shim, normal program (threads, fork, markers).
    std::env::set_var(recorder::ENV_SHIM_OVERRIDE, &out);
    let plain = common::programs().traced.clone();
    for mode in ["threads", "fork", "mark", "ops"] {
        let trace = dir.path().join(format!("ubsan-{mode}.alt"));
        let command = vec![plain.clone().into(), mode.into(), "3000".into()];
        let images = record_clean(
            command,
            Vec::new(),
            &trace,
            &format!("UBSan stopped mode {mode}"),
        );
        assert!(images[0].events().count() >= 6000);
    }
    // Calls in signal handlers (hooks.c: queued, handed off during a ring wait) and execs
    // announced from a vfork child and after posix_spawn (exec.c).
    let counts = d("ubsan-signals.txt");
    let plain_s = plain.to_str().unwrap();
    for args in [
        vec!["signals", "1000", counts.as_str()],
        vec!["vforkrun", "100", plain_s, "leaf", "100"],
        vec!["spawnrun", "100", plain_s, "leaf", "100"],
    ] {
        let trace = dir.path().join(format!("ubsan-{}.alt", args[0]));
        let command = args.iter().map(OsString::from).collect::<Vec<_>>();
        let mut command = command;
        command.insert(0, plain.clone().into());
        // Handlers call the allocator: one that may be called there (common.rs, sigsafe).
        let env = vec![(
            "LD_PRELOAD".into(),
            common::programs().sigsafe.clone().into(),
        )];
        let images = record_clean(command, env, &trace, &format!("UBSan stopped {args:?}"));
        assert!(!images.is_empty());
    }
    // The C++ operators (cxx.c), a bad_alloc unwinding through them included, behind glibc's
    // operators and behind tcmalloc's.
    let tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
    for preload in [None, Some(tcmalloc)] {
        if preload.is_some_and(|p| !Path::new(p).exists()) {
            continue;
        }
        let name = preload.map_or("glibc", |_| "tcmalloc");
        let trace = dir.path().join(format!("ubsan-cxx-{name}.alt"));
        let command = vec![
            common::programs().newdelete.clone().into(),
            "3000".into(),
            "throw".into(),
        ];
        let env = preload.map_or(Vec::new(), |p| vec![("LD_PRELOAD".into(), p.into())]);
        let what = format!("UBSan stopped newdelete ({preload:?})");
        let images = record_clean(command, env, &trace, &what);
        assert!(images[0].events().count() >= 24_000);
    }
    std::env::remove_var(recorder::ENV_SHIM_OVERRIDE);
}
