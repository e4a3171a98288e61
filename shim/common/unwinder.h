/*
 * libunwind's settings for the two samplers' stack capture (shim/record/stacks.c and
 * shim/agent/profile.c), one place so they cannot drift apart.
 */
#ifndef ALLOCLENS_UNWINDER_H
#define ALLOCLENS_UNWINDER_H

#include <dlfcn.h>
#include <stddef.h>

/* As heaptrack does: a per-thread cache of unwind information (no lock; the default global
 * cache takes one), large enough for a big program's return addresses (with libunwind's default
 * size a python3 sample took 94 k instructions, about 55 k with this one). `handle`: the dlopen
 * handle of libunwind.so.8. */
static inline void unwinder_cache_per_thread(void *handle)
{
    void **space = (void **)dlsym(handle, "_ULx86_64_local_addr_space");
    int (*policy)(void *, int) = (int (*)(void *, int))dlsym(handle, "_ULx86_64_set_caching_policy");
    int (*cache_size)(void *, size_t, int) =
        (int (*)(void *, size_t, int))dlsym(handle, "_ULx86_64_set_cache_size");
    if (space != NULL && policy != NULL)
        policy(*space, 2 /* UNW_CACHE_PER_THREAD */);
    if (space != NULL && cache_size != NULL)
        cache_size(*space, 1024, 0);
}

#endif
