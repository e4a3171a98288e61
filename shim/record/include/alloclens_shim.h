/*
 * alloclens shim <-> recorder protocol.
 *
 * One source of truth with the Rust side: crates/recorder/tests/shim_header.rs parses this file
 * and checks every AL_OP_*, AL_MSG_*, AL_END_* and AL_RING_* constant and the record layout against
 * the Rust constants (crates/trace/src/event.rs and crates/recorder/src/protocol.rs). Never renumber.
 *
 * Transport (see docs/recording.md): per process image a shared "process page" (memfd) holding
 * the global event counter, and per thread a single-producer ring of fixed records (memfd), both
 * handed to the recorder over an AF_UNIX SOCK_SEQPACKET connection with SCM_RIGHTS. Control
 * messages (hello, new ring, mark, end) go over the socket; events never do.
 *
 * All integers are native-endian (the recorder runs on the same machine).
 */
#ifndef ALLOCLENS_SHIM_H
#define ALLOCLENS_SHIM_H

#include <stdint.h>

#define AL_PROTOCOL_VERSION 1u

/* Op tags: identical to trace::Op. */
#define AL_OP_MALLOC 1u
#define AL_OP_CALLOC 2u
#define AL_OP_REALLOC 3u
#define AL_OP_FREE 4u
#define AL_OP_POSIX_MEMALIGN 5u
#define AL_OP_ALIGNED_ALLOC 6u
#define AL_OP_MEMALIGN 7u
#define AL_OP_VALLOC 8u
#define AL_OP_PVALLOC 9u
#define AL_OP_REALLOCARRAY 10u
#define AL_OP_FREE_SIZED 11u
#define AL_OP_FREE_ALIGNED_SIZED 12u
/* In-band ring control record: the ring changed owner; `addr` holds the new thread id. */
#define AL_OP_RING_OWNER 128u
/* Flag in the op byte (record --stacks): the record names its call stack, an entry of the stack
 * arena, by its offset in 8-byte words: in `old_addr` for every op but the reallocs; for
 * AL_OP_REALLOC and AL_OP_REALLOCARRAY, bits 16.. of the offset in bits 48-63 of `old_addr` and
 * bits 0-15 in bits 48-63 of `size` (set only when both are below 2^48). */
#define AL_OP_HAS_STACK 64u

/* One ring record. `seq_op` = seq | (op << AL_OP_SHIFT). */
#define AL_OP_SHIFT 56u
#define AL_SEQ_MASK ((UINT64_C(1) << AL_OP_SHIFT) - 1)
#define AL_RECORD_SIZE 32u
struct al_record {
    uint64_t seq_op;
    uint64_t addr;     /* returned (allocations) or freed pointer */
    uint64_t size;     /* requested bytes; 0 for free; for free_sized the size given */
    uint64_t old_addr; /* realloc: the pointer passed in */
};

/* Ring layout in its memfd: a header page, then AL_RING_RECORDS records. */
#define AL_RING_HEADER_BYTES 4096u
#define AL_RING_RECORDS 131072u /* power of two; 4 MiB of records */
#define AL_RING_HEAD_OFFSET 0u  /* u64, records ever written; producer stores with release */
#define AL_RING_TAIL_OFFSET 64u /* u64, records ever consumed; recorder stores with release */

/* Process page (memfd, AL_PAGE_BYTES): the image's event counter at offset 0; at offset 64, the
 * calls the shim saw but could not record (a signal handler's, made while its thread was inside
 * the shim and the thread's queue for them was full), u64, incremented atomically. */
#define AL_PAGE_BYTES 4096u
#define AL_PAGE_COUNTER_OFFSET 0u
#define AL_PAGE_LOST_OFFSET 64u

/* Socket messages: every message starts with struct al_msg_hdr. */
#define AL_MSG_HELLO 1u /* + struct al_hello + cmdline (NUL-separated); fd: process page */
#define AL_MSG_RING 2u  /* + struct al_ring_msg; fd: the ring */
#define AL_MSG_MARK 3u  /* + struct al_mark + label bytes (not NUL-terminated) */
#define AL_MSG_END 4u   /* + struct al_end */
#define AL_MSG_STOPPED 5u /* + why the shim stopped tracing this image (bytes, not NUL-terminated) */
/* + struct al_exec + path, NUL, argv[0], NUL, the LD_PRELOAD value passed (not NUL-terminated):
 * a program about to be exec'd, or spawned, so the recorder can report it when it does not load
 * the shim (docs/recording.md, "Programs that are not traced"). */
#define AL_MSG_EXEC 6u
/* + struct al_stacks_msg; fd: the image's stack arena (record --stacks). A fork child sends its
 * parent's arena again (it shares it). */
#define AL_MSG_STACKS 7u

/* Attach shim (record --pid): + struct al_attached, once, after the hello. */
#define AL_MSG_ATTACHED 8u

