//! What alloclens checks of a process from /proc before touching it, and the modules it maps.

use std::path::{Path, PathBuf};

use crate::error::AttachError;
use crate::permission::{self, Credentials};

/// A file mapped into the process: where its offset-0 mapping starts and its executable range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The path as the process sees it (maps' last column).
    pub path: String,
    /// Start of the mapping of file offset 0.
    pub base: u64,
    /// `start-end` of that mapping, as /proc/PID/map_files names it.
    pub first_range: String,
    /// The executable mappings' ranges.
    pub text: Vec<(u64, u64)>,
}

impl Module {
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    pub fn contains_code(&self, address: u64) -> bool {
        self.text.iter().any(|&(s, e)| (s..e).contains(&address))
    }
}

/// A process that may be attached to: the checks of [`check`] passed.
#[derive(Debug, Clone)]
pub struct Target {
    pub pid: u32,
    pub modules: Vec<Module>,
    /// The process's real and effective ids (Uid:/Gid: of /proc/PID/status), for the files made
    /// for it.
    pub uid: u32,
    pub gid: u32,
    /// /proc/PID/root: its file system as it sees it (a container's own).
    pub root: PathBuf,
    /// /proc/PID, or /proc/PID/task/TID of a live thread when the main thread has called
    /// pthread_exit (`procmem::process_dir`): the zombie leader's maps and mem are empty.
    pub proc_dir: PathBuf,
}

impl Target {
    /// The C library (glibc's libc.so.6).
    pub fn libc(&self) -> Option<&Module> {
        self.modules
            .iter()
            .find(|m| m.file_name().starts_with("libc.so") || m.file_name().starts_with("libc-2."))
    }

    /// The dynamic loader.
    pub fn loader(&self) -> Option<&Module> {
        self.modules
            .iter()
            .find(|m| m.file_name().starts_with("ld-linux"))
    }

    /// Reads the module's file as the process maps it (its own mount namespace; a file replaced
    /// on disk since, as by a package upgrade, is read through map_files).
    pub fn read_module(&self, module: &Module) -> Result<Vec<u8>, AttachError> {
        let mapped = format!("/proc/{}/map_files/{}", self.pid, module.first_range);
        std::fs::read(&mapped)
            .or_else(|_| std::fs::read(self.root.join(module.path.trim_start_matches('/'))))
            .map_err(|source| AttachError::Read {
                pid: self.pid,
                what: module.path.clone(),
                source,
            })
    }
}

