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

AG_HIDDEN extern struct ag_real ag_real;
AG_HIDDEN int ag_bootstrap(void);

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
    uint64_t bytes_in;    /* usable size of the blocks that became live */
    uint64_t bytes_out;   /* usable size of the blocks that stopped being live */
    uint64_t requested;   /* bytes asked for */
    struct ag_slot *next_all;
    struct ag_slot *next_free;
    int in_use;
} __attribute__((aligned(64))); /* one cache line of counters per thread: no false sharing */

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

/* ------------------------------------------------------------ snapshot.c: the agent thread */

/* Ends the agent thread (returns 1) until ag_thread_resume; returns 0 when none ran. */
AG_HIDDEN int ag_thread_pause(void);
AG_HIDDEN void ag_thread_resume(void);

#endif