/* struct al_exec.phase */
#define AL_EXEC_BEFORE 1u  /* process `pid` is about to exec (it may fail: AL_EXEC_FAILED follows) */
#define AL_EXEC_SPAWNED 2u /* posix_spawn started `pid`: its exec already succeeded */
#define AL_EXEC_FAILED 3u  /* the exec announced by AL_EXEC_BEFORE failed; `error` is its errno */

/* struct al_exec.env: what the environment passed to the new program holds */
#define AL_EXEC_ENV_PRELOAD 1u /* an LD_PRELOAD variable (its value follows argv[0]) */
#define AL_EXEC_ENV_SOCKET 2u  /* ALLOCLENS_SOCKET, with this recording's socket */

#define AL_END_EXIT 1u  /* exit() / return from main: destructors ran */
#define AL_END__EXIT 2u /* _exit() / _Exit() */
#define AL_END_DETACHED 3u /* record --pid detached: the process runs on, untraced */

#define AL_MAX_MESSAGE 65536u
#define AL_MAX_LABEL 1024u

struct al_msg_hdr {
    uint32_t type;
    uint32_t len; /* bytes of the whole message, header included */
};

struct al_hello {
    uint32_t version;
    uint32_t pid;
    uint32_t ppid;
    uint32_t ring_records;
    uint64_t proc_start_ticks; /* field 22 of /proc/self/stat: same across exec, tells exec from fork */
    uint64_t mono_ns;          /* CLOCK_MONOTONIC at image start (counter 0) */
    uint64_t real_ns;          /* CLOCK_REALTIME at the same moment */
};

struct al_ring_msg {
    uint32_t first_tid; /* the ring's first owner (also written in-band) */
    uint32_t reserved;
};

struct al_mark {
    uint32_t tid;
    uint32_t reserved;
    uint64_t seq;     /* the counter when marking: the seq of the next event */
    uint64_t mono_ns; /* CLOCK_MONOTONIC */
};

struct al_exec {
    uint32_t pid;
    uint32_t phase;
    uint32_t env;
    uint32_t error;
};

struct al_stacks_msg {
    uint32_t depth;
    uint32_t flags; /* AL_STACKS_FREES */
};
#define AL_STACKS_FREES 1u

/* The stack arena (memfd, AL_ARENA_BYTES, sparse): a header, then entries of whole 8-byte words.
 * An entry's first word is written last, with release: its size in words (low 32 bits) and its
 * kind (high 32 bits); 0 means not complete yet. */
#define AL_ARENA_BYTES 536870912u /* 512 MiB */
#define AL_ARENA_HEADER_BYTES 64u
#define AL_ARENA_STACK 1u
#define AL_ARENA_MODULE 2u
#define AL_MAX_STACK_DEPTH 256u
struct al_arena_header {
    _Atomic uint64_t reserved_words; /* words handed out, the header's included */
    _Atomic uint32_t full;           /* a reservation failed: stacks were dropped */
    uint32_t reserved;
};
struct al_arena_stack {
    uint64_t head;
    _Atomic uint32_t id; /* the trace-wide id; written by the recorder when a record first names it */
    uint32_t depth;      /* then depth x u64 return addresses, innermost first */
};
struct al_arena_module {
    uint64_t head;
    uint32_t pid;
    uint32_t build_id_len;
    uint32_t path_len;
    uint32_t reserved;
    uint64_t start, end, file_offset, bias, unix_ns;
    /* then the build-id (padded to 8 bytes), then the path (padded to 8 bytes) */
};

/* What the process held when record --pid attached: the allocator's own count of the bytes in
 * use (its statistics; AL_HEAP_NONE when it keeps none the shim can read) and the GOT slots the
 * shim patched. */
struct al_attached {
    uint64_t heap_in_use;
    uint32_t heap_source; /* AL_HEAP_* */
    uint32_t got_slots;
};
#define AL_HEAP_NONE 0u
#define AL_HEAP_GLIBC 1u    /* mallinfo2: uordblks + hblkhd */
#define AL_HEAP_JEMALLOC 2u /* mallctl stats.allocated */
#define AL_HEAP_TCMALLOC 3u /* generic.current_allocated_bytes */

struct al_end {
    uint32_t reason;
    uint32_t reserved;
};

/* Environment variables read by the shim (docs/environment.md). */
#define AL_ENV_SOCKET "ALLOCLENS_SOCKET"
#define AL_ENV_STACKS "ALLOCLENS_STACKS"           /* record --stacks: the stack depth */
#define AL_ENV_FREE_STACKS "ALLOCLENS_FREE_STACKS" /* "1": frees' stacks too */
/* record --stacks: the mean bytes between sampled allocations; absent or "0": every allocation */
#define AL_ENV_STACK_SAMPLE "ALLOCLENS_STACK_SAMPLE"

#endif
