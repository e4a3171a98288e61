/*
 * C++ operator new and delete, interposed like malloc and free.
 *
 * libstdc++'s operators call malloc and free, which the shim sees anyway; but tcmalloc, jemalloc,
 * mimalloc and tbbmalloc's proxy define the operators themselves and serve them without calling
 * malloc, so behind `record -a ALLOCATOR` every new and delete would be missed. Each operator here
 * finds the next definition in the chain (dlsym(RTLD_NEXT), on first use: the C++ runtime may be
 * dlopened late):
 * - the C++ runtime's own (libstdc++, libc++): passed straight on; its malloc and free are
 *   recorded, so the trace is exactly what it was without this file;
 * - an allocator's: called with the guard up (so a malloc it makes inside is not recorded a
 *   second time) and recorded as the C call libstdc++ would have made: new and new[] as malloc,
 *   the aligned forms as aligned_alloc, every delete as free. A C++ program's trace then counts
 *   the same events whatever allocator serves it.
 *
 * A throwing new may unwind through this file (std::bad_alloc), so it is built with -fexceptions:
 * the guard is released by a cleanup that also runs during unwinding. The exception object is
 * allocated inside the guarded call and freed outside it: behind an allocator that defines the
 * operators, each bad_alloc leaves one free of an unrecorded block.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CXX_BOOTSTRAP() al_bootstrap()
#define CXX_GUARD_ENTER() (al_tls.busy++)
#define CXX_GUARD_LEAVE() (al_tls.busy--)
#define CXX_LIKELY AL_LIKELY
#define CXX_NEXT_HANDLE AL_NEXT_HANDLE
#include "cxx_next.inc" /* shim/common, on the include path */

static void release_guard(struct al_tls **t)
{
    (*t)->busy--;
}

/* Raises the guard until the end of the enclosing block, also when an exception leaves it. */
#define GUARD_BLOCK                                                                                \
    struct al_tls *guard_ __attribute__((cleanup(release_guard), unused)) = &al_tls;             \
    guard_->busy++

/* Without a next operator new (no C++ runtime after the shim), a throwing new cannot throw. */
static void *or_abort(void *p)
{
    if (p == NULL) {
        al_write_stderr("alloclens: operator new failed and no C++ runtime follows the shim to "
                        "throw std::bad_alloc",
                        "");
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
        p = f ? f(size) : or_abort(al_real.malloc ? al_real.malloc(size) : NULL);
    }
    al_record(AL_OP_MALLOC, p, size, NULL);
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
        p = f ? f(size, tag) : al_real.malloc ? al_real.malloc(size) : NULL;
    }
    al_record(AL_OP_MALLOC, p, size, NULL);
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
              : or_abort(al_real.aligned_alloc ? al_real.aligned_alloc(align, size) : NULL);
    }
    al_record(AL_OP_ALIGNED_ALLOC, p, size, NULL);
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
              : al_real.aligned_alloc ? al_real.aligned_alloc(align, size) : NULL;
    }
    al_record(AL_OP_ALIGNED_ALLOC, p, size, NULL);
    return p;
}

/* Every delete: recorded as a free before the block is released (the ordering rule of hooks.c),
 * then passed on with all its arguments. */
#define DELETE_BODY(op, type, ...)                                                                 \
    do {                                                                                           \
        type f = (type)next_fn(op);                                                                \
        if (f && pass_on(op)) {                                                                    \
            f(__VA_ARGS__);                                                                        \
            break;                                                                                 \
        }                                                                                          \
        al_record(AL_OP_FREE, p, AL_ATTACHED && p ? al_usable_size(p) : 0, NULL);                 \
        GUARD_BLOCK;                                                                               \
        if (f)                                                                                     \
            f(__VA_ARGS__);                                                                        \
        else if (al_real.free)                                                                     \
            al_real.free(p);                                                                       \
    } while (0)

#define CXX_EXPORT AL_EXPORT
#include "cxx_operators.inc"
