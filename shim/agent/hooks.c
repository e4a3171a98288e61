/*
 * The interposed heap entry points of the watch agent. Each forwards to the next allocator in the
 * chain (dlsym(RTLD_NEXT), as the record shim's bootstrap.c does) and adds to its thread's
 * counters: no lock, no system call, no allocation on the way.
 *
 * The size counted is the block's usable size (the serving allocator's malloc_usable_size), read
 * after the allocation and before the free: the one size known at both ends without a table of
 * blocks. So live bytes are the bytes the program could use, rounded up to the allocator's size
 * class; requested bytes are counted too (cumulatively).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "agent.h"
#include "boot_heap.h"

static void *malloc_unresolved(size_t size);
/* malloc's next starts as a function that resolves the chain, so that malloc's fast path calls
 * it without a test; `resolved` says when the whole table is filled. */
AG_HIDDEN struct ag_real ag_real = {.malloc = malloc_unresolved};
static int resolved;
AG_HIDDEN int ag_glibc_serves; /* see usable(); set before `resolved` */
AG_HIDDEN __thread struct ag_tls ag_tls __attribute__((tls_model("initial-exec")));

/* ---------------------------------------------------------------------- bootstrap */

/* dlsym may call calloc before the real allocator is known: those calls get static memory, never
 * returned (free recognises it by address), from the boot heap of common/boot_heap.h, which the
 * record shim uses too. A block's header holds its size << 3 with glibc's IS_MMAPPED bit (2) set,
 * so the hooks' fast path, which reads the header, sends it to the slow path. */
#define ARENA_BYTES (32 * 1024)
static _Alignas(64) unsigned char arena[ARENA_BYTES];
static _Atomic size_t arena_used;
static __thread volatile int bootstrapping __attribute__((tls_model("initial-exec")));

static void *arena_alloc(size_t size, size_t align)
{
    return boot_heap_alloc(arena, ARENA_BYTES, &arena_used, size, align, size << 3 | 2);
}

static inline int arena_owns(const void *p)
{
    return boot_heap_owns(arena, ARENA_BYTES, p);
}

#define RESOLVE(field, name) ag_real.field = (__typeof__(ag_real.field))dlsym(RTLD_NEXT, name)

static void mark_resolved(void *next_malloc)
{
    atomic_store_explicit((_Atomic(void *) *)&ag_real.malloc, next_malloc, memory_order_release);
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

AG_HIDDEN int ag_bootstrap(void)
{
    if (AG_LIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)))
        return 0;
    if (bootstrapping)
        return -1;
    bootstrapping = 1;
    RESOLVE(calloc, "calloc");
    RESOLVE(realloc, "realloc");
    RESOLVE(posix_memalign, "posix_memalign");
    RESOLVE(aligned_alloc, "aligned_alloc");
    RESOLVE(memalign, "memalign");
    RESOLVE(valloc, "valloc");
    RESOLVE(pvalloc, "pvalloc");
    RESOLVE(usable, "malloc_usable_size");
    RESOLVE(free, "free");
    void *next_malloc = dlsym(RTLD_NEXT, "malloc");
    Dl_info info;
    if (next_malloc && dladdr(next_malloc, &info) && info.dli_fname) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        ag_glibc_serves = strncmp(base, "libc.so", 7) == 0;
    }
    bootstrapping = 0;
    if (!(next_malloc && ag_real.free && ag_real.usable))
        return -1;
    mark_resolved(next_malloc); /* last: ready() tests it */
    /* One usable-size call before any is counted: tcmalloc's first one makes its
     * MallocExtension with operator new, which would count a block, which would ask its usable
     * size, ... */
    ag_busy_enter();
    void *p = ag_real.malloc(1);
    if (p) {
        ag_real.usable(p);
        ag_real.free(p);
    }
    ag_busy_leave();
    return 0;
}

