//! glibc's arena statistics of a process nobody started under alloclens, the way people get them by
//! hand: a debugger attaches for a moment, calls `malloc_info` into a file, and detaches.
//!
//! Safety of the watched process comes first:
//! - before any call, every thread's stack is checked (gdb's Python API) for a frame inside malloc
//!   & co.: a thread stopped there may hold an arena lock, and `malloc_info` would then wait for it
//!   for ever. gdb then detaches at once and the reading is retried a moment later (3 tries);
//! - the path and mode strings are written into a buffer the calls `malloc` and `free` themselves,
//!   so nothing is left behind in the process (gdb would otherwise `malloc` each string literal in
//!   the process and never free it); the FILE is closed;
//! - an interrupted call unwinds (`set unwindonsignal on`);
//! - the pause is measured from outside: a thread polls the process's state in /proc/PID/stat every
//!   millisecond and times how long it stays in tracing stop (`t`).
//!
//! Known effect: a thread sleeping in a system call when gdb stops it may see that call end early
//! (EINTR, or a shorter `sleep`), as with any debugger attach.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allocators::{JEMALLOC, MIMALLOC, TBBMALLOC, TCMALLOC};

/// Why the statistics could not be read: one sentence each, naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum GdbError {
    #[error("gdb is not installed (apt-get install gdb): glibc's arena statistics are not read, /proc figures only")]
    NoGdb,
    #[error("process {0} is gone")]
    Gone(u32),
    #[error("process {pid} does not use glibc's malloc ({what}): arena statistics through gdb need glibc")]
    NotGlibc { pid: u32, what: String },
    #[error("gdb may not attach to process {pid} (ptrace refused: {detail}): run alloclens as the process's user with kernel.yama.ptrace_scope=0, or as root")]
    PtraceRefused { pid: u32, detail: String },
    #[error("process {pid} was inside malloc at each of {tries} attaches (it may hold an arena lock): statistics not read")]
    Busy { pid: u32, tries: u32 },
    #[error("gdb did not finish within {0} s and was stopped")]
    Timeout(u64),
    #[error("gdb could not read glibc's statistics of process {pid}: {detail}")]
    Failed { pid: u32, detail: String },
}

/// What one attach gave.
#[derive(Debug, Clone)]
pub struct GdbRead {
    /// malloc_info's XML.
    pub xml: String,
    /// How long the process was stopped (tracing stop seen in /proc), ms.
    pub pause_ms: f64,
    /// gdb's whole run (start-up, symbol loading, attach, calls, detach), ms.
    pub gdb_ms: f64,
    /// With `trim`: what malloc_trim(0) returned (1 = memory was released), and the RSS just
    /// before and after the call (read by gdb while the process is stopped).
    pub trim_returned: Option<i32>,
    pub trim_rss: Option<(u64, u64)>,
}

const BUSY_TRIES: u32 = 3;
const GDB_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether gdb is on PATH.
pub fn gdb_available() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join("gdb").is_file())
}

/// Checks that `pid` exists and uses glibc's malloc (no other allocator mapped, libc.so.6 mapped).
pub fn check_glibc(pid: u32) -> Result<(), GdbError> {
    let files = procmem::mapped_files(pid).map_err(|_| GdbError::Gone(pid))?;
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    for other in [JEMALLOC, TCMALLOC, MIMALLOC, TBBMALLOC] {
        if let Some(n) = names.iter().find(|n| n.contains(other)) {
            return Err(GdbError::NotGlibc {
                pid,
                what: format!("{n} is mapped"),
            });
        }
    }
    if !names.iter().any(|n| n.starts_with("libc.so")) {
        return Err(GdbError::NotGlibc {
            pid,
            what: "no libc.so mapped: a static or non-glibc program".into(),
        });
    }
    Ok(())
}

