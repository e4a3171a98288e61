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

AG_HIDDEN struct ag_real ag_real;
AG_HIDDEN int ag_glibc_serves; /* see usable(); set before ag_real.malloc */
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

AG_HIDDEN int ag_bootstrap(void)
{
    if (AG_LIKELY(ag_real.malloc != NULL))
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
    /* malloc last: the fast path tests it. */
    atomic_store_explicit((_Atomic(void *) *)&ag_real.malloc, next_malloc, memory_order_release);
    bootstrapping = 0;
    if (!(ag_real.malloc && ag_real.free && ag_real.usable))
        return -1;
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

static inline int ready(void)
{
    return AG_LIKELY(ag_real.malloc != NULL) || ag_bootstrap() == 0;
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

AG_HIDDEN void ag_counters_read(struct ag_counters *out)
{
    memset(out, 0, sizeof *out);
    struct ag_slot *s = atomic_load_explicit((_Atomic(struct ag_slot *) *)&all_slots,
                                             memory_order_acquire);
    struct ag_slot *sh = &shared;
    for (int pass = 0; pass < 2; pass++) {
        for (; s; s = pass ? NULL : s->next_all) {
            out->allocs += __atomic_load_n(&s->allocs, __ATOMIC_RELAXED);
            out->frees += __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
            out->reallocs += __atomic_load_n(&s->reallocs, __ATOMIC_RELAXED);
            out->blocks_in += __atomic_load_n(&s->blocks_in, __ATOMIC_RELAXED);
            out->blocks_out += __atomic_load_n(&s->blocks_out, __ATOMIC_RELAXED);
            out->bytes_in += __atomic_load_n(&s->bytes_in, __ATOMIC_RELAXED);
            out->bytes_out += __atomic_load_n(&s->bytes_out, __ATOMIC_RELAXED);
            out->requested += __atomic_load_n(&s->requested, __ATOMIC_RELAXED);
        }
        s = sh;
    }
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

static __attribute__((noinline, cold)) void counted_alloc_slow(void *p, size_t requested)
{
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL || p == NULL))
        return;
    COUNT(s, at, allocs, 1);
    COUNT(s, at, bytes_in, usable(p));
    COUNT(s, at, requested, requested);
    ag_prof_count(p, requested);
}

static __attribute__((noinline, cold)) void counted_free_slow(void *p)
{
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL || p == NULL))
        return;
    COUNT(s, at, frees, 1);
    COUNT(s, at, bytes_out, usable(p));
}

/* The fast path: the thread's own slot in `count` (busy is 0 and glibc serves, see
 * ag_busy_leave), a block not mmapped (its usable size is the chunk size less the 8-byte size
 * field; the arena's blocks look mmapped), plain adds. Everything else goes through the slow paths
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

#define FAST_USABLE(head) (((head) & ~(size_t)7) - sizeof(size_t))

static __attribute__((noinline, cold)) void *counted_alloc_slow_p(void *p, size_t requested)
{
    counted_alloc_slow(p, requested);
    return p;
}

/* Counts the block p and returns it (the slow path as a tail call: no stack frame for it). */
static inline __attribute__((always_inline)) void *counted_alloc(void *p, size_t requested)
{
    size_t head;
    struct ag_slot *s = fast_slot(p, &head);
    if (AG_LIKELY(s != NULL)) {
        add(&s->allocs, 1);
        add(&s->bytes_in, FAST_USABLE(head));
        add(&s->requested, requested);
        ag_prof_count(p, requested);
        return p;
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
        add(&s->bytes_out, FAST_USABLE(head));
    } else {
        counted_free_slow(p);
    }
}

/* ---------------------------------------------------------------------- hooks */

static __attribute__((noinline, cold)) void *malloc_bootstrap(size_t size)
{
    if (!ready())
        return arena_alloc(size, 16);
    void *p = ag_real.malloc(size);
    return counted_alloc(p, size);
}

AG_EXPORT __attribute__((hot)) void *malloc(size_t size)
{
    void *(*real)(size_t) = ag_real.malloc; /* set once, at bootstrap */
    if (AG_UNLIKELY(real == NULL))
        return malloc_bootstrap(size);
    return counted_alloc(real(size), size);
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
        add(&s->bytes_out, FAST_USABLE(head));
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

AG_EXPORT void *realloc(void *old, size_t size)
{
    if (AG_UNLIKELY(arena_owns(old)))
        return arena_realloc(old, size);
    if (AG_UNLIKELY(!ready()))
        return arena_alloc(size, 16);
    /* A realloc that fails keeps `old`, whose sample is then lost: forgetting it after the call
     * would race with another thread that got the address back. */
    if (old)
        ag_prof_free(old);
    int at;
    struct ag_slot *s = slot(&at);
    if (AG_UNLIKELY(s == NULL))
        return ag_real.realloc(old, size);
    size_t old_usable = old ? usable(old) : 0;
    void *p = ag_real.realloc(old, size);
    COUNT(s, at, reallocs, 1);
    COUNT(s, at, requested, size);
    if (p) {
        COUNT(s, at, bytes_in, usable(p));
        COUNT(s, at, bytes_out, old_usable);
        if (!old)
            COUNT(s, at, blocks_in, 1);
        ag_prof_count(p, size);
    } else if (old && size == 0) {
        /* glibc's realloc(p, 0) frees p and returns NULL. A failed realloc keeps p. */
        COUNT(s, at, bytes_out, old_usable);
        COUNT(s, at, blocks_out, 1);
    }
    return p;
}

AG_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, total);
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
