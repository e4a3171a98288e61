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

enum next_op {
    NEW,
    NEW_ARRAY,
    NEW_NOTHROW,
    NEW_ARRAY_NOTHROW,
    NEW_ALIGNED,
    NEW_ARRAY_ALIGNED,
    NEW_ALIGNED_NOTHROW,
    NEW_ARRAY_ALIGNED_NOTHROW,
    DELETE,
    DELETE_ARRAY,
    DELETE_SIZED,
    DELETE_ARRAY_SIZED,
    DELETE_NOTHROW,
    DELETE_ARRAY_NOTHROW,
    DELETE_ALIGNED,
    DELETE_ARRAY_ALIGNED,
    DELETE_SIZED_ALIGNED,
    DELETE_ARRAY_SIZED_ALIGNED,
    DELETE_ALIGNED_NOTHROW,
    DELETE_ARRAY_ALIGNED_NOTHROW,
    NEXT_OPS
};

/* Itanium C++ ABI names (size_t is unsigned long: 'm'; std::align_val_t is passed as a size_t). */
static const char *const next_names[NEXT_OPS] = {
    [NEW] = "_Znwm",
    [NEW_ARRAY] = "_Znam",
    [NEW_NOTHROW] = "_ZnwmRKSt9nothrow_t",
    [NEW_ARRAY_NOTHROW] = "_ZnamRKSt9nothrow_t",
    [NEW_ALIGNED] = "_ZnwmSt11align_val_t",
    [NEW_ARRAY_ALIGNED] = "_ZnamSt11align_val_t",
    [NEW_ALIGNED_NOTHROW] = "_ZnwmSt11align_val_tRKSt9nothrow_t",
    [NEW_ARRAY_ALIGNED_NOTHROW] = "_ZnamSt11align_val_tRKSt9nothrow_t",
    [DELETE] = "_ZdlPv",
    [DELETE_ARRAY] = "_ZdaPv",
    [DELETE_SIZED] = "_ZdlPvm",
    [DELETE_ARRAY_SIZED] = "_ZdaPvm",
    [DELETE_NOTHROW] = "_ZdlPvRKSt9nothrow_t",
    [DELETE_ARRAY_NOTHROW] = "_ZdaPvRKSt9nothrow_t",
    [DELETE_ALIGNED] = "_ZdlPvSt11align_val_t",
    [DELETE_ARRAY_ALIGNED] = "_ZdaPvSt11align_val_t",
    [DELETE_SIZED_ALIGNED] = "_ZdlPvmSt11align_val_t",
    [DELETE_ARRAY_SIZED_ALIGNED] = "_ZdaPvmSt11align_val_t",
    [DELETE_ALIGNED_NOTHROW] = "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    [DELETE_ARRAY_ALIGNED_NOTHROW] = "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static void *_Atomic next_fns[NEXT_OPS];
/* Set (before next_fns) when the next definition is the C++ runtime's, which calls malloc/free. */
static _Atomic char next_is_runtime[NEXT_OPS];

/* True for a definition in libstdc++ or libc++ (their operators allocate with malloc). */
static int in_cxx_runtime(void *f)
{
    Dl_info info;
    if (dladdr(f, &info) == 0 || info.dli_fname == NULL)
        return 0;
    const char *base = info.dli_fname;
    for (const char *c = base; *c; c++)
        if (*c == '/')
            base = c + 1;
    return strncmp(base, "libstdc++.", 10) == 0 || strncmp(base, "libc++.", 7) == 0;
}

static __attribute__((noinline)) void *resolve(enum next_op op)
{
    if (ag_bootstrap() != 0) /* dlsym below may allocate: the real malloc must be known */
        return NULL;
    ag_busy_enter();
    void *f = dlsym(RTLD_NEXT, next_names[op]);
    int runtime = f != NULL && in_cxx_runtime(f);
    ag_busy_leave();
    if (f != NULL) {
        atomic_store_explicit(&next_is_runtime[op], (char)runtime, memory_order_relaxed);
        atomic_store_explicit(&next_fns[op], f, memory_order_release);
    }
    return f;
}

/* The next definition of `op`, or NULL when nothing after the agent defines it (then the
 * operators fall back to the C calls, which is what libstdc++'s do). */
static inline void *next_fn(enum next_op op)
{
    void *f = atomic_load_explicit(&next_fns[op], memory_order_acquire);
    return AG_LIKELY(f != NULL) ? f : resolve(op);
}

/* The next definition is the C++ runtime's: pass the call on untouched. */
static inline int pass_on(enum next_op op)
{
    return atomic_load_explicit(&next_is_runtime[op], memory_order_relaxed);
}

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

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);

static inline void *new_plain(enum next_op op, size_t size)
{
    new_fn f = (new_fn)next_fn(op);
    if (f && pass_on(op))
        return f(size);
    void *p;
    {
        GUARD_BLOCK;
        p = f ? f(size) : or_abort(ag_real.malloc ? ag_real.malloc(size) : NULL);
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
        p = f ? f(size, tag) : ag_real.malloc ? ag_real.malloc(size) : NULL;
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

typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_nothrow_fn)(void *, const void *);
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);
typedef void (*delete_aligned_nothrow_fn)(void *, size_t, const void *);

#define CXX_EXPORT AG_EXPORT
#include "cxx_operators.inc" /* shim/common, on the include path */
