/*
 * Bootstrap: find the next allocator in the chain with dlsym(RTLD_NEXT).
 *
 * dlsym itself may allocate (glibc's dlerror buffer uses calloc), which re-enters our malloc before
 * the real one is known. Those few calls are served from a static bump arena and never freed to the
 * real allocator (free() recognises arena pointers by address): the boot heap of common/boot_heap.h,
 * which the watch agent uses too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "boot_heap.h"
#include "internal.h"

static void resolve_free(void *p);

/* free is never NULL, so that the free hook calls it without a test: until the bootstrap it is
 * resolve_free. */
AL_HIDDEN struct al_real al_real = {.free = resolve_free};

/* A free before the bootstrap resolves the next free first; during it (dlsym's own frees) the
 * block is dropped, as the boot arena's blocks are. */
static void resolve_free(void *p)
{
    if (al_bootstrap() == 0)
        al_real.free(p);
}

/* volatile: the compiler must not drop the store around dlsym, which re-enters us through malloc. */
static __thread volatile int bootstrapping __attribute__((tls_model(AL_TLS_MODEL)));

/* ------------------------------------------------------------------------------- static arena */

#define ARENA_BYTES AL_BOOT_ARENA_BYTES
AL_HIDDEN _Alignas(64) unsigned char al_boot_arena[ARENA_BYTES];
static _Atomic size_t arena_used;

/* Each arena block is preceded by its size (so realloc can copy it). */
AL_HIDDEN void *al_arena_alloc(size_t size, size_t align)
{
    return boot_heap_alloc(al_boot_arena, ARENA_BYTES, &arena_used, size, align, size);
}

AL_HIDDEN size_t al_arena_size(const void *p)
{
    return ((const size_t *)p)[-1];
}

/* ---------------------------------------------------------------------------------- dlsym */

AL_HIDDEN int al_bootstrapping(void)
{
    return bootstrapping;
}

#define RESOLVE(field, name) al_real.field = (__typeof__(al_real.field))dlsym(AL_NEXT_HANDLE, name)

AL_HIDDEN int al_bootstrap(void)
{
    if (AL_LIKELY(al_real.malloc != NULL)) /* stored last */
        return 0;
    if (bootstrapping)
        return -1;
    bootstrapping = 1;
    /* Plain stores: racing threads resolve the same values. free and malloc last, since the fast
     * path tests them. */
    RESOLVE(calloc, "calloc");
    RESOLVE(realloc, "realloc");
    RESOLVE(reallocarray, "reallocarray");
    RESOLVE(posix_memalign, "posix_memalign");
    RESOLVE(aligned_alloc, "aligned_alloc");
    RESOLVE(memalign, "memalign");
    RESOLVE(valloc, "valloc");
    RESOLVE(pvalloc, "pvalloc");
    RESOLVE(free_sized, "free_sized");
    RESOLVE(free_aligned_sized, "free_aligned_sized");
    /* Resolved here, not on first use: a vfork child must not call dlsym (the loader's lock may
     * be held by another thread of the parent). */
    RESOLVE(execve, "execve");
    RESOLVE(execvpe, "execvpe");
    RESOLVE(posix_spawn, "posix_spawn");
    RESOLVE(posix_spawnp, "posix_spawnp");
    RESOLVE(exit_, "_exit");
    RESOLVE(Exit_, "_Exit");
    void (*next_free)(void *) = (void (*)(void *))dlsym(AL_NEXT_HANDLE, "free");
    if (next_free != NULL)
        al_real.free = next_free;
    if (al_real.free != resolve_free) /* malloc only with free: the hooks test malloc */
        RESOLVE(malloc, "malloc");
    bootstrapping = 0;
    return al_real.malloc != NULL ? 0 : -1;
}
