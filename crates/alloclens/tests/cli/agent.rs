//! The watch agent (crates/agent, shim/agent) in real processes under real allocators: its live
//! bytes and blocks against the workload's own count, glibc's malloc_info against mallinfo2,
//! jemalloc's stats.allocated against the live bytes, fork/exec/threads, the trim request, and a
//! directory deleted under a running program.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agent::{AgentConfig, Snapshot};

/// The library of an installed allocator (None for glibc: nothing to preload), or why not.
fn allocator_library(name: &str) -> Result<Option<PathBuf>, String> {
    if name == "glibc" {
        return Ok(None);
    }
    allocators::discover()
        .into_iter()
        .find(|a| a.name == name)
        .and_then(|a| a.library)
        .map(Some)
        .ok_or_else(|| {
            // Where CI runs every allocator is installed: this fails there (testkit's skip policy).
            testkit::require(testkit::Need::Allocator(name), "agent");
            format!("note: {name} not installed (scripts/setup.sh); skipped")
        })
}

fn agent_command(
    dir: &Path,
    interval_ms: u64,
    allocator: Option<&Path>,
    program: &[&str],
) -> Command {
    let cfg = AgentConfig {
        dir: dir.to_path_buf(),
        interval: Duration::from_millis(interval_ms),
        profile_bytes: None,
    };
    let mut cmd = Command::new(program[0]);
    cmd.args(&program[1..]);
    cmd.envs(cfg.env());
    cmd.env(
        "LD_PRELOAD",
        cfg.preload(allocator.map(Path::as_os_str)).unwrap(),
    );
    cmd
}

fn run_workload(dir: &Path, allocator: Option<&Path>, args: &[&str]) -> (Output, Vec<Snapshot>) {
    let exe = testkit::alloclens_exe();
    let mut program = vec![exe.as_str(), "workload"];
    program.extend_from_slice(args);
    let out = agent_command(dir, 100, allocator, &program)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, agent::read_snapshots(dir).unwrap())
}

/// `key=value` of the last line starting with `prefix`.
fn field(stdout: &[u8], prefix: &str, key: &str) -> u64 {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().rfind(|l| l.starts_with(prefix)).expect(prefix);
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} in {line}"))
        .parse()
        .unwrap()
}

fn only(snaps: &[Snapshot]) -> &Snapshot {
    assert_eq!(snaps.len(), 1, "one process, one file: {snaps:#?}");
    &snaps[0]
}

