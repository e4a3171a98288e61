/*
 * The interposed heap entry points. Each forwards to the next allocator in the chain (al_real,
 * resolved with dlsym(RTLD_NEXT)) and appends one record to the calling thread's ring.
 *
 * Order of events (what makes the trace causal): an allocation takes its sequence number after
 * the real call returned, a free before the real free runs. So when a block moves from one thread
 * to another, or an address is reused, the counter has already passed the earlier event.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* First event of a thread or of the image, or tracing off / re-entered. */
AL_HIDDEN __attribute__((noinline)) void al_record_slow(uint64_t op, const void *addr, size_t size,
                                                      const void *old_addr)
{
    struct al_tls *t = &al_tls;
    if (t->busy)
        return;
    /* The set-up below makes system calls; the program sees errno as the allocator left it. */
    int saved_errno = errno;
    int state = atomic_load(&al_proc.state);
    if (state == AL_UNINIT) {
        al_proc_init();
        state = atomic_load(&al_proc.state);
    }
    if (state == AL_ACTIVE && t->ring == NULL) {
        t->busy++;
        al_ring_attach(t);
        t->busy--;
    }
    if (state == AL_ACTIVE && t->ring != NULL)
        al_record(op, addr, size, old_addr);
    errno = saved_errno;
}

/* The aligned entry points run with the guard up: an allocator may implement one with another
 * through the PLT (glibc's valloc calls memalign paths, others call posix_memalign), which would
 * record the call twice. */
static inline int ready(void)
{
    return AL_LIKELY(al_real.malloc != NULL) || al_bootstrap() == 0;
}

/* --------------------------------------------------------------------------------- hooks */

AL_EXPORT void *malloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 16);
    void *p = al_real.malloc(size);
    al_record(AL_OP_MALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *calloc(size_t n, size_t size)
{
    if (AL_UNLIKELY(!ready())) {
        size_t total;
        if (__builtin_mul_overflow(n, size, &total))
            return NULL;
        return al_arena_alloc(total, 16); /* static storage: already zero */
    }
    void *p = al_real.calloc(n, size);
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        total = SIZE_MAX;
    al_record(AL_OP_CALLOC, p, total, NULL);
    return p;
}

static void *arena_realloc(void *old, size_t size)
{
    void *p = malloc(size);
    if (p && old) {
        size_t n = al_arena_size(old);
        memcpy(p, old, n < size ? n : size);
    }
    return p;
}

AL_EXPORT void *realloc(void *old, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(old)))
        return arena_realloc(old, size);
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 16);
    void *p = al_real.realloc(old, size);
    al_record(AL_OP_REALLOC, p, size, old);
    return p;
}

AL_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (AL_UNLIKELY(al_arena_owns(old)))
        return arena_realloc(old, total);
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(total, 16);
    /* realloc, not the real reallocarray: glibc's calls realloc through the PLT, which would
     * record the call twice. The overflow check above is what reallocarray adds. */
    void *p = al_real.realloc(old, total);
    al_record(AL_OP_REALLOCARRAY, p, total, old);
    return p;
}

AL_EXPORT void free(void *p)
{
    if (AL_UNLIKELY(al_arena_owns(p)))
        return; /* bootstrap arena: never returned */
    if (AL_UNLIKELY(!ready()))
        return;
    al_record(AL_OP_FREE, p, 0, NULL);
    al_real.free(p);
}

AL_EXPORT void free_sized(void *p, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(p)) || AL_UNLIKELY(!ready()))
        return;
    al_record(AL_OP_FREE_SIZED, p, size, NULL);
    if (al_real.free_sized)
        al_real.free_sized(p, size);
    else
        al_real.free(p);
}

AL_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
    if (AL_UNLIKELY(al_arena_owns(p)) || AL_UNLIKELY(!ready()))
        return;
    al_record(AL_OP_FREE_ALIGNED_SIZED, p, size, NULL);
    if (al_real.free_aligned_sized)
        al_real.free_aligned_sized(p, align, size);
    else
        al_real.free(p);
}

AL_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready())) {
        *out = al_arena_alloc(size, align);
        return *out ? 0 : ENOMEM;
    }
    al_tls.busy++;
    int rc = al_real.posix_memalign(out, align, size);
    al_tls.busy--;
    al_record(AL_OP_POSIX_MEMALIGN, rc == 0 ? *out : NULL, size, NULL);
    return rc;
}

AL_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, align);
    al_tls.busy++;
    void *p = al_real.aligned_alloc(align, size);
    al_tls.busy--;
    al_record(AL_OP_ALIGNED_ALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *memalign(size_t align, size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, align);
    al_tls.busy++;
    void *p = al_real.memalign(align, size);
    al_tls.busy--;
    al_record(AL_OP_MEMALIGN, p, size, NULL);
    return p;
}

AL_EXPORT void *valloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 4096);
    al_tls.busy++;
    void *p = al_real.valloc(size);
    al_tls.busy--;
    al_record(AL_OP_VALLOC, p, size, NULL);
    return p;
}

AL_EXPORT void *pvalloc(size_t size)
{
    if (AL_UNLIKELY(!ready()))
        return al_arena_alloc(size, 4096);
    al_tls.busy++;
    void *p = al_real.pvalloc(size);
    al_tls.busy--;
    al_record(AL_OP_PVALLOC, p, size, NULL);
    return p;
}

/* ------------------------------------------------------------------------- process exit */

/* _exit skips destructors: tell the recorder that this end is deliberate (not a crash) first. */
AL_EXPORT void _exit(int status)
{
    al_send_end(AL_END__EXIT);
    if (al_real.exit_ || al_bootstrap() == 0 || al_real.exit_)
        al_real.exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

AL_EXPORT void _Exit(int status)
{
    al_send_end(AL_END__EXIT);
    if (al_real.Exit_ || al_bootstrap() == 0 || al_real.Exit_)
        al_real.Exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
