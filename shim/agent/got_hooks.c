/*
 * The heap profile of a process the agent was attached to (watch --pid --profile): nothing
 * interposes its heap calls, so the agent points the modules' GOT slots at its hooks (the shared
 * mechanism of shim/common/got.h, which record --pid uses too), and restores them when the attach
 * ends. The hooks then only sample (ag_sample_only): allocations after the attach are in the
 * table, frees of blocks from before it find nothing there. Everything here runs on the agent
 * thread.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <malloc.h>

#include "agent.h"
#include "got.h"

extern __typeof__(malloc) ag_hook_malloc;
extern __typeof__(calloc) ag_hook_calloc;
extern __typeof__(realloc) ag_hook_realloc;
extern __typeof__(reallocarray) ag_hook_reallocarray;
extern __typeof__(free) ag_hook_free;
extern __typeof__(posix_memalign) ag_hook_posix_memalign;
extern __typeof__(aligned_alloc) ag_hook_aligned_alloc;
extern __typeof__(memalign) ag_hook_memalign;
extern __typeof__(valloc) ag_hook_valloc;
extern __typeof__(pvalloc) ag_hook_pvalloc;
void *ag_hook__Znwm(size_t);
void *ag_hook__Znam(size_t);
void *ag_hook__ZnwmRKSt9nothrow_t(size_t, const void *);
void *ag_hook__ZnamRKSt9nothrow_t(size_t, const void *);
void *ag_hook__ZnwmSt11align_val_t(size_t, size_t);
void *ag_hook__ZnamSt11align_val_t(size_t, size_t);
void *ag_hook__ZnwmSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
void *ag_hook__ZnamSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
void ag_hook__ZdlPv(void *);
void ag_hook__ZdaPv(void *);
void ag_hook__ZdlPvm(void *, size_t);
void ag_hook__ZdaPvm(void *, size_t);
void ag_hook__ZdlPvRKSt9nothrow_t(void *, const void *);
void ag_hook__ZdaPvRKSt9nothrow_t(void *, const void *);
void ag_hook__ZdlPvSt11align_val_t(void *, size_t);
void ag_hook__ZdaPvSt11align_val_t(void *, size_t);
void ag_hook__ZdlPvmSt11align_val_t(void *, size_t, size_t);
void ag_hook__ZdaPvmSt11align_val_t(void *, size_t, size_t);
void ag_hook__ZdlPvSt11align_val_tRKSt9nothrow_t(void *, size_t, const void *);
void ag_hook__ZdaPvSt11align_val_tRKSt9nothrow_t(void *, size_t, const void *);

#define HOOK(name) {#name, (void *)ag_hook_##name}
GOT_HIDDEN const struct got_hook got_hooks[] = {
    HOOK(malloc), HOOK(calloc), HOOK(realloc), HOOK(reallocarray), HOOK(free),
    HOOK(posix_memalign), HOOK(aligned_alloc), HOOK(memalign), HOOK(valloc), HOOK(pvalloc),
    HOOK(_Znwm), HOOK(_Znam), HOOK(_ZnwmRKSt9nothrow_t), HOOK(_ZnamRKSt9nothrow_t),
    HOOK(_ZnwmSt11align_val_t), HOOK(_ZnamSt11align_val_t),
    HOOK(_ZnwmSt11align_val_tRKSt9nothrow_t), HOOK(_ZnamSt11align_val_tRKSt9nothrow_t),
    HOOK(_ZdlPv), HOOK(_ZdaPv), HOOK(_ZdlPvm), HOOK(_ZdaPvm), HOOK(_ZdlPvRKSt9nothrow_t),
    HOOK(_ZdaPvRKSt9nothrow_t), HOOK(_ZdlPvSt11align_val_t), HOOK(_ZdaPvSt11align_val_t),
    HOOK(_ZdlPvmSt11align_val_t), HOOK(_ZdaPvmSt11align_val_t),
    HOOK(_ZdlPvSt11align_val_tRKSt9nothrow_t), HOOK(_ZdaPvSt11align_val_tRKSt9nothrow_t),
    {"dlopen", (void *)got_dlopen_hook},
};
GOT_HIDDEN const unsigned got_hook_count = sizeof got_hooks / sizeof got_hooks[0];

static _Atomic int profiling; /* the GOT holds the hooks */

GOT_HIDDEN int got_patching_allowed(void)
{
    return atomic_load_explicit(&profiling, memory_order_relaxed);
}

AG_HIDDEN int ag_attach_profile_start(const char *dir, const char *exe, uint64_t sample_bytes)
{
    if (ag_prof_attach(dir, exe, sample_bytes) != 0)
        return -1;
    if (got_init() != 0) {
        ag_prof_detach();
        return -1;
    }
    atomic_store(&profiling, 1);
    /* A module that could not be patched (a refused mprotect) is not sampled; the others are. */
    got_patch(NULL);
    if (got_slots() == 0) {
        ag_attach_profile_stop();
        return -1;
    }
    return 0;
}

AG_HIDDEN void ag_attach_profile_tick(void)
{
    if (atomic_load(&profiling))
        got_patch_new_modules();
}

AG_HIDDEN void ag_attach_profile_stop(void)
{
    if (!atomic_exchange(&profiling, 0))
        return;
    got_restore();
    ag_prof_detach();
}

AG_HIDDEN void ag_attach_profile_after_fork(void)
{
    got_after_fork();
}