/// Live bytes and blocks of the leak workload's last line (it then idles and exits, its leaked
/// blocks still allocated), against the agent's final snapshot; the allocator's own figures
/// where it has them.
fn leak_counts_match(name: &str) {
    let lib = match allocator_library(name) {
        Ok(l) => l,
        Err(note) => return eprintln!("{note}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "leak",
        "--duration-ms",
        "1000",
        "--leak-kb-per-s",
        "8192",
        "--hold-ms",
        "300",
        "--report-ms",
        "100000",
    ];
    let (out, snaps) = run_workload(dir.path(), lib.as_deref(), &args);
    let s = only(&snaps);
    assert!(s.is_final, "{s:#?}");
    assert!(
        s.seq >= 3,
        "periodic snapshots came before the final one: {s:#?}"
    );
    assert_eq!(s.allocator.name, name);
    let own_bytes =
        field(&out.stdout, "live:", "bytes") + field(&out.stdout, "live:", "table_bytes");
    let own_blocks = field(&out.stdout, "live:", "blocks") + 1;
    let c = &s.counters;
    // Usable sizes: at least what was asked, at most a size class above (+25 %; tbbmalloc's
    // classes are coarser: 3000 bytes are 3968 usable), plus what the Rust runtime keeps (stdout's
    // buffer, thread names: a few KiB).
    let rounding = if name == "tbbmalloc" {
        own_bytes / 2
    } else {
        own_bytes / 4
    };
    assert!(
        c.live_bytes >= own_bytes && c.live_bytes <= own_bytes + rounding + 64 * 1024,
        "{name}: agent {} against the workload's {own_bytes}",
        c.live_bytes
    );
    assert!(
        c.live_blocks >= own_blocks && c.live_blocks <= own_blocks + 300,
        "{name}: agent {} blocks against the workload's {own_blocks}",
        c.live_blocks
    );
    // 20 transient pairs per tick (a tick is at least 1 ms; how many fit in the 1 s depends on
    // the machine's load): every one the workload says it made is counted.
    let ticks = field(&out.stdout, "done:", "ops");
    assert!(ticks > 0, "{name}: no tick");
    assert!(
        c.allocs >= 20 * ticks && c.frees >= 20 * ticks,
        "{name}: the churn's calls of {ticks} ticks are counted: {c:?}"
    );
    assert!(c.requested_bytes > own_bytes);
    let a = &s.allocator;
    match name {
        "glibc" => {
            // Taken by the exiting thread with no other thread left: malloc_info and mallinfo2
            // read the same bins.
            assert_eq!(
                a.free_resident,
                a.raw.get("mallinfo2.fordblks").copied(),
                "{a:#?}"
            );
            assert!(!a.arenas.is_empty() && a.free_chunks.unwrap() > 0);
            // In use by glibc's count: the live chunks, headers included.
            let handed = a.handed_out.unwrap();
            assert!(
                handed >= c.live_bytes && handed <= c.live_bytes + c.live_blocks * 16 + 64 * 1024,
                "glibc in use {handed} against live {} in {} blocks",
                c.live_bytes,
                c.live_blocks
            );
        }
        "jemalloc" => {
            // stats.allocated counts size classes too; the thread cache's free objects count as
            // allocated (a few hundred KiB at most here).
            let allocated = a.handed_out.unwrap();
            assert!(
                allocated >= c.live_bytes - c.live_bytes / 50
                    && allocated <= c.live_bytes + c.live_bytes / 20 + 1024 * 1024,
                "jemalloc stats.allocated {allocated} against live {}",
                c.live_bytes
            );
            assert!(a.free_resident.is_some() && a.metadata.is_some() && a.returned.is_some());
            assert!(a.heap_total.unwrap() >= allocated);
        }
        "tcmalloc" => {
            let allocated = a.handed_out.unwrap();
            assert!(
                allocated >= c.live_bytes - c.live_bytes / 50
                    && allocated <= c.live_bytes + c.live_bytes / 20 + 1024 * 1024,
                "tcmalloc current_allocated_bytes {allocated} against live {}",
                c.live_bytes
            );
            assert!(a.heap_total.unwrap() >= allocated && a.free_resident.is_some());
        }
        "mimalloc" => {
            assert!(a.heap_total.unwrap() >= c.live_bytes, "{a:#?}");
            assert_eq!(
                a.handed_out, None,
                "Debian's release build counts no bytes in use"
            );
        }
        "tbbmalloc" => {
            assert_eq!(
                (a.handed_out, a.free_resident, a.heap_total),
                (None, None, None)
            );
        }
        _ => unreachable!(),
    }
}

#[test]
fn leak_under_glibc() {
    leak_counts_match("glibc");
}

#[test]
fn leak_under_jemalloc() {
    leak_counts_match("jemalloc");
}

#[test]
fn leak_under_mimalloc() {
    leak_counts_match("mimalloc");
}

#[test]
fn leak_under_tcmalloc() {
    leak_counts_match("tcmalloc");
}

#[test]
fn leak_under_tbbmalloc() {
    leak_counts_match("tbbmalloc");
}

/// Threads that leave blocks behind, a fork whose child allocates and exits, then an exec: each
/// process its own file, the child's counts inherited from the parent, seqs going on after exec.
#[test]
fn threads_fork_and_exec() {
    let dir = tempfile::tempdir().unwrap();
    let prog = testkit::program("forker");
    let out = agent_command(dir.path(), 50, None, &[prog.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "the exec'd shell's status comes through"
    );
    let child: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("child ")
        .unwrap()
        .parse()
        .unwrap();
    let snaps = agent::read_snapshots(dir.path()).unwrap();
    let c = snaps
        .iter()
        .find(|s| s.pid == child)
        .expect("the child's own file");
    let p = snaps
        .iter()
        .find(|s| s.pid != child && s.exe.ends_with("sh"))
        .expect("the exec'd image");
    assert!(c.is_final && p.is_final);
    assert_eq!(c.ppid, p.pid, "{c:#?}");
    assert!(c.exe.ends_with("forker"));
    // The child's heap holds the parent's blocks (400 kept by the threads) and its own 1000.
    assert!(c.counters.live_blocks >= 1400, "{:?}", c.counters);
    assert!(c.counters.allocs >= 41_400, "{:?}", c.counters);
    // The shell after exec: seq went on from the forker's, counts are the new image's own.
    assert!(
        p.seq >= 8,
        "periodic snapshots before and after exec: {}",
        p.seq
    );
    assert!(p.counters.allocs < 10_000, "{:?}", p.counters);
    assert_eq!(p.allocator.name, "glibc");
}

/// A trim request during twowave's hold (wave A freed under wave B): glibc's malloc_trim(0)
/// gives A's pages back; RSS before and after are the kernel's (statm).
#[test]
fn trim_request_gives_glibc_free_pages_back() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::alloclens_exe();
    let mut child = agent_command(
        dir.path(),
        50,
        None,
        &[
            &exe,
            "workload",
            "twowave",
            "--wave-mb",
            "32",
            "--hold-ms",
            "3000",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap() == "phase: freed-a" {
            break;
        }
    }
    agent::request_trim(dir.path(), pid).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let trim = loop {
        let snaps = agent::read_snapshots(dir.path()).unwrap();
        if let Some(t) = snaps
            .iter()
            .find(|s| s.pid == pid)
            .and_then(|s| s.trim.clone())
        {
            break t;
        }
        assert!(Instant::now() < deadline, "no trim outcome in 20 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    for l in lines {
        l.unwrap();
    }
    assert!(child.wait().unwrap().success());
    assert!(trim.done);
    assert!(
        !dir.path().join(format!("{pid}.trim")).exists(),
        "the request is taken away"
    );
    // Wave A is 32 MiB of small objects; most of its pages go back.
    assert!(
        trim.rss_before >= trim.rss_after + 16 * 1024 * 1024,
        "RSS {} -> {}",
        trim.rss_before,
        trim.rss_after
    );
    assert!(
        trim.free_resident_before.unwrap() >= 24 * 1024 * 1024,
        "{trim:?}"
    );
}

/// The agent directory deleted while the program runs: the program's output and exit status are
/// those of a run without the agent (twowave's checksum is the same calls in the same order).
#[test]
fn deleted_directory_does_not_harm_the_program() {
    let exe = testkit::alloclens_exe();
    let args = ["workload", "twowave", "--wave-mb", "8", "--hold-ms", "800"];
    let plain = Command::new(&exe).args(args).output().unwrap();
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("agent");
    std::fs::create_dir(&dir).unwrap();
    let mut program = vec![exe.as_str()];
    program.extend_from_slice(&args);
    let child = agent_command(&dir, 20, None, &program)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The agent has written (its first snapshot): the directory goes while the program holds.
    testkit::wait_until(
        "the agent's first snapshot",
        Duration::from_secs(30),
        || std::fs::read_dir(&dir).is_ok_and(|d| d.count() >= 1),
    );
    // The agent may create its next snapshot's temporary file while the directory is being
    // emptied (ENOTEMPTY, seen on CI): try again until the directory is gone.
    let mut removed = std::fs::remove_dir_all(&dir);
    for _ in 0..100 {
        if removed.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        removed = std::fs::remove_dir_all(&dir);
    }
    removed.unwrap();
    let watched = child.wait_with_output().unwrap();
    assert_eq!(watched.status.code(), plain.status.code());
    assert!(
        watched.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let stable = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split(" elapsed_s=").next().unwrap().to_string())
            .filter(|l| !l.starts_with("throughput:"))
            .collect::<Vec<_>>()
    };
    assert_eq!(stable(&watched), stable(&plain));
    assert!(!dir.exists(), "the agent does not make the directory again");
}

/// A snapshot file that is not one is refused with the reason.
#[test]
fn damaged_snapshot_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("12.snap");
    std::fs::write(&path, "alloclens-agent 1\npid=12\n").unwrap();
    let err = agent::read_snapshot(&path).unwrap_err().to_string();
    assert!(err.contains("12.snap") && err.contains("cut"), "{err}");
    assert!(agent::read_snapshots(dir.path()).unwrap().is_empty());
}

/// C++ new and delete: under glibc libstdc++'s operators call malloc (counted there), under
/// jemalloc and tcmalloc the allocator's own operators serve them (counted by the agent's
/// operators): the same live blocks either way, and a delete'd block is no longer live.
#[test]
fn cxx_new_and_delete_are_counted_under_every_allocator() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("news.cc");
    std::fs::write(
        &src,
        r#"
#include <cstdio>
#include <new>
#include <vector>
struct Value { char bytes[1000]; };
int main() {
    std::vector<Value *> keep;
    keep.reserve(3000);
    for (int i = 0; i < 3000; i++) keep.push_back(new Value());
    for (int i = 0; i < 1000; i++) { Value *v = new Value(); delete v; }
    for (int i = 0; i < 1000; i++) { char *a = new char[5000]; delete[] a; }
    std::printf("kept %zu\n", keep.size());
    return 0; /* the 3000 values are still live at exit */
}
"#,
    )
    .unwrap();
    let exe = work.path().join("news");
    let st = Command::new("g++")
        // -O0: the compiler may delete a new/delete pair whose block is not used.
        .args(["-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("g++ (scripts/setup.sh test)");
    assert!(st.success());
    for name in ["glibc", "jemalloc", "tcmalloc"] {
        let lib = match allocator_library(name) {
            Ok(l) => l,
            Err(note) => {
                eprintln!("{note}");
                continue;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let out = agent_command(dir.path(), 1000, lib.as_deref(), &[exe.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        let s = agent::read_snapshots(dir.path()).unwrap();
        let c = &only(&s).counters;
        assert!(
            (3001..3100).contains(&c.live_blocks),
            "{name}: 3000 values and the vector live: {c:?}"
        );
        assert!(c.live_bytes >= 3000 * 1000 + 3000 * 8, "{name}: {c:?}");
        assert!(c.allocs >= 5001 && c.frees >= 2000, "{name}: {c:?}");
    }
}

/// A full disk under the agent directory: nothing written, the program as without the agent.
#[test]
fn full_disk_does_not_harm_the_program() {
    let Some(disk) = testkit::SmallDisk::mount("64k") else {
        return;
    };
    // Fill it: every block taken.
    let filler = disk.path().join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 1 << 20]);
    let exe = testkit::alloclens_exe();
    let args = ["workload", "twowave", "--wave-mb", "4", "--hold-ms", "300"];
    let plain = Command::new(&exe).args(args).output().unwrap();
    let mut program = vec![exe.as_str()];
    program.extend_from_slice(&args);
    let watched = agent_command(disk.path(), 10, None, &program)
        .output()
        .unwrap();
    assert_eq!(watched.status.code(), plain.status.code());
    assert!(
        watched.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let checksum = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.split(" checksum=").nth(1).map(str::to_string))
    };
    assert_eq!(checksum(&watched), checksum(&plain));
    let names: Vec<_> = std::fs::read_dir(disk.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["filler"], "no half-written snapshot left behind");
}

/// Live bytes are the blocks' usable sizes exactly, as the program's own malloc_usable_size
/// gives them: heap chunks and mmapped ones (under glibc the agent reads the chunk header itself),
/// made by malloc and by reallocs of every kind (new, in place, moved, into and out of mmapped
/// chunks, realloc(p, 0)).
#[test]
fn live_bytes_are_the_usable_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let prog = testkit::program("usable");
    let out = agent_command(dir.path(), 1000, None, &[prog.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let usable = field(&out.stdout, "live:", "usable");
    let blocks = field(&out.stdout, "live:", "blocks");
    let snaps = agent::read_snapshots(dir.path()).unwrap();
    let c = &only(&snaps).counters;
    assert_eq!(blocks, 10);
    assert_eq!((c.live_bytes, c.live_blocks), (usable, blocks), "{c:?}");
    // The cumulative count too: the usable bytes of every block that became live.
    let file = dir.path().join(format!("{}.snap", only(&snaps).pid));
    let text = std::fs::read_to_string(&file).unwrap();
    let made = field(text.as_bytes(), "count.bytes_in=", "count.bytes_in");
    assert_eq!(made, field(&out.stdout, "live:", "made"), "{text}");
}

/// Signal handlers that allocate while the interrupted thread is inside a hook: every count
/// survives (one instruction per counter update), so the live blocks are exact at the end.
#[test]
fn allocations_in_signal_handlers_are_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let prog = testkit::program("signals");
    let out = agent_command(dir.path(), 1000, None, &[prog.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let snaps = agent::read_snapshots(dir.path()).unwrap();
    let c = &only(&snaps).counters;
    // The 1000 blocks the handler kept, and stdout's buffer.
    assert_eq!(c.live_blocks, 1001, "{c:?}");
    assert_eq!(c.allocs - c.frees, 1001);
}