/* glibc: the usable size read from the chunk header, as glibc's own malloc_usable_size does
 * (musable: the chunk size without its flag bits, less the size field, and less the prev_size
 * field too for an mmapped chunk), without a call. ag_glibc_serves is set at bootstrap when the
 * next malloc is libc's. */

/* An attached agent (watch --pid) is dlopened RTLD_LOCAL, not in the chain: the allocator is the
 * program's global definition. glibc's chunk headers are never read then (ag_glibc_serves stays
 * 0, so every call takes the slow path): a block from before the attach may be another
 * allocator's. */
#define RESOLVE_DEFAULT(field, name)                                                               \
    ag_real.field = (__typeof__(ag_real.field))dlsym(RTLD_DEFAULT, name)

AG_HIDDEN void ag_real_from_default(void)
{
    RESOLVE_DEFAULT(calloc, "calloc");
    RESOLVE_DEFAULT(realloc, "realloc");
    RESOLVE_DEFAULT(posix_memalign, "posix_memalign");
    RESOLVE_DEFAULT(aligned_alloc, "aligned_alloc");
    RESOLVE_DEFAULT(memalign, "memalign");
    RESOLVE_DEFAULT(valloc, "valloc");
    RESOLVE_DEFAULT(pvalloc, "pvalloc");
    RESOLVE_DEFAULT(usable, "malloc_usable_size");
    RESOLVE_DEFAULT(free, "free");
    void *next_malloc = dlsym(RTLD_DEFAULT, "malloc");
    if (next_malloc)
        mark_resolved(next_malloc);
}

static inline size_t glibc_usable(const void *p)
{
    size_t head = ((const size_t *)p)[-1];
    /* IS_MMAPPED (2) makes the header 8 bytes longer: (head & 2) << 2 is 8 or 0, no branch. */
    return (head & ~(size_t)7) - sizeof(size_t) - ((head & 2) << 2);
}

static inline size_t usable(void *p)
{
    if (AG_LIKELY(ag_glibc_serves))
        return glibc_usable(p);
    return ag_real.usable(p);
}

AG_HIDDEN int ag_real_resolved(void)
{
    return __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
}

static inline int ready(void)
{
    return AG_LIKELY(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)) || ag_bootstrap() == 0;
}

/* ---------------------------------------------------------------------- slots */

#define SLOTS_PER_MAP 64

static struct ag_slot *all_slots;             /* every slot ever made (never unmapped) */
static struct ag_slot *free_slots;            /* slots of exited threads, for reuse */
static atomic_flag slots_lock = ATOMIC_FLAG_INIT; /* slot list changes only: once per thread */
/* Calls that cannot use a thread slot (during a slot change, after the thread's slot went back,
 * or in a signal handler interrupting one): shared, with locked adds. */
static struct ag_slot shared;
static pthread_key_t slot_key;
static int slot_key_ok;

static void slots_lock_take(void)
{
    while (atomic_flag_test_and_set_explicit(&slots_lock, memory_order_acquire))
        ;
}

static void slots_lock_give(void)
{
    atomic_flag_clear_explicit(&slots_lock, memory_order_release);
}

/* One instruction, not locked: atomic with respect to a signal handler on the same thread, and
 * other threads only read. */
static inline void add(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__)
    __asm__ volatile("addq %1, %0" : "+m"(*c) : "er"(v));
#else
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
#endif
}

static void slot_release(void *arg)
{
    struct ag_slot *s = arg;
    ag_tls.count = NULL;
    ag_tls.slot = NULL;
    ag_tls.dead = 1; /* the thread's last destructors still free: counted in `shared` */
    slots_lock_take();
    s->in_use = 0;
    s->next_free = free_slots;
    free_slots = s;
    slots_lock_give();
}

