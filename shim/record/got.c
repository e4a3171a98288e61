/*
 * The attach shim's GOT hooks (record --pid): what shim/common/got.c points the modules' slots
 * at (got.h says how and why), and when a module dlopened by path is patched at once.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>

#include "got.h"
#include "internal.h"

/* The hooks' definitions in this library (exported names in the preload shim, local here). */
void *_Znwm(size_t);
void *_Znam(size_t);
void *_ZnwmRKSt9nothrow_t(size_t, const void *);
void *_ZnamRKSt9nothrow_t(size_t, const void *);
void *_ZnwmSt11align_val_t(size_t, size_t);
void *_ZnamSt11align_val_t(size_t, size_t);
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
void _ZdlPv(void *);
void _ZdaPv(void *);
void _ZdlPvm(void *, size_t);
void _ZdaPvm(void *, size_t);
void _ZdlPvRKSt9nothrow_t(void *, const void *);
void _ZdaPvRKSt9nothrow_t(void *, const void *);
void _ZdlPvSt11align_val_t(void *, size_t);
void _ZdaPvSt11align_val_t(void *, size_t);
void _ZdlPvmSt11align_val_t(void *, size_t, size_t);
void _ZdaPvmSt11align_val_t(void *, size_t, size_t);
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *, size_t, const void *);
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *, size_t, const void *);
void free_sized(void *, size_t);
void free_aligned_sized(void *, size_t, size_t);

#define HOOK(name) {#name, (void *)name}
GOT_HIDDEN const struct got_hook got_hooks[] = {
    HOOK(malloc), HOOK(calloc), HOOK(realloc), HOOK(reallocarray), HOOK(free),
    HOOK(free_sized), HOOK(free_aligned_sized), HOOK(posix_memalign), HOOK(aligned_alloc),
    HOOK(memalign), HOOK(valloc), HOOK(pvalloc),
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

/* A module dlopened by path is patched at once while the recording is on. */
GOT_HIDDEN int got_patching_allowed(void)
{
    return atomic_load(&al_proc.state) == AL_ACTIVE;
}
