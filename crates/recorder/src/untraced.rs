//! Why a program that was exec'd or spawned during the recording did not load the shim.
//!
//! The shim announces each exec and posix_spawn (shim/record/exec.c); once the exec happened and no
//! image connected for the pid, the recorder looks at the new program: `/proc/PID` while it runs
//! (the executable the kernel ran, its auxiliary vector and environment: what the dynamic loader
//! went by), else the file that was exec'd and what the announcement said of its environment.
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::protocol::{EXEC_ENV_PRELOAD, EXEC_ENV_SOCKET};
use crate::sys;

/// An exec or spawn as the shim announced it.
#[derive(Debug, Clone)]
pub struct Announced {
    pub pid: u32,
    /// The announcing process (an exec in place: the process's parent, filled in by the server).
    pub ppid: u32,
    pub path: String,
    pub argv0: String,
    /// `EXEC_ENV_*` bits.
    pub env: u32,
    pub preload: String,
}

/// What the recorder concluded about a new program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It should load the shim and connect.
    Traceable,
    /// It cannot be traced, for this reason.
    NotTraced(String),
    /// The process is gone (or a zombie): nothing left in /proc to look at.
    Gone,
    /// Caught inside its exec (the new executable is in place, its auxiliary vector and
    /// environment not yet): look again.
    NotYet,
}

/// The files a traced program must get: the shim in LD_PRELOAD, this recording's socket.
#[derive(Debug, Clone)]
pub struct Expected {
    pub shim: PathBuf,
    pub socket: PathBuf,
}

impl Expected {
    /// Whether an LD_PRELOAD value names the shim (the loader splits on spaces and colons).
    fn preloads_shim(&self, value: &str) -> bool {
        let shim_id = file_id(&self.shim);
        value.split([':', ' ']).filter(|e| !e.is_empty()).any(|e| {
            Path::new(e) == self.shim || (shim_id.is_some() && file_id(Path::new(e)) == shim_id)
        })
    }
}

fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

const NO_PRELOAD: &str =
    "its environment has no LD_PRELOAD (cleared, as by `env -i`), so the shim was not loaded";
const NO_SOCKET: &str =
    "its environment has no ALLOCLENS_SOCKET of this recording: the shim cannot reach the recorder";
const SECURE: &str =
    "it runs set-user-ID or set-group-ID (secure-execution mode): the loader ignores LD_PRELOAD";
const STATIC: &str = "statically linked: the shim cannot be preloaded";

fn other_preload(value: &str) -> String {
    format!("its LD_PRELOAD ({value}) does not name the alloclens shim")
}

/// Looks at the running process `pid`, right after its exec.
pub fn inspect_process(pid: u32, expected: &Expected) -> Verdict {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let Ok(exe) = std::fs::read_link(proc.join("exe")) else {
        return Verdict::Gone;
    };
    match elf_kind(&proc.join("exe")) {
        Some(ElfKind::Dynamic) | None => {}
        Some(kind) => return Verdict::NotTraced(kind.reason()),
    }
    // Secure-execution mode: AT_SECURE in the auxiliary vector. The process is then not
    // dumpable, and another user cannot read its auxv or environ at all.
    match std::fs::read(proc.join("auxv")) {
        // The kernel fills the vector (and the environment) late in the exec.
        Ok(auxv) if auxv.iter().all(|&b| b == 0) => return Verdict::NotYet,
        Ok(auxv) if at_secure(&auxv) => return Verdict::NotTraced(SECURE.into()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Verdict::NotTraced(SECURE.into())
        }
        Err(_) => return Verdict::Gone,
        _ => {}
    }
    let environ = match std::fs::read(proc.join("environ")) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Verdict::NotTraced(SECURE.into())
        }
        Err(_) => return Verdict::Gone,
    };
    let var = |name: &str| {
        environ.split(|&b| b == 0).find_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
                .map(str::to_string)
        })
    };
    // Read across an exec (the old program's executable, the new one's environment), or a
    // zombie's (empty): look again.
    match std::fs::read_link(proc.join("exe")) {
        Ok(now) if now == exe => {}
        Ok(_) => return Verdict::NotYet,
        Err(_) => return Verdict::Gone,
    }
    match var("LD_PRELOAD") {
        None => return Verdict::NotTraced(NO_PRELOAD.into()),
        Some(v) if !expected.preloads_shim(&v) => return Verdict::NotTraced(other_preload(&v)),
        Some(_) => {}
    }
    if var(crate::protocol::ENV_SOCKET).is_none_or(|s| Path::new(&s) != expected.socket) {
        return Verdict::NotTraced(NO_SOCKET.into());
    }
    Verdict::Traceable
}