static struct ag_slot *slot_take(void)
{
    slots_lock_take();
    struct ag_slot *s = free_slots;
    if (s) {
        free_slots = s->next_free;
    } else {
        struct ag_slot *map = mmap(NULL, SLOTS_PER_MAP * sizeof *map, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map != MAP_FAILED) {
            /* Published before use: the reader walks next_all without the lock. */
            for (int i = SLOTS_PER_MAP - 1; i >= 1; i--) {
                map[i].next_all = all_slots;
                atomic_store_explicit((_Atomic(struct ag_slot *) *)&all_slots, &map[i],
                                      memory_order_release);
                map[i].next_free = free_slots;
                free_slots = &map[i];
            }
            map[0].next_all = all_slots;
            atomic_store_explicit((_Atomic(struct ag_slot *) *)&all_slots, &map[0],
                                  memory_order_release);
            s = &map[0];
        }
    }
    if (s)
        s->in_use = 1;
    slots_lock_give();
    return s;
}

AG_HIDDEN void ag_slots_init(void)
{
    if (!slot_key_ok && pthread_key_create(&slot_key, slot_release) == 0)
        slot_key_ok = 1;
}

/* A thread's first counted call: a slot for it, released when it exits. */
static __attribute__((noinline)) struct ag_slot *slot_attach(void)
{
    struct ag_tls *t = &ag_tls;
    if (t->dead || !slot_key_ok)
        return &shared;
    int saved_errno = errno;
    ag_busy_enter(); /* pthread_setspecific may allocate: that block is the agent's */
    struct ag_slot *s = slot_take();
    if (s && pthread_setspecific(slot_key, s) == 0) {
        t->slot = s;
    } else if (s) {
        slot_release(s);
        t->dead = 0;
        s = NULL;
    }
    ag_busy_leave(); /* counts into the new slot from now on */
    errno = saved_errno;
    return s ? s : &shared;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

AG_HIDDEN void ag_counters_read(struct ag_counters *out)
{
    memset(out, 0, sizeof *out);
    uint64_t sized_in = 0, sized_out = 0; /* blocks whose AG_SIZE_FIELD the byte counts carry */
    struct ag_slot *s = atomic_load_explicit((_Atomic(struct ag_slot *) *)&all_slots,
                                             memory_order_acquire);
    struct ag_slot *sh = &shared;
    for (int pass = 0; pass < 2; pass++) {
        for (; s; s = pass ? NULL : s->next_all) {
            /* The block counts before the byte counts: a thread adds them in the other order,
             * so the bytes read carry at least the size fields of the blocks read. */
            uint64_t allocs = __atomic_load_n(&s->allocs, __ATOMIC_RELAXED);
            uint64_t frees = __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
            uint64_t moved = __atomic_load_n(&s->moved, __ATOMIC_RELAXED);
            uint64_t blocks_in = __atomic_load_n(&s->blocks_in, __ATOMIC_RELAXED);
            uint64_t blocks_out = __atomic_load_n(&s->blocks_out, __ATOMIC_RELAXED);
            sized_in += allocs + blocks_in + moved;
            sized_out += frees + blocks_out + moved;
            out->allocs += allocs;
            out->frees += frees;
            out->reallocs += __atomic_load_n(&s->reallocs, __ATOMIC_RELAXED);
            out->blocks_in += blocks_in;
            out->blocks_out += blocks_out;
            out->bytes_in += __atomic_load_n(&s->bytes_in, __ATOMIC_RELAXED);
            out->bytes_out += __atomic_load_n(&s->bytes_out, __ATOMIC_RELAXED);
            out->requested += __atomic_load_n(&s->requested, __ATOMIC_RELAXED);
        }
        s = sh;
    }
    out->bytes_in = minus(out->bytes_in, sized_in * AG_SIZE_FIELD);
    out->bytes_out = minus(out->bytes_out, sized_out * AG_SIZE_FIELD);
}

AG_HIDDEN void ag_slots_after_fork(void)
{
    /* The other threads are gone; their counts stay (their blocks are still in the child's
     * heap), their slots become free. The lock may have been held by a thread that is gone. */
    atomic_flag_clear(&slots_lock);
    free_slots = NULL;
    for (struct ag_slot *s = all_slots; s; s = s->next_all) {
        if (s == ag_tls.slot)
            continue;
        s->in_use = 0;
        s->next_free = free_slots;
        free_slots = s;
    }
}

/* ---------------------------------------------------------------------- counting */

/* The slot this call counts into, or NULL when it is not counted (the agent's own calls). */
static inline struct ag_slot *slot(int *shared_add)
{
    struct ag_tls *t = &ag_tls;
    struct ag_slot *s = t->slot;
    *shared_add = 0;
    if (AG_UNLIKELY(t->busy))
        return NULL;
    if (AG_UNLIKELY(s == NULL)) {
        s = slot_attach();
        *shared_add = s == &shared;
    }
    return s;
}

static inline void count(struct ag_slot *s, int atomic, uint64_t *field, uint64_t v)
{
    (void)s;
    if (AG_UNLIKELY(atomic))
        __atomic_fetch_add(field, v, __ATOMIC_RELAXED);
    else
        add(field, v);
}

#define COUNT(s, at, f, v) count(s, at, &(s)->f, v)

AG_HIDDEN int ag_sample_only;

static __attribute__((noinline, cold)) void counted_alloc_slow(void *p, size_t requested)
{
    if (arena_owns(p)) /* malloc before the bootstrap (malloc_unresolved) */
        return;
    if (ag_sample_only) {
        if (p != NULL && !ag_tls.busy)
            ag_prof_count(p, requested);
        return;
    }
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL || p == NULL))
        return;
    COUNT(s, at, allocs, 1);
    COUNT(s, at, bytes_in, usable(p) + AG_SIZE_FIELD);
    COUNT(s, at, requested, requested);
    ag_prof_count(p, requested);
}