/// Attaches gdb to `pid`, has it write malloc_info into a file under `scratch` (which the process
/// must be able to write: it is created here, world-writable), optionally calls malloc_trim(0),
/// and detaches.
pub fn read_malloc_info(pid: u32, scratch: &Path, trim: bool) -> Result<GdbRead, GdbError> {
    if !gdb_available() {
        return Err(GdbError::NoGdb);
    }
    check_glibc(pid)?;
    let xml_path = scratch.join(format!("malloc-info-{pid}.xml"));
    let script_path = scratch.join(format!("gdb-{pid}.py"));
    let result = (|| {
        let mut last_busy = String::new();
        for attempt in 0..BUSY_TRIES {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            prepare_output(&xml_path)?;
            std::fs::write(&script_path, script(&xml_path, trim)).map_err(|e| {
                GdbError::Failed {
                    pid,
                    detail: format!("cannot write {}: {e}", script_path.display()),
                }
            })?;
            let run = run_gdb(pid, &script_path)?;
            if let Some(frame) = find_line(&run.stdout, "ALLOCLENS-BUSY ") {
                last_busy = frame;
                continue;
            }
            if find_line(&run.stdout, "ALLOCLENS-OK").is_none() {
                return Err(classify_failure(pid, &run.stdout, &run.stderr));
            }
            let xml = std::fs::read_to_string(&xml_path).map_err(|e| GdbError::Failed {
                pid,
                detail: format!("malloc_info's file {}: {e}", xml_path.display()),
            })?;
            let trim: Vec<i64> = find_line(&run.stdout, "ALLOCLENS-TRIM ")
                .map(|v| {
                    v.split_whitespace()
                        .filter_map(|x| x.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            let trim_returned = trim.first().map(|&t| t as i32);
            let trim_rss = (trim.len() == 3).then(|| (trim[1] as u64, trim[2] as u64));
            return Ok(GdbRead {
                xml,
                pause_ms: run.pause.as_secs_f64() * 1e3,
                gdb_ms: run.wall.as_secs_f64() * 1e3,
                trim_returned,
                trim_rss,
            });
        }
        let _ = last_busy;
        Err(GdbError::Busy {
            pid,
            tries: BUSY_TRIES,
        })
    })();
    let _ = std::fs::remove_file(&xml_path);
    let _ = std::fs::remove_file(&script_path);
    result
}

fn prepare_output(path: &Path) -> Result<(), GdbError> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::File::create(path)
        .and_then(|_| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)))
        .map_err(|e| GdbError::Failed {
            pid: 0,
            detail: format!("cannot create {}: {e}", path.display()),
        })
}

fn find_line(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.trim_end()))
        .map(|r| r.trim().to_string())
}

/// gdb's own messages mapped to one sentence each.
fn classify_failure(pid: u32, stdout: &str, stderr: &str) -> GdbError {
    let all = format!("{stdout}\n{stderr}");
    if all.contains("No such process") || all.contains("does not exist") {
        return GdbError::Gone(pid);
    }
    if all.contains("ptrace: Operation not permitted") || all.contains("Could not attach") {
        let detail = all
            .lines()
            .find(|l| l.contains("ptrace") || l.contains("attach"))
            .unwrap_or("Operation not permitted")
            .trim()
            .to_string();
        return GdbError::PtraceRefused { pid, detail };
    }
    if all.contains("Python scripting is not supported") {
        return GdbError::Failed {
            pid,
            detail: "this gdb has no Python (Debian's gdb has)".into(),
        };
    }
    let detail = all
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("warning:"))
        .unwrap_or("no output")
        .to_string();
    GdbError::Failed { pid, detail }
}

struct GdbRun {
    stdout: String,
    stderr: String,
    pause: Duration,
    wall: Duration,
}

