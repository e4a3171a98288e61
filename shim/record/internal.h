/*
 * Internal declarations of the alloclens preload shim. Everything here is hidden: the only exported
 * symbols are the interposed entry points and alloclens_mark (exports.map).
 */
#ifndef ALLOCLENS_INTERNAL_H
#define ALLOCLENS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "include/alloclens_shim.h"

#define AL_HIDDEN __attribute__((visibility("hidden")))
#define AL_EXPORT __attribute__((visibility("default")))
#define AL_LIKELY(x) __builtin_expect(!!(x), 1)
#define AL_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The same sources build two libraries (crates/embedded/build.rs):
 * - the preload shim, found first by the dynamic linker: its thread-local storage is static
 *   (initial-exec, no allocation on a thread's first access) and the next allocator is the next
 *   definition after it (RTLD_NEXT);
 * - the attach shim (AL_ATTACH_BUILD), loaded into a running process by `record --pid` and hooked
 *   in by patching the modules' GOT (got.c, attach.c). A library dlopen'ed that late finds
 *   glibc's static TLS reserve too small for the shim's 5 KiB of thread state, so its TLS is
 *   dynamic (the loader allocates a thread's block on its first access, with the real malloc: the
 *   loader's own calls are never patched); and the allocator is the process's global definition
 *   (RTLD_DEFAULT: the shim is RTLD_LOCAL, so that is never itself). */
#ifdef AL_ATTACH_BUILD
#define AL_TLS_MODEL "global-dynamic"
#define AL_NEXT_HANDLE RTLD_DEFAULT
#define AL_ATTACHED 1
#else
#define AL_TLS_MODEL "initial-exec"
#define AL_NEXT_HANDLE RTLD_NEXT
#define AL_ATTACHED 0
#endif

/* ---------------------------------------------------------------- bootstrap.c: the next allocator */

struct al_real {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    void (*free_sized)(void *, size_t);              /* NULL when libc lacks it */
    void (*free_aligned_sized)(void *, size_t, size_t); /* NULL when libc lacks it */
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*posix_spawn)(pid_t *, const char *, const void *, const void *, char *const[],
                       char *const[]);
    int (*posix_spawnp)(pid_t *, const char *, const void *, const void *, char *const[],
                        char *const[]);
    void (*exit_)(int);
    void (*Exit_)(int);
};

AL_HIDDEN extern struct al_real al_real;
/* Resolves al_real with dlsym(RTLD_NEXT). Idempotent; returns 0 once malloc/free are known. */
AL_HIDDEN int al_bootstrap(void);
/* True while this thread is inside al_bootstrap (dlsym may call calloc/malloc). */
AL_HIDDEN int al_bootstrapping(void);
/* Bump allocator for the calls dlsym makes before the real allocator is known. */
AL_HIDDEN void *al_arena_alloc(size_t size, size_t align);
AL_HIDDEN extern unsigned char al_boot_arena[];
#define AL_BOOT_ARENA_BYTES (64 * 1024)
/* Inline: free tests it on every call. */
static inline int al_arena_owns(const void *p)
{
    return (uintptr_t)p - (uintptr_t)al_boot_arena < AL_BOOT_ARENA_BYTES;
}
AL_HIDDEN size_t al_arena_size(const void *p);

/* ---------------------------------------------------------------- buffer.c: per-thread rings */

/* The first page of a ring mapping. head/tail are shared with the recorder (offsets fixed by the
 * protocol header); the rest is process-local bookkeeping the recorder ignores. */
struct al_ring {
    _Atomic uint64_t head; /* AL_RING_HEAD_OFFSET */
    char pad0[56];
    _Atomic uint64_t tail; /* AL_RING_TAIL_OFFSET */
    char pad1[56];
    /* Last tail seen plus the ring's size: the ring is full when head reaches it (one compare on
     * the hot path); refreshed only then. Made AL_RING_RECORDS by ring_create. */
    uint64_t head_limit;
    _Atomic int busy;     /* set around taking a seq (see al_next_seq) */
    uint32_t owner_tid;   /* the thread writing it (on the retiring list: until it is gone) */
    struct al_ring *next_free;
    struct al_ring *next_all;
    uint32_t session; /* al_proc.session when it was made (attach shim: a ring of a past attach) */
};

/* A call made while this thread was inside al_record (a signal handler's), recorded by the
 * interrupted call once it published its own record (al_flush_deferred). */
struct al_deferred {
    uint64_t op;
    const void *addr;
    size_t size;
    const void *old_addr;
};

#define AL_DEFERRED 32 /* power of two */

struct al_tls {
    struct al_ring *ring;
    /* The hot path tests both guards with one load of `guards`. */
    union {
        struct {
            /* Signal safety (hooks.c). Written by this thread only, read by its signal handlers:
             * plain volatile fields ordered with signal fences. */
            volatile int in_hook; /* inside al_record: the stack, the ring, the seq mid-update */
            int busy; /* reentrancy guard: set while the shim itself runs on this thread */
        };
        uint64_t guards;
    };
    uint32_t tid;
    volatile int def_writing;   /* a nested call is filling a deferred slot */
    volatile uint32_t def_head; /* deferred calls queued (by nested calls) */
    volatile uint32_t def_tail; /* deferred calls taken for recording */
    volatile int waiting;       /* al_put_wait: waiting for ring space for `wait_for` */
    volatile int wait_done;     /* a signal handler recorded `wait_for` meanwhile */
    struct al_deferred wait_for;
    struct al_deferred def[AL_DEFERRED];
    /* record --stacks sampling (stacks.c, al_sample_slow): the requested bytes left before the
     * next sampled allocation, and the thread's random state (0: not seeded yet, as in a new
     * thread or after fork, which seeds it anew). */
    uint64_t sample_left;
    uint64_t sample_rng;
};

/* `in_hook` is raised and lowered by a store of the whole of `guards` (busy is 0 wherever a hook
 * does it: it entered after reading both guards 0). The next call's one 8-byte load of `guards`
 * is then forwarded from that store. A 4-byte store of `in_hook` alone cannot forward to it, and
 * the load waited until the store buffer drained, behind the record's stores to a ring line held
 * by the recorder's core: most of the shim's free in the 1-thread churn profile. */
#define AL_GUARDS_IN_HOOK ((uint64_t)1)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "in_hook is the low half of guards");
static inline void al_hook_enter(struct al_tls *t)
{
    *(volatile uint64_t *)&t->guards = AL_GUARDS_IN_HOOK;
}
static inline void al_hook_leave(struct al_tls *t)
{
    *(volatile uint64_t *)&t->guards = 0;
}

AL_HIDDEN extern __thread struct al_tls al_tls __attribute__((tls_model(AL_TLS_MODEL)));

AL_HIDDEN struct al_ring *al_ring_attach(struct al_tls *t);
AL_HIDDEN int al_ring_wait(struct al_ring *r);
AL_HIDDEN void al_rings_init(void);
AL_HIDDEN void al_rings_lock(void);
AL_HIDDEN void al_rings_unlock(void);
/* Attach shim, after the detach: gives the rings' memory back (their mappings stay: a call still
 * in flight may write into one) and forgets them, so that a later attach makes new ones. */
AL_HIDDEN void al_rings_release(void);
/* Whether the recorder has read every ring to its head. */
AL_HIDDEN int al_rings_drained(void);
/* After fork, in the child: forget (unmap) the parent's rings without touching their contents. */
AL_HIDDEN void al_rings_forget(void);

static inline struct al_record *al_ring_records(struct al_ring *r)
{
    return (struct al_record *)((char *)r + AL_RING_HEADER_BYTES);
}

/* ---------------------------------------------------------------- transport.c: the recorder link */

enum { AL_UNINIT = 0, AL_INITIALIZING = 1, AL_ACTIVE = 2, AL_OFF = 3 };
enum { AL_STACKS_SAMPLED = 1, AL_STACKS_ALL = 2 };

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "al_proc's hot words assume little-endian: the state in their low bytes"
#endif

struct al_proc {
    /* The hot path reads these with one load: an allocation all three (`hot`), a free the
     * state and free_stacks (`free_hot`); AL_ACTIVE when the call takes no stack for sure. */
    union {
        struct {
            _Atomic uint16_t state;
            _Atomic uint16_t free_stacks; /* --free-stacks, set while stacks_on is */
            _Atomic int stacks_on;        /* record --stacks set up: AL_STACKS_SAMPLED or _ALL */
        };
        _Atomic uint32_t free_hot;
        _Atomic uint64_t hot;
    };
    int sock;
    _Atomic uint64_t *counter; /* in the shared process page */
    _Atomic uint64_t *lost;    /* ditto: calls that could not be recorded (hooks.c, defer) */
    pid_t pid;
    /* The ring of the thread that may take seqs without a locked instruction (al_next_seq):
     * NULL until the first thread claims it, or one of the two marks below. */
    _Atomic(struct al_ring *) owner;
    int claims_left; /* ownership changes still allowed; then every thread shares the counter */
    /* Attach shim: one per attach of this process image. A thread's ring of an earlier attach
     * (whose recorder is gone) is replaced on its next call. Always 0 in the preload shim. */
    _Atomic uint32_t session;
};

#define AL_OWNER_SWITCHING ((struct al_ring *)1)
#define AL_OWNER_SHARED ((struct al_ring *)2)

AL_HIDDEN extern struct al_proc al_proc;

/* Registers the image for membarrier and opens the counter to an owner (every thread shares it
 * when membarrier is refused). When an image starts, and again in a fork child. */
AL_HIDDEN void al_order_init(void);
/* The seq for a thread that does not own the counter: claims it, waits for a claim in progress,
 * or takes a shared seq. */
AL_HIDDEN uint64_t al_next_seq_slow(struct al_ring *r);

/* Connects to the recorder and announces this image. Returns when state is no longer INITIALIZING
 * because of this call (ACTIVE or OFF), or immediately if another thread is initialising. */
AL_HIDDEN void al_proc_init(void);
AL_HIDDEN int al_send(const void *msg, size_t len, int fd);
AL_HIDDEN void al_send_end(uint32_t reason);
AL_HIDDEN int al_recorder_gone(void);
/* Stops tracing in this process with one warning line on stderr (write(2), no stdio). */
AL_HIDDEN void al_disable(const char *why);
AL_HIDDEN uint32_t al_gettid(void);
AL_HIDDEN uint64_t al_clock_ns(int clock);
AL_HIDDEN void al_write_stderr(const char *a, const char *b);
/* The recorder's socket path (ALLOCLENS_SOCKET as read at start), or NULL. */
AL_HIDDEN const char *al_socket_path(void);

/* Sets the recorder's socket path (the attach shim gets it as an argument, the preload shim from
 * ALLOCLENS_SOCKET). Returns -1 when it is too long for a socket address. */
AL_HIDDEN int al_set_socket_path(const char *path);

/* ---------------------------------------------------------------- attach.c, got.c: attach shim */

/* GOT patching: shim/common/got.h (got.c gives it the hooks). */
/* The bytes a block given to free holds (the allocator's usable size): a free of a block
 * allocated before the attach is counted with it. 0 when the allocator cannot tell. */
AL_HIDDEN size_t al_usable_size(const void *p);

/* ---------------------------------------------------------------- stacks.c: call stacks */

struct al_stacks {
    /* Whether stacks are on: al_proc.stacks_on, beside the state for the hot path's one load. */
    int depth;
    int frees;      /* frees' stacks too */
    int fd;         /* the arena's memfd (kept for fork children) */
    void *base;     /* the arena mapping */
    uint32_t generation; /* arenas made in this process (per-thread caches hold offsets in one) */
    /* The dynamic loader's code: while a stack is walked, ld.so allocates libunwind's
     * thread-local storage (once per thread); those calls are the shim's (al_record_slow). */
    uintptr_t loader_start, loader_end;
    /* Sampled stacks: the mean requested bytes between two sampled allocations (a Poisson
     * process over each thread's bytes); 0 takes the stack of every allocation. */
    uint64_t sample_bytes;
    /* The arena's empty stack: a sampled allocation whose stack could not be taken carries it,
     * so that it stays apart from the allocations that were not sampled (stack id 0). */
    uint32_t unknown_at;
};

AL_HIDDEN extern struct al_stacks al_stacks;
/* Sets up stacks when ALLOCLENS_STACKS asks for them (at image start). -1: asked for, but not
 * possible (the reason is on stderr); tracing goes on without stacks. */
AL_HIDDEN int al_stacks_setup(void);
/* The same with the settings given (the attach shim has no environment of the recorder's). */
AL_HIDDEN int al_stacks_setup_with(int depth, int frees, uint64_t sample_bytes);
/* Attach shim, before a new attach with stacks: the stacks of an earlier one (their ids are
 * another recorder's) are dropped, so that al_stacks_setup_with starts a new arena. */
AL_HIDDEN void al_stacks_discard(void);
/* Calls take no stack from now on (free_stacks, then stacks_on: see al_stacks_setup_with). */
AL_HIDDEN void al_stacks_off(void);
/* In a fork child, before its hello: modules again under the child's pid. */
AL_HIDDEN void al_stacks_fork_child(void);
/* The calling code's stack, interned: its arena offset, or 0 when none could be taken. Called
 * with `in_hook` up: the calls libunwind or a signal handler make meanwhile are queued
 * (al_record_slow) and recorded after the call being recorded, without a stack. */
AL_HIDDEN uint32_t al_stack_capture(void);
/* The countdown ran out (or the thread has none yet): 1 when this allocation of `size` bytes is
 * sampled; draws the next countdown. Seeds the thread's generator on its first call. */
AL_HIDDEN int al_sample_slow(struct al_tls *t, uint64_t size);

/* Whether an allocation of `size` requested bytes is sampled (record --stacks): the thread's
 * countdown of bytes to the next point of a Poisson process of mean al_stacks.sample_bytes, so
 * P(sampled) = 1 - exp(-size / sample_bytes), as in jemalloc and heapprofd. One compare and one
 * subtraction when not sampled; no lock, no allocation. */
static inline int al_sample(struct al_tls *t, uint64_t size)
{
    if (AL_LIKELY(size < t->sample_left)) {
        t->sample_left -= size;
        return 0;
    }
    return al_sample_slow(t, size);
}

static inline int al_op_is_free(uint64_t op)
{
    return op == AL_OP_FREE || op == AL_OP_FREE_SIZED || op == AL_OP_FREE_ALIGNED_SIZED;
}

/* ---------------------------------------------------------------- hooks.c: recording one call */

/* First event of a thread or of the image, or tracing off / re-entered (hooks.c). */
AL_HIDDEN void al_record_slow(uint64_t op, const void *addr, size_t size, const void *old_addr,
                              const void *caller);
/* Records the calls signal handlers made while this thread was inside al_record (hooks.c). */
AL_HIDDEN void al_flush_deferred(struct al_tls *t);
/* The ring is full: waits for room. Returns 0 when the record is not to be written: a signal
 * handler wrote it meanwhile, or tracing stopped (hooks.c). */
AL_HIDDEN int al_put_wait(struct al_tls *t, struct al_ring *r, uint64_t op, const void *addr,
                          size_t size, const void *old_addr);

/* The next seq of the image. The image's counter has an owner thread (biased, as in biased
 * locking): the one thread that allocates in a single-threaded program, or the busy worker of a
 * main thread that only waits. It increments with a plain load and store, flagged by its ring's
 * `busy`: no locked instruction. Another thread that allocates claims the counter (at most
 * `claims_left` times per image, then all threads share it with a fetch-add) with the
 * asymmetric-fence pattern of liburcu (al_next_seq_slow): it marks the counter SWITCHING, calls
 * membarrier (a full barrier on every running thread of the image) and waits for the old
 * owner's `busy` to drop. After that barrier the old owner either sees it is no longer the owner,
 * or is inside an increment whose `busy = 1` is visible and is waited for: no seq is taken twice.
 */
static inline uint64_t al_next_seq(struct al_ring *r)
{
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the compiler keeps the store before the load */
    struct al_ring *owner = atomic_load_explicit(&al_proc.owner, memory_order_acquire);
    if (AL_LIKELY(owner == r)) {
        uint64_t seq = atomic_load_explicit(al_proc.counter, memory_order_relaxed);
        atomic_store_explicit(al_proc.counter, seq + 1, memory_order_relaxed);
        atomic_store_explicit(&r->busy, 0, memory_order_release);
        return seq;
    }
    atomic_store_explicit(&r->busy, 0, memory_order_release);
    if (AL_LIKELY(owner == AL_OWNER_SHARED))
        return atomic_fetch_add_explicit(al_proc.counter, 1, memory_order_relaxed);
    return al_next_seq_slow(r);
}

/* Appends one record to the thread's ring: a slot, the next seq (al_next_seq), a release store of
 * the head. Runs with `in_hook` set: a signal handler's call meanwhile is deferred, since it
 * would write the same slot, or take the owner's seq between its load and its store. */
static inline __attribute__((always_inline)) void al_put(struct al_tls *t, struct al_ring *r,
                                                        uint64_t op, const void *addr,
                                                        size_t size, const void *old_addr)
{
    /* Only this thread writes head: a plain load of it. */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (AL_UNLIKELY(head >= r->head_limit)) {
        if (!al_put_wait(t, r, op, addr, size, old_addr))
            return;
        head = atomic_load_explicit(&r->head, memory_order_relaxed);
    }
    uint64_t seq = al_next_seq(r);
    struct al_record *rec = &al_ring_records(r)[head & (AL_RING_RECORDS - 1)];
    rec->seq_op = seq | (op << AL_OP_SHIFT);
    rec->addr = (uint64_t)(uintptr_t)addr;
    rec->size = size;
    rec->old_addr = (uint64_t)(uintptr_t)old_addr;
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

/* record --stacks: the stack (sampled or not) and al_put, out of line (hooks.c). */
AL_HIDDEN void al_record_stacks(struct al_tls *t, struct al_ring *r, uint64_t op,
                                const void *addr, size_t size, const void *old_addr);
/* The rest of a record whose fast path gave up (a full ring, a seq to claim): al_put, then what
 * follows it in al_record, out of line (hooks.c). Called with `in_hook` set. */
AL_HIDDEN void al_record_rest(struct al_tls *t, struct al_ring *r, uint64_t op, const void *addr,
                              size_t size, const void *old_addr);

/* `hot` when tracing with sampled --stacks set up (state AL_ACTIVE, stacks_on SAMPLED). */
#define AL_ACTIVE_SAMPLED ((uint64_t)AL_ACTIVE | (uint64_t)AL_STACKS_SAMPLED << 32)

/* The hot path: one TLS block, one test of the ring and of the two guards, one of the image's
 * state and of --stacks together; then the record between the `in_hook` stores (al_put's work
 * when the ring has room and the thread owns the seq counter or shares it), then a look at the
 * deferred queue (empty unless a signal handler allocated meanwhile). Everything else is a call
 * at the end, out of line, so that the hooks save few registers. Under sampled --stacks, an
 * allocation that takes no stack joins the same path after its countdown (the branch out of the
 * first test: nothing is added to the path without stacks), and a free without --free-stacks
 * never leaves it. */
/* always_inline: with the seq logic, the compiler called it out of line (seen in the profile). */
static inline __attribute__((always_inline)) void al_record(uint64_t op, const void *addr,
                                                           size_t size, const void *old_addr)
{
    struct al_tls *t = &al_tls;
    struct al_ring *r = t->ring;
    /* `op` is a constant in each hook: a free without --free-stacks sees AL_ACTIVE under
     * --stacks too, and stays on the path it has without stacks. */
    uint64_t hot = al_op_is_free(op) ? atomic_load_explicit(&al_proc.free_hot, memory_order_relaxed)
                                     : atomic_load_explicit(&al_proc.hot, memory_order_relaxed);
    int ours = r != NULL && t->guards == 0 &&
               (!AL_ATTACHED ||
                r->session == atomic_load_explicit(&al_proc.session, memory_order_relaxed));
    if (AL_UNLIKELY(!ours || hot != AL_ACTIVE)) {
        if (al_op_is_free(op) || !ours || hot != AL_ACTIVE_SAMPLED) {
            /* always_inline: the return address is the hook's, i.e. who called malloc. */
            al_record_slow(op, addr, size, old_addr, __builtin_return_address(0));
            return;
        }
        /* Sampled --stacks: an allocation the thread's countdown does not reach moves it on
         * (al_sample's fast case) and joins the path without stacks. With `in_hook` up, as
         * al_record_stacks tests it: a signal handler's call meanwhile is queued, and does not
         * move the countdown between this call's load and store. */
        al_hook_enter(t);
        atomic_signal_fence(memory_order_seq_cst);
        if (size >= t->sample_left) {
            al_record_stacks(t, r, op, addr, size, old_addr);
            return;
        }
        t->sample_left -= size;
        goto in_hook;
    }
    al_hook_enter(t);
    atomic_signal_fence(memory_order_seq_cst);
in_hook:;
    /* Read after `in_hook` is up: a signal handler's record before it moved the head. */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (AL_UNLIKELY(head >= r->head_limit)) {
        al_record_rest(t, r, op, addr, size, old_addr);
        return;
    }
    /* al_next_seq, with the claim out of line (al_record_rest takes the seq anew). */
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    struct al_ring *owner = atomic_load_explicit(&al_proc.owner, memory_order_acquire);
    uint64_t seq;
    if (AL_LIKELY(owner == r)) {
        /* Plain load and add (no lock: this thread owns the counter). */
        _Atomic uint64_t *counter = al_proc.counter;
        seq = atomic_load_explicit(counter, memory_order_relaxed);
        *(uint64_t *)counter += 1;
        atomic_store_explicit(&r->busy, 0, memory_order_release);
    } else {
        atomic_store_explicit(&r->busy, 0, memory_order_release);
        if (AL_UNLIKELY(owner != AL_OWNER_SHARED)) {
            al_record_rest(t, r, op, addr, size, old_addr);
            return;
        }
        seq = atomic_fetch_add_explicit(al_proc.counter, 1, memory_order_relaxed);
    }
    struct al_record *rec = &al_ring_records(r)[head & (AL_RING_RECORDS - 1)];
    rec->seq_op = seq | (op << AL_OP_SHIFT);
    rec->addr = (uint64_t)(uintptr_t)addr;
    rec->size = size;
    rec->old_addr = (uint64_t)(uintptr_t)old_addr;
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    al_hook_leave(t);
    atomic_signal_fence(memory_order_seq_cst);
    /* def_tail without volatile (only this thread moves it, and not in a handler): the compiler
     * compares it from memory, one load fewer. */
    if (AL_UNLIKELY(t->def_head != *(const uint32_t *)&t->def_tail))
        al_flush_deferred(t);
}

#endif