static __attribute__((noinline, cold)) void counted_free_slow(void *p)
{
    if (ag_sample_only)
        return;
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL || p == NULL))
        return;
    COUNT(s, at, frees, 1);
    COUNT(s, at, bytes_out, usable(p) + AG_SIZE_FIELD);
}

/* The fast path: the thread's own slot in `count` (busy is 0 and glibc serves, see
 * ag_busy_leave), a block not mmapped (its chunk size, in the header, is its usable size plus
 * AG_SIZE_FIELD; the arena's blocks look mmapped), plain adds. Everything else goes through the slow paths
 * above, which check each case. Returns the slot, or NULL for the slow path; *head is the block's
 * glibc chunk header. */
static inline __attribute__((always_inline)) struct ag_slot *fast_slot(const void *p,
                                                                        size_t *head)
{
    struct ag_slot *s = ag_tls.count;
    if (AG_UNLIKELY(s == NULL || p == NULL))
        return NULL;
    *head = ((const size_t *)p)[-1];
    return AG_LIKELY((*head & 2) == 0) ? s : NULL;
}

/* The chunk size: the header less glibc's three flag bits. */
#define FAST_CHUNK(head) ((head) & ~(size_t)7)

static __attribute__((noinline, cold)) void *counted_alloc_slow_p(void *p, size_t requested)
{
    counted_alloc_slow(p, requested);
    return p;
}

/* Counts the block p and returns it (the slow path and the sampler as tail calls: no stack frame
 * for them). */
static inline __attribute__((always_inline)) void *counted_alloc(void *p, size_t requested)
{
    size_t head;
    struct ag_slot *s = fast_slot(p, &head);
    if (AG_LIKELY(s != NULL)) {
        add(&s->allocs, 1);
        add(&s->bytes_in, FAST_CHUNK(head));
        add(&s->requested, requested);
        return ag_prof_count_p(p, requested);
    }
    return counted_alloc_slow_p(p, requested);
}

AG_HIDDEN void ag_count_alloc(void *p, size_t requested)
{
    (void)counted_alloc(p, requested);
}