/// Everything that would make an attach fail or harm the process, found from /proc before
/// anything is touched: one [`AttachError`] naming the fix.
pub fn check(pid: u32) -> Result<Target, AttachError> {
    if pid == std::process::id() {
        return Err(AttachError::Itself(pid));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| AttachError::NoSuchProcess(pid))?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    match field("State:").first().map(String::as_str) {
        // A main thread that called pthread_exit is a zombie while the other threads run on.
        Some("Z") | Some("X") if !procmem::is_alive(pid) => return Err(AttachError::Zombie(pid)),
        Some("T") => return Err(AttachError::Stopped(pid)),
        _ => {}
    }
    let tracer: u32 = field("TracerPid:")
        .first()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if tracer != 0 {
        return Err(AttachError::Traced(pid, tracer));
    }
    if !same_namespace(pid, "pid") {
        // NSpid: its pid in each namespace from ours inwards; the last is its own.
        let inside = field("NSpid:")
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or(pid);
        return Err(AttachError::OtherPidNamespace { pid, inside });
    }
    // In another user namespace (a rootless container) its ids are mapped and capabilities are
    // its namespace's, where we may hold every one (its owner): the kernel's to say.
    let yama = permission::yama_scope();
    if same_namespace(pid, "user") || yama == Some(3) {
        let ours = std::fs::read_to_string("/proc/self/status").ok();
        if let (Some(ours), Some(theirs)) = (
            ours.as_deref().and_then(Credentials::parse),
            Credentials::parse(&status),
        ) {
            if let Some(detail) = permission::refusal(&ours, &theirs, yama) {
                return Err(AttachError::Ptrace { pid, detail });
            }
        }
    }
    let id = |key: &str| {
        field(key)
            .get(1)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    let (uid, gid) = (id("Uid:"), id("Gid:"));
    let proc_dir = procmem::process_dir(pid);
    let maps = std::fs::read_to_string(proc_dir.join("maps")).map_err(|source| {
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            AttachError::Ptrace {
                pid,
                detail: format!("/proc/{pid}/maps: {source}"),
            }
        } else {
            AttachError::NoSuchProcess(pid)
        }
    })?;
    let modules = parse_maps(&maps);
    let target = Target {
        pid,
        modules,
        uid,
        gid,
        root: proc_dir.join("root"),
        proc_dir,
    };
    if let Some(m) = musl(&target.modules) {
        return Err(AttachError::Musl {
            pid,
            library: m.path.clone(),
        });
    }
    if target.libc().is_none() || target.loader().is_none() {
        let exe = std::fs::read_link(target.proc_dir.join("exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(AttachError::Static { pid, exe });
    }
    Ok(target)
}

/// musl's C library among the modules (`/lib/ld-musl-ARCH.so.1` is both its loader and its C
/// library; `libc.musl-ARCH.so.1` is a link to it on Alpine).
fn musl(modules: &[Module]) -> Option<&Module> {
    modules
        .iter()
        .find(|m| m.file_name().starts_with("ld-musl") || m.file_name().starts_with("libc.musl"))
}

/// Whether process `pid` is in our namespace of `kind` (pid, mnt, ...).
fn same_namespace(pid: u32, kind: &str) -> bool {
    let ours = std::fs::read_link(format!("/proc/self/ns/{kind}"));
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{kind}"));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => a == b,
        // Unreadable (an old kernel, a restricted /proc): take it as the same; a real difference
        // shows later as a failed load, said in one line.
        _ => true,
    }
}

/// The file-backed modules of a maps text (`procmem::parse_file_mapping`, line by line), in
/// address order of their first mapping.
pub fn parse_maps(text: &str) -> Vec<Module> {
    let mut modules: Vec<Module> = Vec::new();
    for m in text.lines().filter_map(procmem::parse_file_mapping) {
        let index = match modules.iter().position(|o| o.path == m.path) {
            Some(i) => i,
            None => {
                modules.push(Module {
                    path: m.path.to_string(),
                    base: u64::MAX,
                    first_range: String::new(),
                    text: Vec::new(),
                });
                modules.len() - 1
            }
        };
        let module = &mut modules[index];
        if m.offset == 0 && module.base == u64::MAX {
            module.base = m.start;
            module.first_range = format!("{:x}-{:x}", m.start, m.end);
        }
        if m.executable() {
            module.text.push((m.start, m.end));
        }
    }
    modules.retain(|m| m.base != u64::MAX);
    modules
}

/// The path `path` (as the process sees it) as alloclens sees it.
pub fn seen_from_here(target: &Target, path: &Path) -> PathBuf {
    target.root.join(path.strip_prefix("/").unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_give_each_file_its_base_and_code() {
        let text = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 123 /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 fd:01 123 /usr/bin/cat
7f1a2b400000-7f1a2b428000 r--p 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a2b428000-7f1a2b5bd000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a2b600000-7f1a2b601000 rw-p 00000000 00:00 0 
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
7f1a2b700000-7f1a2b702000 r--p 00000000 fd:01 789 /tmp/a dir/lib x.so
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].file_name(), "libc.so.6");
        assert_eq!(m[1].base, 0x7f1a2b400000);
        assert_eq!(m[1].first_range, "7f1a2b400000-7f1a2b428000");
        assert!(m[1].contains_code(0x7f1a2b428010));
        assert!(!m[1].contains_code(0x7f1a2b400010));
        assert_eq!(m[2].path, "/tmp/a dir/lib x.so");
    }

    /// No musl program can be built here (musl-gcc is not installed by scripts/setup.sh): the
    /// detection is checked on the maps of a dynamically linked program on Alpine.
    #[test]
    fn musl_is_found_in_the_maps_of_an_alpine_program() {
        let alpine = "\
5581f1a00000-5581f1a01000 r--p 00000000 00:2f 1835 /bin/busybox
5581f1a01000-5581f1a8c000 r-xp 00001000 00:2f 1835 /bin/busybox
7f3e9c1b2000-7f3e9c1c6000 r--p 00000000 00:2f 2163 /lib/ld-musl-x86_64.so.1
7f3e9c1c6000-7f3e9c212000 r-xp 00014000 00:2f 2163 /lib/ld-musl-x86_64.so.1
7ffd6a1d3000-7ffd6a1f4000 rw-p 00000000 00:00 0                          [stack]
";
        let modules = parse_maps(alpine);
        assert_eq!(
            musl(&modules).map(|m| m.path.as_str()),
            Some("/lib/ld-musl-x86_64.so.1")
        );
        let glibc = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 123 /usr/bin/cat
7f1a2b400000-7f1a2b428000 r--p 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f1a2b428000-7f1a2b5bd000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
";
        assert_eq!(musl(&parse_maps(glibc)), None);
    }

    #[test]
    fn a_zombie_and_a_stopped_process_are_refused_before_anything_is_touched() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        // SAFETY: signals to our own child.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let stopped = loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            if state.contains(") T ") {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert!(stopped);
        let err = check(pid).unwrap_err();
        assert!(matches!(err, AttachError::Stopped(p) if p == pid), "{err}");
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        // Not reaped yet: a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains(") Z ")
        {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let err = check(pid).unwrap_err();
        assert!(matches!(err, AttachError::Zombie(p) if p == pid), "{err}");
        child.wait().unwrap();
        let err = check(pid).unwrap_err();
        assert!(
            matches!(err, AttachError::NoSuchProcess(p) if p == pid),
            "{err}"
        );
    }
}
