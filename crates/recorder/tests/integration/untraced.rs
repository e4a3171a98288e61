//! Programs that run under a recording without the shim are reported as not traced, with the
//! reason, in the summary and in the trace (issue 15: before, they vanished without a word, and
//! the image that exec'd them was marked truncated).
use std::ffi::OsString;
use std::path::Path;

use trace::{EndReason, Op, TraceReader, Untraced};

use crate::common::{programs, read_trace, Image};

/// A statically linked C program (needs libc.a: Debian's libc6-dev has it).
fn static_program() -> &'static Path {
    testkit::program("static")
}

fn record_cmd(command: Vec<OsString>) -> (recorder::RecordSummary, Vec<Image>, Vec<Untraced>) {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let out = programs().dir.path().join(format!(
        "u-{}-{}.alt",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut o = recorder::RecordOptions::new(command, out.clone());
    o.linger = std::time::Duration::from_secs(5);
    let summary = recorder::record(&o).unwrap();
    assert!(summary.status.success(), "{:?}", summary.status);
    let images = read_trace(&out);
    let in_file = TraceReader::open(&out).unwrap().untraced().to_vec();
    assert_eq!(
        in_file, summary.untraced,
        "the trace holds what the summary says"
    );
    (summary, images, in_file)
}

fn traced(args: &[&str], run: &[&OsString]) -> Vec<OsString> {
    let mut c: Vec<OsString> = vec![programs().traced.clone().into()];
    c.extend(args.iter().map(OsString::from));
    c.extend(run.iter().map(|s| (*s).clone()));
    c
}

fn only(untraced: &[Untraced]) -> &Untraced {
    assert_eq!(untraced.len(), 1, "{untraced:#?}");
    &untraced[0]
}

#[test]
fn a_static_command_is_reported_not_traced() {
    let st: OsString = static_program().into();
    let (summary, images, untraced) = record_cmd(vec![st]);
    assert!(images.is_empty());
    let u = only(&untraced);
    assert!(u.reason.contains("statically linked"), "{u:?}");
    assert_eq!(u.program, static_program().to_str().unwrap());
    assert_eq!(u.ppid, std::process::id());
    assert_eq!(summary.events, 0);
}

/// Exec in place, posix_spawn and vfork + execvp of a static program: each is reported with
/// the pid that ran it, and the image that exec'd it ended by exec, complete.
#[test]
fn a_static_program_run_by_a_traced_one_is_reported_not_traced() {
    let st: OsString = static_program().into();
    for how in ["exec", "spawnrun", "vforkrun"] {
        let (_, images, untraced) = record_cmd(traced(&[how, "50"], &[&st]));
        assert_eq!(images.len(), 1, "{how}");
        let parent = &images[0];
        assert_eq!(parent.count(Op::Malloc, 1901), 50, "{how}");
        let u = only(&untraced);
        assert!(u.reason.contains("statically linked"), "{how}: {u:?}");
        assert!(u.program.ends_with("/static"), "{how}: {u:?}");
        if how == "exec" {
            assert_eq!(u.pid, parent.info.pid);
            assert_eq!(u.ppid, parent.info.ppid);
            assert_eq!(parent.end, Some(EndReason::Exec), "not truncated");
        } else {
            assert_eq!(u.ppid, parent.info.pid, "{how}");
            assert_ne!(u.pid, parent.info.pid, "{how}");
            assert_eq!(parent.end, Some(EndReason::Exit), "{how}");
        }
    }
}

#[test]
fn env_i_is_reported_not_traced() {
    let leaf: OsString = programs().traced.clone().into();
    let cmd = ["env", "-i"].map(OsString::from);
    let (_, images, untraced) = record_cmd(vec![
        cmd[0].clone(),
        cmd[1].clone(),
        leaf,
        "leaf".into(),
        "10".into(),
    ]);
    // env itself is traced and ends by its exec.
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].end, Some(EndReason::Exec));
    let u = only(&untraced);
    assert!(u.reason.contains("no LD_PRELOAD"), "{u:?}");
    assert_eq!(u.pid, images[0].info.pid);
    assert_eq!(u.argv0, programs().traced.to_str().unwrap());
}

#[test]
fn another_ld_preload_is_reported_not_traced() {
    let leaf: OsString = programs().traced.clone().into();
    let other = format!("LD_PRELOAD={}", programs().plugin.display());
    let (_, images, untraced) = record_cmd(vec![
        "env".into(),
        other.into(),
        leaf,
        "leaf".into(),
        "10".into(),
    ]);
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].end, Some(EndReason::Exec));
    let u = only(&untraced);
    assert!(
        u.reason.contains("does not name the alloclens shim")
            && u.reason.contains(programs().plugin.to_str().unwrap()),
        "{u:?}"
    );
}

/// The other side: programs that load the shim are not reported, whichever way they started.
#[test]
fn traced_programs_are_not_reported() {
    let leaf: OsString = programs().traced.clone().into();
    for how in ["exec", "spawnrun", "vforkrun"] {
        let (_, images, untraced) =
            record_cmd(traced(&[how, "20"], &[&leaf, &"leaf".into(), &"30".into()]));
        assert!(untraced.is_empty(), "{how}: {untraced:?}");
        assert_eq!(images.len(), 2, "{how}");
        assert!(
            images.iter().any(|i| i.count(Op::Malloc, 1401) == 30),
            "{how}"
        );
    }
    // An exec that fails is no program run.
    let missing: OsString = "/nonexistent/program".into();
    let mut o = recorder::RecordOptions::new(
        traced(&["vforkrun", "5"], &[&missing]),
        programs().dir.path().join("u-missing.alt"),
    );
    o.linger = std::time::Duration::from_secs(5);
    let summary = recorder::record(&o).unwrap();
    assert_eq!(summary.status.code(), Some(5));
    assert!(summary.untraced.is_empty(), "{:?}", summary.untraced);
}