AG_HIDDEN void ag_count_free(void *p)
{
    ag_prof_free(p);
    size_t head;
    struct ag_slot *s = fast_slot(p, &head);
    if (AG_LIKELY(s != NULL)) {
        add(&s->frees, 1);
        add(&s->bytes_out, FAST_CHUNK(head));
    } else {
        counted_free_slow(p);
    }
}

/* ---------------------------------------------------------------------- hooks */

/* ag_real.malloc until the bootstrap: malloc counts what this returns (an arena block goes to
 * the slow path by its header, which leaves it out). */
static __attribute__((noinline, cold)) void *malloc_unresolved(size_t size)
{
    if (!ready())
        return arena_alloc(size, 16);
    return ag_real.malloc(size);
}

AG_EXPORT __attribute__((hot)) void *malloc(size_t size)
{
    return counted_alloc(ag_real.malloc(size), size);
}

AG_EXPORT void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        total = SIZE_MAX;
    if (AG_UNLIKELY(!ready()))
        return total == SIZE_MAX ? NULL : arena_alloc(total, 16); /* static: already zero */
    void *p = ag_real.calloc(n, size);
    return counted_alloc(p, total);
}

static __attribute__((noinline, cold)) void free_slow(void *p)
{
    if (arena_owns(p) || !ready())
        return;
    counted_free_slow(p);
    ag_prof_free(p);
    ag_real.free(p);
}

/* The fast path has no call before the real free's: no stack frame, a tail call. A thread slot
 * in `count` means bootstrap is done (slots are taken only by counted calls), and an arena block
 * goes to the slow path by its header. */
AG_EXPORT __attribute__((hot)) void free(void *p)
{
    size_t head;
    struct ag_slot *s = fast_slot(p, &head);
    if (AG_LIKELY(s != NULL)) {
        add(&s->frees, 1);
        add(&s->bytes_out, FAST_CHUNK(head));
        ag_prof_free(p);
        ag_real.free(p);
        return;
    }
    free_slow(p);
}

static void *arena_realloc(void *old, size_t size)
{
    void *p = malloc(size);
    if (p && old) {
        size_t n = ((size_t *)old)[-1] >> 3;
        memcpy(p, old, n < size ? n : size);
    }
    return p;
}

/* Every realloc the fast path below does not take: counted with the general checks. */
static __attribute__((noinline)) void *realloc_slow(void *old, size_t size)
{
    if (AG_UNLIKELY(arena_owns(old)))
        return arena_realloc(old, size);
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, 16);
    /* A realloc that fails keeps `old`, whose sample is then lost: forgetting it after the call
     * would race with another thread that got the address back. */
    if (old)
        ag_prof_free(old);
    if (ag_sample_only) {
        void *p = ag_real.realloc(old, size);
        if (p != NULL && !ag_tls.busy)
            ag_prof_count(p, size);
        return p;
    }
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL))
        return ag_real.realloc(old, size);
    size_t old_usable = old ? usable(old) : 0;
    void *p = ag_real.realloc(old, size);
    COUNT(s, at, reallocs, 1);
    COUNT(s, at, requested, size);
    if (p) {
        COUNT(s, at, bytes_in, usable(p) + AG_SIZE_FIELD);
        if (old) {
            COUNT(s, at, moved, 1);
            COUNT(s, at, bytes_out, old_usable + AG_SIZE_FIELD);
        } else {
            COUNT(s, at, blocks_in, 1);
        }
        ag_prof_count(p, size);
    } else if (old && size == 0) {
        /* glibc's realloc(p, 0) frees p and returns NULL. A failed realloc keeps p. */
        COUNT(s, at, bytes_out, old_usable + AG_SIZE_FIELD);
        COUNT(s, at, blocks_out, 1);
    }
    return p;
}

