/*
 * C++ operator new and delete, counted like malloc and free (the record shim's shim/record/cxx.c, with
 * counting instead of recording).
 *
 * libstdc++'s operators call malloc and free, which the agent counts anyway; but tcmalloc,
 * jemalloc, mimalloc and tbbmalloc's proxy define the operators themselves and serve them without
 * malloc, so behind them every new and delete would be missed. Each operator here finds the next
 * definition in the chain (dlsym(RTLD_NEXT), on first use):
 * - the C++ runtime's own (libstdc++, libc++): passed straight on; its malloc and free are counted;
 * - an allocator's: called with the guard up (a malloc it makes inside is not counted a second
 *   time) and counted as malloc / free.
 *
 * Built with -fexceptions: a throwing new may unwind through here, and the guard is released by a
 * cleanup that also runs during unwinding.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "agent.h"

#define CXX_BOOTSTRAP() ag_bootstrap()
#define CXX_GUARD_ENTER() ag_busy_enter()
#define CXX_GUARD_LEAVE() ag_busy_leave()
#define CXX_LIKELY AG_LIKELY
/* Attached (not in the chain), the next definition is the program's global one. */
#define CXX_NEXT_HANDLE (ag_sample_only ? RTLD_DEFAULT : RTLD_NEXT)
#include "cxx_next.inc" /* shim/common, on the include path */

static void release_guard(struct ag_tls **t)
{
    (void)t;
    ag_busy_leave();
}

/* Raises the guard until the end of the enclosing block, also when an exception leaves it. */
#define GUARD_BLOCK                                                                                \
    struct ag_tls *guard_ __attribute__((cleanup(release_guard), unused)) = &ag_tls;             \
    ag_busy_enter()

/* Without a next operator new (no C++ runtime after the agent), a throwing new cannot throw. */
static void *or_abort(void *p)
{
    if (p == NULL) {
        static const char msg[] = "alloclens: operator new failed and no C++ runtime follows the "
                                  "watch agent to throw std::bad_alloc\n";
        ssize_t n = write(2, msg, sizeof msg - 1);
        (void)n;
        abort();
    }
    return p;
}

static inline void *new_plain(enum next_op op, size_t size)
{
    new_fn f = (new_fn)next_fn(op);
    if (f && pass_on(op))
        return f(size);
    void *p;
    {
        GUARD_BLOCK;
        p = f ? f(size) : or_abort(ag_real_resolved() ? ag_real.malloc(size) : NULL);
    }
    ag_count_alloc(p, size);
    return p;
}

static inline void *new_nothrow(enum next_op op, size_t size, const void *tag)
{
    new_nothrow_fn f = (new_nothrow_fn)next_fn(op);
    if (f && pass_on(op))
        return f(size, tag);
    void *p;
    {
        GUARD_BLOCK;
        p = f ? f(size, tag) : ag_real_resolved() ? ag_real.malloc(size) : NULL;
    }
    ag_count_alloc(p, size);
    return p;
}

static inline void *new_aligned(enum next_op op, size_t size, size_t align)
{
    new_aligned_fn f = (new_aligned_fn)next_fn(op);
    if (f && pass_on(op))
        return f(size, align);
    void *p;
    {
        GUARD_BLOCK;
        p = f ? f(size, align)
              : or_abort(ag_real.aligned_alloc ? ag_real.aligned_alloc(align, size) : NULL);
    }
    ag_count_alloc(p, size);
    return p;
}

static inline void *new_aligned_nothrow(enum next_op op, size_t size, size_t align,
                                        const void *tag)
{
    new_aligned_nothrow_fn f = (new_aligned_nothrow_fn)next_fn(op);
    if (f && pass_on(op))
        return f(size, align, tag);
    void *p;
    {
        GUARD_BLOCK;
        p = f ? f(size, align, tag)
              : ag_real.aligned_alloc ? ag_real.aligned_alloc(align, size) : NULL;
    }
    ag_count_alloc(p, size);
    return p;
}

/* Every delete: counted as a free before the block is released (its usable size is read while it
 * is live), then passed on with all its arguments. */
#define DELETE_BODY(op, type, ...)                                                                 \
    do {                                                                                           \
        type f = (type)next_fn(op);                                                                \
        if (f && pass_on(op)) {                                                                    \
            f(__VA_ARGS__);                                                                        \
            break;                                                                                 \
        }                                                                                          \
        ag_count_free(p);                                                                          \
        GUARD_BLOCK;                                                                               \
        if (f)                                                                                     \
            f(__VA_ARGS__);                                                                        \
        else if (ag_real.free)                                                                     \
            ag_real.free(p);                                                                       \
    } while (0)

#define CXX_EXPORT AG_EXPORT
#include "cxx_operators.inc" /* shim/common, on the include path */

/* Hidden names for the GOT table of an attach (got_hooks.c; hooks.c says why). */
AG_HOOK_ALIAS(_Znwm);
AG_HOOK_ALIAS(_Znam);
AG_HOOK_ALIAS(_ZnwmRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZnamRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZnwmSt11align_val_t);
AG_HOOK_ALIAS(_ZnamSt11align_val_t);
AG_HOOK_ALIAS(_ZnwmSt11align_val_tRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZnamSt11align_val_tRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZdlPv);
AG_HOOK_ALIAS(_ZdaPv);
AG_HOOK_ALIAS(_ZdlPvm);
AG_HOOK_ALIAS(_ZdaPvm);
AG_HOOK_ALIAS(_ZdlPvRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZdaPvRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZdlPvSt11align_val_t);
AG_HOOK_ALIAS(_ZdaPvSt11align_val_t);
AG_HOOK_ALIAS(_ZdlPvmSt11align_val_t);
AG_HOOK_ALIAS(_ZdaPvmSt11align_val_t);
AG_HOOK_ALIAS(_ZdlPvSt11align_val_tRKSt9nothrow_t);
AG_HOOK_ALIAS(_ZdaPvSt11align_val_tRKSt9nothrow_t);
