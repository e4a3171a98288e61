/*
 * The boot heap, shared by the record shim (record/bootstrap.c) and the watch agent
 * (agent/hooks.c): static memory for the allocations made before the real allocator is known.
 *
 * Resolving the real malloc with dlsym may itself allocate (glibc's dlerror buffer uses calloc),
 * which re-enters our malloc before there is one to call. Those few calls get blocks of a static
 * bump heap, never returned to the real allocator: free recognises them by address. Each library
 * keeps its own heap (its own array and size) and chooses the word stored before a block: the
 * record shim stores the size (realloc copies that much), the agent the size in glibc's chunk
 * header layout with the IS_MMAPPED bit set, so its fast path, which reads the header, sends the
 * block to the slow path.
 */
#ifndef ALLOCLENS_BOOT_HEAP_H
#define ALLOCLENS_BOOT_HEAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A block of `size` bytes aligned to `align` (16 at least) from `heap` (`bytes` long, `*used` of
 * it taken), preceded by the word `header`; NULL once the heap is spent. Lock-free: racing
 * threads take disjoint ranges. */
static inline void *boot_heap_alloc(unsigned char *heap, size_t bytes, _Atomic size_t *used,
                                    size_t size, size_t align, size_t header)
{
    if (align < 16)
        align = 16;
    size_t need = size + align + 16;
    size_t start = atomic_fetch_add(used, need);
    if (start + need > bytes)
        return NULL;
    uintptr_t p = ((uintptr_t)heap + start + 16 + align - 1) & ~(uintptr_t)(align - 1);
    ((size_t *)p)[-1] = header;
    return (void *)p;
}

/* Whether `p` is a block of `heap` (`bytes` long). */
static inline int boot_heap_owns(const unsigned char *heap, size_t bytes, const void *p)
{
    return (uintptr_t)p - (uintptr_t)heap < bytes;
}

#endif