/* A glibc chunk's size plus AG_SIZE_FIELD less the mmapped chunk's extra 8 bytes: usable + 8
 * with no branch (glibc_usable's arithmetic). */
#define CHUNK_SIZED(head) (((head) & ~(size_t)7) - (((head) & 2) << 2))

/* realloc's body, also reallocarray's (a call of realloc by name from here would be the
 * program's realloc in an attached agent). The fast path is malloc's: the thread's own slot in
 * `count` (glibc serves, not busy, preloaded), an old block not mmapped (nor an arena block,
 * which looks mmapped), plain adds; the new block's size from its header. */
static inline __attribute__((always_inline)) void *realloc_hook(void *old, size_t size)
{
    struct ag_slot *s = ag_tls.count;
    if (AG_UNLIKELY(s == NULL || old == NULL))
        return realloc_slow(old, size);
    size_t old_head = ((const size_t *)old)[-1];
    if (AG_UNLIKELY(old_head & 2))
        return realloc_slow(old, size);
    ag_prof_free(old); /* before the call: see realloc_slow */
    void *p = ag_real.realloc(old, size);
    add(&s->reallocs, 1);
    add(&s->requested, size);
    if (AG_LIKELY(p != NULL)) {
        add(&s->moved, 1);
        add(&s->bytes_in, CHUNK_SIZED(((const size_t *)p)[-1]));
        add(&s->bytes_out, FAST_CHUNK(old_head));
        return ag_prof_count_p(p, size);
    }
    if (size == 0) { /* glibc's realloc(p, 0) freed p; a failed realloc keeps it */
        add(&s->bytes_out, FAST_CHUNK(old_head));
        add(&s->blocks_out, 1);
    }
    return NULL;
}

AG_EXPORT void *realloc(void *old, size_t size)
{
    return realloc_hook(old, size);
}

AG_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_hook(old, total);
}

/* The aligned calls run with the guard up: an allocator may implement one with another through
 * the PLT, which would count the block twice. */
#define ALIGNED_CALL(expr)                                                                         \
    do {                                                                                           \
        ag_busy_enter();                                                                           \
        expr;                                                                                      \
        ag_busy_leave();                                                                           \
    } while (0)

AG_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (AG_UNLIKELY(!ready())) {
        *out = arena_alloc(size, align);
        return *out ? 0 : ENOMEM;
    }
    int rc;
    ALIGNED_CALL(rc = ag_real.posix_memalign(out, align, size));
    if (rc == 0)
        (void)counted_alloc(*out, size);
    return rc;
}

AG_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, align);
    void *p;
    ALIGNED_CALL(p = ag_real.aligned_alloc(align, size));
    return counted_alloc(p, size);
}

AG_EXPORT void *memalign(size_t align, size_t size)
{
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, align);
    void *p;
    ALIGNED_CALL(p = ag_real.memalign(align, size));
    return counted_alloc(p, size);
}

AG_EXPORT void *valloc(size_t size)
{
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, 4096);
    void *p;
    ALIGNED_CALL(p = ag_real.valloc(size));
    return counted_alloc(p, size);
}

AG_EXPORT void *pvalloc(size_t size)
{
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, 4096);
    void *p;
    ALIGNED_CALL(p = ag_real.pvalloc(size));
    return counted_alloc(p, size);
}

/* Hidden names of the hooks for the GOT table of an attach (got_hooks.c): in a library dlopened
 * RTLD_LOCAL the exported names resolve to the program's definitions. */
AG_HOOK_ALIAS(malloc);
AG_HOOK_ALIAS(calloc);
AG_HOOK_ALIAS(realloc);
AG_HOOK_ALIAS(reallocarray);
AG_HOOK_ALIAS(free);
AG_HOOK_ALIAS(posix_memalign);
AG_HOOK_ALIAS(aligned_alloc);
AG_HOOK_ALIAS(memalign);
AG_HOOK_ALIAS(valloc);
AG_HOOK_ALIAS(pvalloc);
