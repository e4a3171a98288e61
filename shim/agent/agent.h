/*
 * Internal declarations of the alloclens watch agent (liballoclens_agent.so): a light preload
 * library that counts the program's heap calls per thread and, from its own thread, writes a
 * snapshot file of those counters and the allocator's own statistics every interval. Everything
 * here is hidden: the only exported symbols are the heap entry points, _exit/_Exit and
 * unshare/setns (exports.map).
 */
#ifndef ALLOCLENS_AGENT_H
#define ALLOCLENS_AGENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AG_HIDDEN __attribute__((visibility("hidden")))
#define AG_EXPORT __attribute__((visibility("default")))
#define AG_LIKELY(x) __builtin_expect(!!(x), 1)
#define AG_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------ hooks.c: the next allocator */

struct ag_real {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable)(void *); /* the serving allocator's malloc_usable_size */
};

/* malloc is never NULL (a bootstrap function until the chain is resolved); the others are NULL
 * until then. */
AG_HIDDEN extern struct ag_real ag_real;
AG_HIDDEN int ag_bootstrap(void);
/* ag_real holds the next allocator's functions. */
AG_HIDDEN int ag_real_resolved(void);
/* An attached agent's allocator: the program's global definitions (RTLD_DEFAULT). */
AG_HIDDEN void ag_real_from_default(void);

/* Loaded by an attach (watch --pid), not preloaded: the hooks, reached only through the GOT
 * slots an attach with a profile patches (got_hooks.c), sample for the heap profile and count
 * nothing (an attached agent's snapshots have the allocator's statistics as their figures). */
AG_HIDDEN extern int ag_sample_only;

/* A hidden name for a hook defined in the same file: ag_hook_<name> (got_hooks.c's table). An
 * assembler alias: the attribute one would have to repeat each hook's attributes. */
