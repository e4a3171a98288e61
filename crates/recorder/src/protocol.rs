//! The shim <-> recorder protocol, mirroring shim/record/include/alloclens_shim.h (checked by
//! tests/shim_header.rs). Native endianness: both ends run on the same machine.

pub const PROTOCOL_VERSION: u32 = 1;

pub const OP_RING_OWNER: u8 = 128;
/// Op-byte flag: the record names its stack (shim/record/include/alloclens_shim.h, AL_OP_HAS_STACK).
pub const OP_HAS_STACK: u8 = 64;
pub const OP_SHIFT: u32 = 56;
pub const SEQ_MASK: u64 = (1 << OP_SHIFT) - 1;
pub const RECORD_SIZE: usize = 32;

pub const RING_HEADER_BYTES: usize = 4096;
pub const RING_RECORDS: usize = 131072;
pub const RING_HEAD_OFFSET: usize = 0;
pub const RING_TAIL_OFFSET: usize = 64;

pub const PAGE_BYTES: usize = 4096;
pub const PAGE_COUNTER_OFFSET: usize = 0;
pub const PAGE_LOST_OFFSET: usize = 64;

pub const MSG_HELLO: u32 = 1;
pub const MSG_RING: u32 = 2;
pub const MSG_MARK: u32 = 3;
pub const MSG_END: u32 = 4;
pub const MSG_STOPPED: u32 = 5;
pub const MSG_EXEC: u32 = 6;
pub const MSG_STACKS: u32 = 7;
pub const MSG_ATTACHED: u32 = 8;
/// `struct al_attached`'s bytes and its `heap_source` values.
pub const ATTACHED_BYTES: usize = 16;
pub const HEAP_GLIBC: u32 = 1;
pub const HEAP_JEMALLOC: u32 = 2;
pub const HEAP_TCMALLOC: u32 = 3;
pub const STACKS_FREES: u32 = 1;

/// The stack arena (`struct al_arena_*`).
pub const ARENA_BYTES: usize = 512 << 20;
pub const ARENA_HEADER_BYTES: usize = 64;
pub const ARENA_STACK: u64 = 1;
pub const ARENA_MODULE: u64 = 2;
pub const MAX_STACK_DEPTH: usize = 256;
pub const STACKS_MSG_BYTES: usize = 8;
pub const ENV_STACKS: &str = "ALLOCLENS_STACKS";
pub const ENV_FREE_STACKS: &str = "ALLOCLENS_FREE_STACKS";
pub const ENV_STACK_SAMPLE: &str = "ALLOCLENS_STACK_SAMPLE";

pub const EXEC_BEFORE: u32 = 1;
pub const EXEC_SPAWNED: u32 = 2;
pub const EXEC_FAILED: u32 = 3;
pub const EXEC_ENV_PRELOAD: u32 = 1;
pub const EXEC_ENV_SOCKET: u32 = 2;

pub const END_EXIT: u32 = 1;
pub const END_QUICK_EXIT: u32 = 2;
pub const END_DETACHED: u32 = 3;

pub const MAX_MESSAGE: usize = 65536;
pub const MAX_LABEL: usize = 1024;

/// Bytes of `struct al_msg_hdr`, `al_hello`, `al_ring_msg`, `al_mark`, `al_end`.
pub const MSG_HDR_BYTES: usize = 8;
pub const HELLO_BYTES: usize = 40;
pub const RING_MSG_BYTES: usize = 8;
pub const MARK_BYTES: usize = 24;
pub const END_BYTES: usize = 8;
pub const EXEC_BYTES: usize = 16;

pub const ENV_SOCKET: &str = "ALLOCLENS_SOCKET";

/// A decoded control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello {
        version: u32,
        pid: u32,
        ppid: u32,
        ring_records: u32,
        start_ticks: u64,
        mono_ns: u64,
        real_ns: u64,
        cmdline: Vec<String>,
    },
    Ring,
    Mark {
        tid: u32,
        seq: u64,
        mono_ns: u64,
        label: String,
    },
    End {
        reason: u32,
    },
    /// The image's stack arena follows as the descriptor (`record --stacks`).
    Stacks {
        depth: u32,
        flags: u32,
    },
    /// The attach shim's figures of the moment of the attach (`record --pid`).
    Attached {
        heap_in_use: u64,
        heap_source: u32,
        got_slots: u32,
    },
    /// The shim stopped tracing the image (its reason): no event follows.
    Stopped {
        reason: String,
    },
    /// A program about to be exec'd by `pid` (`EXEC_BEFORE`), spawned as `pid`
    /// (`EXEC_SPAWNED`), or the failure of the exec announced before (`EXEC_FAILED`, with
    /// `error` its errno and the strings empty).
    Exec {
        pid: u32,
        phase: u32,
        /// `EXEC_ENV_*` bits: what the environment passed to the program holds.
        env: u32,
        error: u32,
        path: String,
        argv0: String,
        /// The LD_PRELOAD value passed (when `env` has `EXEC_ENV_PRELOAD`).
        preload: String,
    },
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(i..i + 8)?.try_into().ok()?))
}

/// Parses one message (`None` when malformed).
pub fn parse(b: &[u8]) -> Option<Message> {
    let kind = u32_at(b, 0)?;
    let len = u32_at(b, 4)? as usize;
    if len != b.len() {
        return None;
    }
    let body = &b[MSG_HDR_BYTES..];
    match kind {
        MSG_HELLO => {
            let cmd = body.get(HELLO_BYTES..)?;
            let cmdline = cmd
                .split(|&c| c == 0)
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>();
            let mut cmdline = cmdline;
            if cmdline.last().is_some_and(|s| s.is_empty()) {
                cmdline.pop();
            }
            Some(Message::Hello {
                version: u32_at(body, 0)?,
                pid: u32_at(body, 4)?,
                ppid: u32_at(body, 8)?,
                ring_records: u32_at(body, 12)?,
                start_ticks: u64_at(body, 16)?,
                mono_ns: u64_at(body, 24)?,
                real_ns: u64_at(body, 32)?,
                cmdline,
            })
        }
        MSG_RING => (body.len() >= RING_MSG_BYTES).then_some(Message::Ring),
        MSG_MARK => Some(Message::Mark {
            tid: u32_at(body, 0)?,
            seq: u64_at(body, 8)?,
            mono_ns: u64_at(body, 16)?,
            label: String::from_utf8_lossy(body.get(MARK_BYTES..)?).into_owned(),
        }),
        MSG_END => Some(Message::End {
            reason: u32_at(body, 0)?,
        }),
        MSG_STACKS => Some(Message::Stacks {
            depth: u32_at(body, 0)?,
            flags: u32_at(body, 4)?,
        }),
        MSG_ATTACHED if body.len() >= ATTACHED_BYTES => Some(Message::Attached {
            heap_in_use: u64_at(body, 0)?,
            heap_source: u32_at(body, 8)?,
            got_slots: u32_at(body, 12)?,
        }),
        MSG_STOPPED => Some(Message::Stopped {
            reason: String::from_utf8_lossy(body).into_owned(),
        }),
        MSG_EXEC => {
            let mut text = body.get(EXEC_BYTES..)?.splitn(3, |&c| c == 0);
            let mut next = || String::from_utf8_lossy(text.next().unwrap_or_default()).into_owned();
            Some(Message::Exec {
                pid: u32_at(body, 0)?,
                phase: u32_at(body, 4)?,
                env: u32_at(body, 8)?,
                error: u32_at(body, 12)?,
                path: next(),
                argv0: next(),
                preload: next(),
            })
        }
        _ => None,
    }
}
