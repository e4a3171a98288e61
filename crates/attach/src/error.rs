/// Why alloclens cannot attach to a process, one sentence each naming the fix. Every refusal
/// before [`AttachError::Ptrace`] is found from /proc, before the process is touched.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no process {0}: check the pid (ps -p {0})")]
    NoSuchProcess(u32),
    #[error("process {0} has exited (a zombie its parent has not reaped): nothing to attach to")]
    Zombie(u32),
    #[error("process {0} is stopped (state T): resume it first (kill -CONT {0}), then attach")]
    Stopped(u32),
    #[error(
        "process {0} is already traced by process {1} (a debugger or strace): detach it first"
    )]
    Traced(u32, u32),
    #[error("process {0} is alloclens itself")]
    Itself(u32),
    #[error("process {pid} is statically linked ({exe}): nothing can be loaded into it; start it under alloclens instead (alloclens watch -- CMD does not help either: link it dynamically)")]
    Static { pid: u32, exe: String },
    #[error("process {pid} uses musl's C library ({library}): attaching needs glibc; start it under alloclens (watch -- CMD, record -- CMD) instead")]
    Musl { pid: u32, library: String },
    #[error(
        "another alloclens is attached to process {0}: wait for it to end (one attach at a time)"
    )]
    AlreadyAttached(u32),
    #[error("process {pid} is in another PID namespace (a container), where it is process {inside}: run alloclens in there with --pid {inside} (docker exec, kubectl exec, or nsenter -t {pid} -p -m)")]
    OtherPidNamespace { pid: u32, inside: u32 },
    #[error("attaching needs x86_64 ({0} is not supported yet): start the program under alloclens instead")]
    Unsupported(String),
    #[error("ptrace of process {pid} is refused ({detail}): run alloclens with CAP_SYS_PTRACE (as root; in a container --cap-add=SYS_PTRACE and a seccomp profile that allows ptrace), or as the process's user with kernel.yama.ptrace_scope 0")]
    Ptrace { pid: u32, detail: String },
    #[error("process {0} exited while alloclens attached to it")]
    Exited(u32),
    #[error("no thread of process {pid} reached a safe point within {waited_ms} ms (none called malloc or free, none was blocked in a system call that holds no allocator lock): try again when it is busier")]
    NoSafePoint { pid: u32, waited_ms: u64 },
    #[error("{what} was not found in process {pid}'s {module}")]
    MissingSymbol {
        pid: u32,
        what: String,
        module: String,
    },
    #[error("process {pid} could not load {library}: {detail}")]
    LoadFailed {
        pid: u32,
        library: String,
        detail: String,
    },
    #[error("cannot read process {pid}'s {what}: {source}")]
    Read {
        pid: u32,
        what: String,
        source: std::io::Error,
    },
    #[error("cannot prepare {path} for process {pid}: {source}")]
    Stage {
        pid: u32,
        path: String,
        source: std::io::Error,
    },
}
