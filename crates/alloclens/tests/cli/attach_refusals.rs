//! The refusals of an attach (`watch --pid`; `record --pid` shares `attach::check`): one line
//! each naming the fix, found before the process is touched, the watch going on from /proc; and
//! nothing of the attach left behind in /tmp/alloclens-attach-UID. Stopped, static and a second
//! alloclens are in watch.rs (`watch_pid_says_why_it_cannot_attach_and_watches_from_proc`); the
//! process exiting while the attach waits for a safe point is in the agent's tests
//! (`a_process_that_exits_during_the_attach_is_said_and_nothing_is_left`); musl is a unit test of
//! attach's process.rs (no musl program can be built here).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use testkit::{alloclens_exe, wait_until};

/// `watch --pid PID` for 1 s into `out`, run through `wrapper` (a command and its arguments, to
/// which alloclens's own command line is appended).
fn watch_pid(wrapper: &[&str], pid: u32, out: &Path) -> Output {
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(alloclens_exe());
            c
        }
        None => Command::new(alloclens_exe()),
    };
    command
        .args(["watch", "--interval", "100ms", "--duration", "1s", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

/// The line `watch` prints when the attach is refused with `refusal`.
fn refused_line(pid: u32, refusal: &str) -> String {
    format!("alloclens: the agent could not be loaded into process {pid}: {refusal}\n")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn status_field(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap()
}

fn sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

/// ptrace refused, twice: by the kernel's rules that /proc shows (alloclens's real uid is not the
/// process's, and it lacks CAP_SYS_PTRACE: refused before anything is touched, the same rule the
/// kernel applies to PTRACE_SEIZE), and by what /proc cannot show (a seccomp filter, as a
/// container's profile may have: the PTRACE_SEIZE itself is refused, with the same line). The
/// process is left as it was. Without the rights to read /proc at all, watch says so instead.
#[test]
fn ptrace_refused_is_one_line_naming_the_fix() {
    testkit::require!(root);
    let tmp = tempfile::tempdir().unwrap();
    let mut target = sleeper();
    let pid = target.id();
    let fix = "run alloclens with CAP_SYS_PTRACE (as root; in a container --cap-add=SYS_PTRACE and a seccomp profile that allows ptrace), or as the process's user with kernel.yama.ptrace_scope 0";

    // Real uid nobody, effective uid root (it reads /proc), no CAP_SYS_PTRACE.
    let out = watch_pid(
        &[
            "setpriv",
            "--ruid=65534",
            "--bounding-set=-sys_ptrace",
            "--inh-caps=-all",
        ],
        pid,
        &tmp.path().join("uid"),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let line = format!("ptrace of process {pid} is refused (it runs as uid 0, alloclens as uid 65534 without CAP_SYS_PTRACE): {fix}");
    assert!(err.contains(&refused_line(pid, &line)), "{err}");

    // A seccomp filter on ptrace: the seize is refused.
    let out = watch_pid(
        &[testkit::program("no_ptrace").to_str().unwrap()],
        pid,
        &tmp.path().join("seccomp"),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let line = format!("ptrace of process {pid} is refused (PTRACE_SEIZE of thread {pid}: Operation not permitted (os error 1)): {fix}");
    assert!(err.contains(&refused_line(pid, &line)), "{err}");

    // Another user altogether: /proc is not readable, watch stops with its own line.
    let own = tmp.path().join("nobody");
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
    let out = watch_pid(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ],
        pid,
        &own.join("out"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with(&format!("alloclens: error: process {pid} may not be read")));
    assert!(err
        .trim_end()
        .ends_with("run alloclens as the process's user or as root"));
    assert_eq!(err.lines().count(), 1, "{err}");

    assert_eq!(status_field(pid, "TracerPid:"), "0");
    assert!(target.try_wait().unwrap().is_none());
    assert_eq!(
        testkit::attach_leftovers(Path::new("/"), pid),
        Vec::<String>::new()
    );
    target.kill().unwrap();
    target.wait().unwrap();
}

/// A process another tracer holds, and a zombie (killed, not reaped), are refused from /proc.
#[test]
fn a_zombie_and_a_traced_process_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut traced = sleeper();
    let pid = traced.id();
    // SAFETY: PTRACE_SEIZE of our own child; it keeps running (seize does not stop it), and it is
    // detached when this thread ends or the child is killed.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid as libc::pid_t, 0, 0) };
    assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
    let tracer = status_field(pid, "TracerPid:");
    let out = watch_pid(&[], pid, &tmp.path().join("traced"));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let line = format!("process {pid} is already traced by process {tracer} (a debugger or strace): detach it first");
    assert!(err.contains(&refused_line(pid, &line)), "{err}");
    // SAFETY: a signal to our own child (a traced one dies of SIGKILL all the same).
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };

    let mut zombie = sleeper();
    let pid = zombie.id();
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait_until("the child to be a zombie", Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    });
    // watch's own check comes first: nothing to watch either.
    let out = watch_pid(&[], pid, &tmp.path().join("zombie"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!("alloclens: error: process {pid} has exited (a zombie its parent has not reaped): nothing to watch\n")
    );
    zombie.wait().unwrap();
    traced.wait().unwrap();
}

/// The first child of process `parent`, once it has one.
fn first_child(parent: u32) -> u32 {
    let mut child = 0;
    wait_until(
        "the child in the namespace",
        Duration::from_secs(10),
        || {
            child = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
                .ok()
                .and_then(|c| c.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            child != 0
        },
    );
    child
}

/// A process in another PID namespace (a container seen from the host) is refused, naming the
/// pid it has in there and how to run alloclens there.
#[test]
fn another_pid_namespace_is_refused_naming_its_pid_in_there() {
    testkit::require!(root);
    let tmp = tempfile::tempdir().unwrap();
    let mut unshare = Command::new("unshare")
        .args(["--pid", "--fork", "--kill-child", "sleep", "60"])
        .spawn()
        .unwrap();
    let pid = first_child(unshare.id());
    wait_until("sleep to run", Duration::from_secs(10), || {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|e| e.file_name().is_some_and(|n| n == "sleep"))
    });
    let out = watch_pid(&[], pid, &tmp.path().join("pidns"));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let line = format!("process {pid} is in another PID namespace (a container), where it is process 1: run alloclens in there with --pid 1 (docker exec, kubectl exec, or nsenter -t {pid} -p -m)");
    assert!(err.contains(&refused_line(pid, &line)), "{err}");
    assert_eq!(status_field(pid, "TracerPid:"), "0");
    assert_eq!(
        testkit::attach_leftovers(Path::new("/"), pid),
        Vec::<String>::new()
    );
    unshare.kill().unwrap();
    unshare.wait().unwrap();
}

/// A process in another mount namespace, with a /tmp of its own (a tmpfs only it sees), is
/// attached through /proc/PID/root: the agent is loaded from its own /tmp and the watch has its
/// figures; afterwards its /tmp holds only the agent's copy (kept for a later attach), no lock,
/// no scratch directory, and it runs on to its normal end.
#[test]
fn another_mount_namespace_is_attached_through_its_root_and_left_clean() {
    testkit::require!(root);
    let tmp = tempfile::tempdir().unwrap();
    let (mut child, mut out) = testkit::spawn_with_private_tmp();
    let pid = child.id();
    let root = std::path::PathBuf::from(format!("/proc/{pid}/root"));
    assert!(!root
        .join("tmp")
        .join(tmp.path().file_name().unwrap())
        .exists());

    let watched = watch_pid(&[], pid, &tmp.path().join("mntns"));
    let err = stderr(&watched);
    assert!(watched.status.success(), "{err}");
    assert!(
        err.contains(&format!("attached to process {pid} without a debugger")),
        "{err}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mapped = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/alloclens-attach-"))
        .expect("the agent is mapped")
        .to_string();
    assert!(
        root.join(mapped.trim_start_matches('/')).exists(),
        "{mapped}"
    );
    // SAFETY: geteuid has no preconditions.
    let ours = root.join(format!("tmp/alloclens-attach-{}", unsafe {
        libc::geteuid()
    }));
    let left: Vec<String> = std::fs::read_dir(&ours)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.len() == 1 && mapped.ends_with(&left[0]),
        "{left:?} in its /tmp"
    );

    drop(child.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{rest}");
    assert!(rest.ends_with("done\n"), "{rest}");
}

/// The process exits while it is watched: the watch's scratch directory and lock are removed
/// although /proc/PID/root, through which they were made, is gone with the process.
#[test]
fn nothing_is_left_when_the_watched_process_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(testkit::program("busy_threads"))
        .arg("2")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let dir = tmp.path().join("exits");
    let watch = Command::new(alloclens_exe())
        .args(["watch", "--interval", "100ms", "--duration", "60s", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the agent's figures", Duration::from_secs(30), || {
        !testkit::attach_leftovers(Path::new("/"), pid).is_empty()
            && std::fs::read_to_string(dir.join("samples.csv"))
                .is_ok_and(|t| t.lines().count() >= 3)
    });
    drop(child.stdin.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let watched = watch.wait_with_output().unwrap();
    let err = stderr(&watched);
    assert!(watched.status.success(), "{err}");
    assert!(err.contains("without a debugger"), "{err}");
    assert_eq!(
        testkit::attach_leftovers(Path::new("/"), pid),
        Vec::<String>::new()
    );
}

/// No refusal the kernel would not make: a user without capabilities attaches to a process of a
/// user namespace it owns (a rootless container), where that process is root with every
/// capability (in its namespace: the kernel lets the namespace's owner ptrace it).
#[test]
fn a_rootless_container_is_attached_by_its_owner_without_capabilities() {
    testkit::require!(root);
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ];
    let tmp = tempfile::tempdir().unwrap();
    let own = tmp.path().join("nobody");
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
    let mut container = Command::new(nobody[0])
        .args(&nobody[1..])
        .args(["unshare", "--user", "--map-root-user", "sleep", "60"])
        .spawn()
        .unwrap();
    let pid = container.id();
    wait_until(
        "sleep in its user namespace",
        Duration::from_secs(10),
        || {
            assert!(
                container.try_wait().unwrap().is_none(),
                "unshare --user as nobody failed: this machine forbids unprivileged user namespaces (user.max_user_namespaces, or AppArmor's restriction)"
            );
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|e| e.file_name().is_some_and(|n| n == "sleep"))
        },
    );
    assert_ne!(status_field(pid, "CapEff:"), "0000000000000000");
    let out = watch_pid(&nobody, pid, &own.join("out"));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("attached to process {pid} without a debugger")),
        "{err}"
    );
    container.kill().unwrap();
    container.wait().unwrap();
}