#define AG_HOOK_ALIAS(name)                                                                        \
    __asm__(".globl ag_hook_" #name "\n.hidden ag_hook_" #name "\n.set ag_hook_" #name ", " #name)

/* ------------------------------------------------------------ hooks.c: per-thread counters */

/* One thread's counters, cumulative since the image started (or since the slot was first used:
 * a slot freed by an exiting thread is taken over by the next new thread, which goes on adding,
 * so the sums over all slots stay right). Written by its thread only, with one non-locked add
 * instruction per field (a signal handler on the same thread cannot tear it); read by the agent
 * thread. */
struct ag_slot {
    uint64_t allocs;      /* malloc, calloc and the aligned calls that returned a block */
    uint64_t frees;       /* free of a non-NULL block */
    uint64_t reallocs;    /* realloc calls */
    /* Blocks made or ended by realloc (realloc(NULL, n), glibc's realloc(p, 0)): live blocks are
     * allocs + these in - frees - these out, so malloc and free add no block counter. */
    uint64_t blocks_in;
    uint64_t blocks_out;
    /* Usable size + AG_SIZE_FIELD of the blocks that became live, that stopped being live: a
     * glibc chunk's size as its header has it, added with no arithmetic on the fast path. */
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t requested;   /* bytes asked for */
    /* Reallocs of a block that returned one: its old block out, the new one in. With allocs
     * and blocks_in (frees and blocks_out), the number of AG_SIZE_FIELD in bytes_in (bytes_out). */
    uint64_t moved;
    struct ag_slot *next_all;
    struct ag_slot *next_free;
    int in_use;
} __attribute__((aligned(64))); /* no two threads' counters in one cache line */

/* glibc's size field before each block: a slot's byte counts carry it once per block. */
#define AG_SIZE_FIELD 8u

struct ag_counters {
    uint64_t allocs, frees, reallocs, blocks_in, blocks_out, bytes_in, bytes_out, requested;
};

struct ag_tls {
    /* The slot malloc and free add to directly: `slot` while busy is 0 and glibc serves, else
     * NULL. The hooks' fast path reads this one word; NULL sends them to the slow path, which
     * looks at the rest. */
    struct ag_slot *count;
    struct ag_slot *slot;
    int busy; /* the agent itself runs on this thread (or it is the agent thread): not counted */
    int dead; /* the thread's slot went back at thread exit: later calls use the shared slot */
    /* The heap profile's sampler (profile.c): requested bytes left to the next sample point (0
     * in a new thread: its first allocation draws one; INT64_MAX when the sampler is off) and the
     * thread's generator. */
    int64_t prof_left;
    uint64_t prof_rng;
};

AG_HIDDEN extern __thread struct ag_tls ag_tls __attribute__((tls_model("initial-exec")));

/* The agent's own work on this thread starts (nests) and ends: its calls are not counted. Only
 * these change busy, so `count` follows it. A signal handler between the two stores of either
 * sees a state that counts its calls exactly as one of the two states would. */
static inline void ag_busy_enter(void)
{
    ag_tls.busy++;
    ag_tls.count = NULL;
}

AG_HIDDEN extern int ag_glibc_serves; /* the next malloc is glibc's (hooks.c) */

static inline void ag_busy_leave(void)
{
    /* Other allocators take the slow path: their usable size is a call anyway. */
    if (--ag_tls.busy == 0)
        ag_tls.count = ag_tls.dead || !ag_glibc_serves ? NULL : ag_tls.slot;
}

/* Counting for the C++ operators (cxx.c); malloc and free inline the same fast path. */
AG_HIDDEN void ag_count_alloc(void *p, size_t requested);
AG_HIDDEN void ag_count_free(void *p);

/* Sums every slot (the agent thread, at each snapshot). */
AG_HIDDEN void ag_counters_read(struct ag_counters *out);
/* In a fork child: only the forking thread lives on; every other slot is free for reuse. */
AG_HIDDEN void ag_slots_after_fork(void);
AG_HIDDEN void ag_slots_init(void);

/* ------------------------------------------------------------ profile.c: the heap profile */

/* A counting filter of the sampled live blocks' addresses: a free whose byte is 0 holds no sample
 * (one byte load; the table is looked up only otherwise). */
#define AG_PROF_FILTER_SLOTS 65536u
#define AG_PROF_FILTER_INDEX(a) (((uint64_t)(uintptr_t)(a) * 0x9E3779B97F4A7C15ull) >> 48)
AG_HIDDEN extern uint8_t ag_prof_filter[AG_PROF_FILTER_SLOTS];

/* The countdown ran out in the allocation p of `size` requested bytes (or the thread has none
 * yet): samples it when the sampler is on. */
AG_HIDDEN void ag_prof_sample(void *p, size_t size);
/* p, whose filter byte is set, is freed: its entry goes, if it has one. */
AG_HIDDEN void ag_prof_forget(void *p);

/* ag_prof_sample returning p, so that malloc's fast path ends in a tail call to it. */
AG_HIDDEN void *ag_prof_sample_p(void *p, size_t size);

/* Every counted allocation: one subtraction from the thread's countdown. */
static inline void ag_prof_count(void *p, size_t size)
{
    if (AG_UNLIKELY((ag_tls.prof_left -= (int64_t)size) < 0))
        ag_prof_sample(p, size);
}

/* The same, returning p. */
static inline void *ag_prof_count_p(void *p, size_t size)
{
    if (AG_UNLIKELY((ag_tls.prof_left -= (int64_t)size) < 0))
        return ag_prof_sample_p(p, size);
    return p;
}

/* Set, and never cleared, before the sampler's first sample in this image (ag_prof_init,
 * ag_prof_attach): until then every filter byte is 0, so a free need not hash its address. */
AG_HIDDEN extern int ag_prof_armed;

/* Every free, before the block goes back to the allocator (after it, another thread may get the
 * address and sample it). Without a sampler: one compare of a read-mostly flag. The thread that
 * sampled a block read sample_bytes (acquire) after the flag was set, and the block reached the
 * freeing thread after that, so a free of a sampled block sees the flag. */
static inline void ag_prof_free(void *p)
{
    if (AG_UNLIKELY(__atomic_load_n(&ag_prof_armed, __ATOMIC_RELAXED)) &&
        __atomic_load_n(&ag_prof_filter[AG_PROF_FILTER_INDEX(p)], __ATOMIC_RELAXED))
        ag_prof_forget(p);
}

struct ag_counters;
/* The sampler's set-up (ALLOCLENS_PROFILE_BYTES), at the agent's start and in a fork child (a
 * table of its own in the same directory). */
AG_HIDDEN void ag_prof_init(const char *dir, const char *exe);
AG_HIDDEN void ag_prof_after_fork(const char *exe);
/* An attach with a profile: the sampler starts with a new table in `dir` (0, or -1 when none
 * could be made); ag_prof_detach marks the table detached, stops sampling and lets the file go
 * (the table stays, with the state at the detach). Called by the agent thread only. */
AG_HIDDEN int ag_prof_attach(const char *dir, const char *exe, uint64_t sample_bytes);
AG_HIDDEN void ag_prof_detach(void);
/* The agent thread's renewal of the table's exact figures; `final` at exit. */
AG_HIDDEN void ag_prof_tick(const struct ag_counters *c, uint64_t rss, int final);

/* ------------------------------------------------------------ stats.c: the allocator's own view */

enum ag_allocator { AG_UNKNOWN, AG_GLIBC, AG_JEMALLOC, AG_MIMALLOC, AG_TCMALLOC, AG_TBBMALLOC };

/* A growable text buffer in its own mapping (never the program's heap). */
struct ag_buf {
    char *data;
    size_t len, cap;
    int failed;
};

AG_HIDDEN void ag_buf_put(struct ag_buf *b, const char *s, size_t n);
AG_HIDDEN void ag_buf_str(struct ag_buf *b, const char *s);
AG_HIDDEN void ag_buf_u64(struct ag_buf *b, uint64_t v);
AG_HIDDEN void ag_buf_kv(struct ag_buf *b, const char *prefix, const char *key, uint64_t v);

/* Finds which library serves malloc (dladdr of the next malloc) and its statistics API. */
AG_HIDDEN void ag_stats_init(void);
AG_HIDDEN enum ag_allocator ag_allocator(void);
AG_HIDDEN const char *ag_allocator_name(void);
/* Appends `<prefix><api name>=<value>` lines for every figure the allocator gives. */
AG_HIDDEN void ag_stats_raw(struct ag_buf *b, const char *prefix);
/* Appends the allocator's text reports as sections (glibc malloc_info, mimalloc's stats). */
AG_HIDDEN void ag_stats_text(struct ag_buf *b);
/* Asks the allocator to give free memory back to the system. Returns 0 if it has no way. */
AG_HIDDEN int ag_stats_trim(void);

/* ------------------------------------------------------------ got_hooks.c: attach with a profile */

/* Starts the sampler (a table in `dir`) and patches the GOT so the hooks run; 0, or -1 when the
 * table could not be made or nothing could be patched (then nothing runs). */
AG_HIDDEN int ag_attach_profile_start(const char *dir, const char *exe, uint64_t sample_bytes);
/* Every agent interval: the modules dlopened by a bare name since the last look. */
AG_HIDDEN void ag_attach_profile_tick(void);
/* The attach ended: the GOT restored, the sampler stopped, the table left as it was. */
AG_HIDDEN void ag_attach_profile_stop(void);
/* In a fork child of a process being profiled (its GOT is its parent's, still patched). */
AG_HIDDEN void ag_attach_profile_after_fork(void);

/* ------------------------------------------------------------ snapshot.c: the agent thread */

/* Ends the agent thread (returns 1) until ag_thread_resume; returns 0 when none ran. */
AG_HIDDEN int ag_thread_pause(void);
AG_HIDDEN void ag_thread_resume(void);

#endif