fn run_gdb(pid: u32, script: &Path) -> Result<GdbRun, GdbError> {
    // A process whose main thread has exited is attached through a live thread: ptrace refuses
    // the zombie leader (EPERM, even for root), gdb then finds the other threads from there.
    let target = procmem::reading_thread(pid).unwrap_or(pid);
    let start = Instant::now();
    let mut child = Command::new("gdb")
        .args(["-nx", "-batch", "-p"])
        .arg(target.to_string())
        .arg("-x")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => GdbError::NoGdb,
            _ => GdbError::Failed {
                pid,
                detail: format!("cannot start gdb: {e}"),
            },
        })?;
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || measure_pause(target, &done))
    };
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let timed_out = loop {
        match child.try_wait() {
            Ok(Some(_)) => break false,
            Ok(None) if start.elapsed() > GDB_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break true;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break false,
        }
    };
    let wall = start.elapsed();
    done.store(true, Ordering::Relaxed);
    let pause = watcher.join().unwrap_or_default();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if timed_out {
        return Err(GdbError::Timeout(GDB_TIMEOUT.as_secs()));
    }
    Ok(GdbRun {
        stdout,
        stderr,
        pause,
        wall,
    })
}

/// From the first to the last moment the process (thread `pid`: /proc/TID/stat answers for a
/// thread too) was seen in tracing stop.
fn measure_pause(pid: u32, done: &AtomicBool) -> Duration {
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    while !done.load(Ordering::Relaxed) {
        if let Ok(stat) = procmem::read_stat(pid) {
            if matches!(stat.state, b't' | b'T') {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    match (first, last) {
        // One poll period more: the stop began and ended between two looks.
        (Some(a), Some(b)) => b - a + Duration::from_millis(1),
        _ => Duration::ZERO,
    }
}

/// The gdb Python script: look for a thread inside malloc & co., else call malloc_info.
fn script(xml: &Path, trim: bool) -> String {
    let path = xml
        .to_string_lossy()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let n = xml.as_os_str().len() + 1;
    format!(
        r#"import gdb, os
def rss(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
BUSY = ("malloc", "free", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc",
        "valloc", "pvalloc", "malloc_trim", "malloc_info", "mallinfo", "mallinfo2", "malloc_stats",
        "_int_malloc", "_int_free", "_int_realloc", "_int_memalign", "malloc_consolidate",
        "sysmalloc", "systrim", "heap_trim", "arena_get2", "tcache_init", "fork", "__libc_fork")
def busy():
    for inf in gdb.inferiors():
        for th in inf.threads():
            th.switch()
            f = gdb.newest_frame()
            depth = 0
            while f is not None and depth < 64:
                name = f.name() or ""
                base = name.lstrip("_").replace("libc_", "").replace("GI_", "").lstrip("_")
                if name in BUSY or base in BUSY:
                    return "%d %s" % (th.num, name)
                try:
                    f = f.older()
                except gdb.error:
                    break
                depth += 1
    return None
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set unwindonsignal on")
b = busy()
if b is not None:
    print("ALLOCLENS-BUSY " + b)
else:
    gdb.execute("thread 1")
    gdb.execute("set $alloclens_p = (char *) malloc({size})")
    gdb.execute("set {{char[{n}]}}$alloclens_p = \"{path}\"")
    gdb.execute("set {{char[2]}}($alloclens_p + {n}) = \"w\"")
    gdb.execute("set $alloclens_f = (void *) fopen($alloclens_p, $alloclens_p + {n})")
    if int(gdb.parse_and_eval("(long) $alloclens_f")) != 0:
        gdb.execute("set $alloclens_r = (int) malloc_info(0, $alloclens_f)")
        gdb.execute("set $alloclens_c = (int) fclose($alloclens_f)")
        if {trim}:
            pid = gdb.selected_inferior().pid
            before = rss(pid)
            t = int(gdb.parse_and_eval("(int) malloc_trim(0)"))
            print("ALLOCLENS-TRIM %d %d %d" % (t, before, rss(pid)))
        gdb.execute("call (void) free($alloclens_p)")
        print("ALLOCLENS-OK")
    else:
        gdb.execute("call (void) free($alloclens_p)")
        print("ALLOCLENS-FOPEN-FAILED")
gdb.execute("detach")
"#,
        size = n + 2,
        trim = if trim { "True" } else { "False" },
    )
}
