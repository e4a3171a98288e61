/* sigsafe.so: an allocator that a signal handler may call, loaded behind the shim by the tests of
 * calls made in signal handlers. glibc's malloc is not async-signal-safe: a handler's calloc that
 * interrupts the program's first malloc (tcache_init, which holds the arena lock) waits forever
 * for that lock, and one that interrupts _int_malloc can corrupt the heap. This one never locks:
 * blocks are carved from one reserved mapping by an atomic bump, and freeing the topmost block
 * moves the bump back (a CAS), so a malloc/free loop reuses the same memory. Any other block is
 * never reused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RESERVED (1ul << 34) /* address space, not memory: MAP_NORESERVE */
#define HEADER 32ul          /* a multiple of 16: blocks stay 16-byte aligned */

struct header {
    size_t start; /* offset where the block's carving began */
    size_t end;   /* offset where it ended: the top of the arena while it is the topmost block */
    size_t size;  /* bytes asked for */
    size_t unused;
};

static _Atomic(char *) base;
static _Atomic size_t top;

static char *arena(void)
{
    char *b = atomic_load(&base);
    if (b)
        return b;
    /* mmap is async-signal-safe; a racing caller's mapping is given back. */
    char *mine = mmap(NULL, RESERVED, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mine == MAP_FAILED)
        return NULL;
    char *expected = NULL;
    if (!atomic_compare_exchange_strong(&base, &expected, mine)) {
        munmap(mine, RESERVED);
        return expected;
    }
    return mine;
}

static struct header *header_of(void *p)
{
    return (struct header *)((char *)p - HEADER);
}

static void *carve(size_t size, size_t align)
{
    char *b = arena();
    if (!b || size > RESERVED || align > RESERVED) {
        errno = ENOMEM;
        return NULL;
    }
    if (align < 16)
        align = 16;
    size_t span = HEADER + align + ((size + 15) & ~15ul);
    size_t start = atomic_fetch_add(&top, span);
    if (start + span > RESERVED) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t first = (uintptr_t)b + start + HEADER;
    char *p = (char *)((first + align - 1) & ~(uintptr_t)(align - 1));
    header_of(p)->start = start;
    header_of(p)->end = start + span;
    header_of(p)->size = size;
    return p;
}

/* Not through free: realloc's own frees would reach the shim's free hook as calls of their own
 * (the tests count the program's calls exactly). */
static void give_back(void *p)
{
    if (!p)
        return;
    /* Only the topmost block goes back: the CAS fails when anything was carved above it. */
    size_t end = header_of(p)->end;
    atomic_compare_exchange_strong(&top, &end, header_of(p)->start);
}

void free(void *p)
{
    give_back(p);
}

void *malloc(size_t size)
{
    return carve(size, HEADER);
}

void *calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = carve(n * size, HEADER);
    if (p)
        memset(p, 0, n * size); /* a block given back by free may be carved again */
    return p;
}

void *realloc(void *old, size_t size)
{
    if (!old)
        return malloc(size);
    if (size == 0) {
        give_back(old);
        return NULL;
    }
    size_t have = header_of(old)->size;
    void *p = carve(size, HEADER);
    if (p) {
        memcpy(p, old, have < size ? have : size);
        give_back(old);
    }
    return p;
}

void *reallocarray(void *old, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, n * size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = carve(size, align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
    return carve(size, align);
}

void *memalign(size_t align, size_t size)
{
    return carve(size, align);
}

void *valloc(size_t size)
{
    return carve(size, (size_t)sysconf(_SC_PAGESIZE));
}

void *pvalloc(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return carve((size + page - 1) & ~(page - 1), page);
}

size_t malloc_usable_size(void *p)
{
    return p ? header_of(p)->size : 0;
}
