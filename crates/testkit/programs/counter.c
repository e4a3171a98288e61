/*
 * An independent count of the allocator calls each thread makes, for comparison with a trace:
 * preloaded after the shim (LD_PRELOAD=shim:counter), it sees every call the shim passes on,
 * recorded or not, and forwards it to glibc's own entry points. At exit it writes one line per
 * thread to $COUNTER_OUT: "tid calls null_frees".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);
void *__libc_memalign(size_t, size_t);
void *__libc_valloc(size_t);
void *__libc_pvalloc(size_t);

struct slot {
    _Atomic int tid;
    _Atomic long calls, null_frees;
};
static struct slot slots[512];

static struct slot *mine(void)
{
    int tid = (int)syscall(SYS_gettid);
    for (int i = 0; i < 512; i++) {
        int t = atomic_load(&slots[i].tid);
        if (t == tid)
            return &slots[i];
        if (t == 0) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&slots[i].tid, &zero, tid) || zero == tid)
                return &slots[i];
        }
    }
    return NULL;
}

static void count(int null_free)
{
    struct slot *s = mine();
    if (s) {
        s->calls++;
        s->null_frees += null_free;
    }
}

void *malloc(size_t n) { count(0); return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { count(0); return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { count(0); return __libc_realloc(p, n); }
void free(void *p) { count(p == NULL); __libc_free(p); }
void *memalign(size_t a, size_t n) { count(0); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { count(0); return __libc_memalign(a, n); }
void *valloc(size_t n) { count(0); return __libc_valloc(n); }
void *pvalloc(size_t n) { count(0); return __libc_pvalloc(n); }
int posix_memalign(void **out, size_t a, size_t n)
{
    count(0);
    *out = __libc_memalign(a, n);
    return *out ? 0 : 12;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("COUNTER_OUT");
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char line[96];
    for (int i = 0; i < 512 && slots[i].tid; i++) {
        int n = snprintf(line, sizeof line, "%d %ld %ld\n", (int)slots[i].tid,
                         (long)slots[i].calls, (long)slots[i].null_frees);
        if (write(fd, line, (size_t)n) < 0)
            break;
    }
    close(fd);
}