/// The process is gone: what the exec'd file and the announcement tell (`None`: nothing
/// explains it).
pub fn inspect_announced(a: &Announced, expected: &Expected) -> Option<String> {
    if let Some(file) = resolve(&a.path) {
        let file = interpreter(&file).unwrap_or(file);
        match elf_kind(&file) {
            Some(ElfKind::Dynamic) | None => {}
            Some(kind) => return Some(kind.reason()),
        }
        if setid_for_us(&file) {
            return Some(SECURE.into());
        }
    }
    if a.env & EXEC_ENV_PRELOAD == 0 {
        return Some(NO_PRELOAD.into());
    }
    if !expected.preloads_shim(&a.preload) {
        return Some(other_preload(&a.preload));
    }
    if a.env & EXEC_ENV_SOCKET == 0 {
        return Some(NO_SOCKET.into());
    }
    None
}

/// A bare name is searched in PATH, as execvp does (ours: the program's is usually the same).
fn resolve(path: &str) -> Option<PathBuf> {
    if path.is_empty() {
        return None;
    }
    if path.contains('/') {
        return Some(PathBuf::from(path));
    }
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .map(|d| d.join(path))
        .find(|p| p.is_file())
}

/// The interpreter of a `#!` script.
fn interpreter(file: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = String::from_utf8_lossy(line);
    text.split_whitespace().next().map(PathBuf::from)
}

fn setid_for_us(file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(file) else {
        return false;
    };
    let (uid, gid) = (sys::effective_uid(), sys::effective_gid());
    (m.mode() & 0o4000 != 0 && m.uid() != uid) || (m.mode() & 0o2000 != 0 && m.gid() != gid)
}

fn at_secure(auxv: &[u8]) -> bool {
    const AT_SECURE: u64 = 23;
    auxv.chunks_exact(16).any(|kv| {
        let k = u64::from_ne_bytes(kv[..8].try_into().unwrap_or_default());
        let v = u64::from_ne_bytes(kv[8..].try_into().unwrap_or_default());
        k == AT_SECURE && v != 0
    })
}

#[derive(Debug, PartialEq, Eq)]
enum ElfKind {
    Dynamic,
    Static,
    /// 32-bit, or built for another machine.
    Foreign(&'static str),
}

impl ElfKind {
    fn reason(&self) -> String {
        match self {
            ElfKind::Dynamic => String::new(),
            ElfKind::Static => STATIC.into(),
            ElfKind::Foreign(what) => {
                format!("{what}: the shim (64-bit, this machine's) cannot be loaded into it")
            }
        }
    }
}

/// What an executable's ELF header says (`None`: not ELF, unreadable).
fn elf_kind(file: &Path) -> Option<ElfKind> {
    let mut head = vec![0u8; 1 << 16];
    let mut f = std::fs::File::open(file).ok()?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_elf(&head[..n])
}

fn parse_elf(b: &[u8]) -> Option<ElfKind> {
    if b.get(..4)? != b"\x7fELF" {
        return None;
    }
    if b[4] != 2 {
        return Some(ElfKind::Foreign("a 32-bit program"));
    }
    let u16_at = |i: usize| Some(u16::from_le_bytes(b.get(i..i + 2)?.try_into().ok()?));
    let machine = u16_at(18)?;
    let native = match std::env::consts::ARCH {
        "x86_64" => Some(62),
        "aarch64" => Some(183),
        "riscv64" => Some(243),
        "powerpc64" => Some(21),
        "s390x" => Some(22),
        _ => None,
    };
    if native.is_some_and(|m| m != machine) {
        return Some(ElfKind::Foreign("built for another architecture"));
    }
    let phoff = u64::from_le_bytes(b.get(32..40)?.try_into().ok()?) as usize;
    let (phentsize, phnum) = (usize::from(u16_at(54)?), usize::from(u16_at(56)?));
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
        if p_type == PT_INTERP {
            return Some(ElfKind::Dynamic);
        }
    }
    Some(ElfKind::Static)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_executable_is_dynamic_and_auxv_of_a_normal_process_is_not_secure() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(elf_kind(&me), Some(ElfKind::Dynamic));
        let auxv = std::fs::read("/proc/self/auxv").unwrap();
        assert!(!at_secure(&auxv));
        assert_eq!(parse_elf(b"#!/bin/sh\n"), None);
    }

    #[test]
    fn preload_lists_are_split_like_the_loader_does() {
        let e = Expected {
            shim: PathBuf::from("/x/shim.so"),
            socket: PathBuf::from("/x/rec.sock"),
        };
        assert!(e.preloads_shim("/x/shim.so"));
        assert!(e.preloads_shim("/a.so:/x/shim.so /b.so"));
        assert!(!e.preloads_shim("/a.so"));
        assert!(!e.preloads_shim(""));
    }
}
