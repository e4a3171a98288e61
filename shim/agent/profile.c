/*
 * The agent's heap profile: an always-on sampler (ALLOCLENS_PROFILE_BYTES) that keeps the live
 * sampled blocks, their stacks and what each stack allocated in a table file mapped shared
 * (profile_table.h), which alloclens reads from outside, while the program runs and after it died.
 *
 * Sampling is record --stacks's: a per-thread countdown of requested bytes to the next point of a
 * Poisson process (common/sampling.h), so an allocation of n bytes is sampled with probability
 * 1 - exp(-n / sample_bytes), independently of the others. The hooks' cost when nothing is
 * sampled: one subtraction from a thread-local countdown per allocation, and per free one byte
 * of a 64 KiB counting filter of the sampled addresses (ag_prof_filter): a free looks the table
 * up only when its byte is not 0, and reads no byte at all when no sampler ever started
 * (ag_prof_armed).
 *
 * No lock anywhere: a sampled block takes a key in one of two buckets by compare-and-swap (a block
 * is owned by one thread from its allocation to its free, so its insert and its removal never
 * race), its entry is written under the entry's sequence number, a new stack is reserved in the
 * stack area by an atomic add and indexed by compare-and-swap. The table never grows: a sampled
 * block with both buckets full, or a stack with no room, is counted (dropped_live,
 * dropped_stacks) and the snapshot says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "profile_table.h"
#include "elf_module.h"
#include "sampling.h"
#include "unwinder.h"

AG_HIDDEN _Alignas(64) uint8_t ag_prof_filter[AG_PROF_FILTER_SLOTS];

static uint64_t sample_bytes; /* 0: the sampler is off */
AG_HIDDEN int ag_prof_armed;
static int decided;           /* ag_prof_init ran: before, no thread is told the sampler is off */
static unsigned char *base;   /* the table's mapping */
static int (*unwind)(void **, int);
static uint64_t self_start, self_end; /* the agent's own code: its frames are dropped */
static unsigned long long modules_adds; /* dlpi_adds at the last module scan */
static char table_dir[4096];          /* where the tables are made (a fork child's too) */
static uint32_t table_flags;          /* AG_PROF_FLAG_* of the tables made */

#define HDR ((struct ag_prof_header *)base)

static inline uint64_t *keys(void)
{
    return (uint64_t *)(base + AG_PROF_BUCKETS_OFF);
}

static inline struct ag_prof_live *entries(void)
{
    return (struct ag_prof_live *)(base + AG_PROF_ENTRIES_OFF);
}

static inline uint64_t *index_slots(void)
{
    return (uint64_t *)(base + AG_PROF_INDEX_OFF);
}

static inline struct ag_prof_stack *stack_at(uint64_t offset)
{
    return (struct ag_prof_stack *)(base + AG_PROF_STACKS_OFF + offset);
}

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void counter_add(uint64_t *c, int64_t v)
{
    __atomic_fetch_add(c, (uint64_t)v, __ATOMIC_RELAXED);
}

static void double_add(uint64_t *bits, double v)
{
    uint64_t old = __atomic_load_n(bits, __ATOMIC_RELAXED), new_bits;
    do {
        double d;
        memcpy(&d, &old, 8);
        d += v;
        memcpy(&new_bits, &d, 8);
    } while (!__atomic_compare_exchange_n(bits, &old, new_bits, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

/* ------------------------------------------------------------------------------- modules */

/* Whether a module of that range is in the table already (one writer: no race). */
static int module_known(uint64_t start, uint64_t end)
{
    uint64_t used = HDR->modules_used;
    for (uint64_t at = 0; at + sizeof(struct ag_prof_module) <= used;) {
        const struct ag_prof_module *m = (const void *)(base + AG_PROF_MODULES_OFF + at);
        if (m->bytes == 0)
            break;
        if (m->start == start && m->end == end)
            return 1;
        at += m->bytes;
    }
    return 0;
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    int *first = data;
    (void)size;
    if (*first) {
        *first = 0;
        if (info->dlpi_adds == modules_adds)
            return 1; /* nothing loaded since the last scan */
        modules_adds = info->dlpi_adds;
    }
    uint64_t lo, hi, off;
    int code = elf_code_range(info, &lo, &hi, &off);
    if (!code || module_known(lo, hi))
        return 0;
    const char *path = info->dlpi_name;
    if (path == NULL || path[0] == 0)
        path = HDR->exe;
    if (path[0] != '/')
        return 0; /* the vdso, and names that are no file */
    const unsigned char *id = NULL;
    size_t id_len = elf_build_id(info, &id);
    if (id_len > 64)
        id_len = 0;
    size_t path_len = strnlen(path, 4095);
    uint64_t bytes = sizeof(struct ag_prof_module) + ((id_len + 7) & ~(size_t)7) +
                     ((path_len + 1 + 7) & ~(size_t)7);
    uint64_t at = HDR->modules_used;
    /* Room for this record and an empty `bytes` after it, which ends the list. */
    if (at + bytes + 8 > AG_PROF_MODULES_BYTES)
        return 1;
    struct ag_prof_module *m = (struct ag_prof_module *)(base + AG_PROF_MODULES_OFF + at);
    m->build_id_len = (uint32_t)id_len;
    m->start = lo;
    m->end = hi;
    m->file_offset = off;
    m->bias = info->dlpi_addr;
    unsigned char *tail = (unsigned char *)(m + 1);
    memcpy(tail, id, id_len);
    memcpy(tail + ((id_len + 7) & ~(size_t)7), path, path_len);
    tail[((id_len + 7) & ~(size_t)7) + path_len] = 0;
    __atomic_store_n(&m->bytes, (uint32_t)bytes, __ATOMIC_RELEASE);
    __atomic_store_n(&HDR->modules_used, at + bytes, __ATOMIC_RELEASE);
    return 0;
}

/* Adds the objects loaded since the last scan (the agent thread, every interval). */
static void scan_modules(void)
{
    int first = 1;
    dl_iterate_phdr(module_cb, &first);
}

static int self_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    uint64_t me = (uint64_t)(uintptr_t)&ag_prof_sample;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && me >= a && me < a + ph->p_memsz) {
            self_start = a;
            self_end = a + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------ the table */

/* Writes v in decimal at p; returns the end. */
static char *put_u64(char *p, uint64_t v)
{
    char num[24];
    int i = sizeof num;
    do {
        num[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(p, num + i, sizeof num - (size_t)i);
    return p + (sizeof num - (size_t)i);
}

/* Creates DIR/PID-N.prof, N the first free: an exec'd image keeps the file of the one before it,
 * and a file alloclens did not make is never opened. Returns its descriptor or -1. */
static int open_table(const char *dir)
{
    char path[4200];
    size_t n = strlen(dir);
    if (n + 64 > sizeof path)
        return -1;
    memcpy(path, dir, n);
    char *p = path + n;
    *p++ = '/';
    p = put_u64(p, (uint64_t)getpid());
    *p++ = '-';
    for (uint64_t k = 0; k < 1000; k++) {
        memcpy(put_u64(p, k), ".prof", 6);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

static int map_table(const char *dir, const char *exe)
{
    int fd = open_table(dir);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, AG_PROF_FILE_BYTES) != 0) {
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, AG_PROF_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    base = m;
    struct ag_prof_header *h = HDR;
    h->version = AG_PROF_VERSION;
    h->header_bytes = AG_PROF_HEADER_BYTES;
    h->file_bytes = AG_PROF_FILE_BYTES;
    h->sample_bytes = sample_bytes;
    h->pid = (uint32_t)getpid();
    h->ppid = (uint32_t)getppid();
    h->start_unix_ns = clock_ns(CLOCK_REALTIME);
    h->max_depth = AG_PROF_MAX_DEPTH;
    h->state = AG_PROF_RUNNING;
    h->flags = table_flags;
    h->buckets_off = AG_PROF_BUCKETS_OFF;
    h->bucket_count = AG_PROF_BUCKETS;
    h->bucket_keys = AG_PROF_BUCKET_KEYS;
    h->entries_off = AG_PROF_ENTRIES_OFF;
    h->entry_count = AG_PROF_ENTRIES;
    h->entry_bytes = sizeof(struct ag_prof_live);
    h->index_off = AG_PROF_INDEX_OFF;
    h->index_slots = AG_PROF_INDEX_SLOTS;
    h->stacks_off = AG_PROF_STACKS_OFF;
    h->stacks_bytes = AG_PROF_STACKS_BYTES;
    h->modules_off = AG_PROF_MODULES_OFF;
    h->modules_bytes = AG_PROF_MODULES_BYTES;
    size_t e = strnlen(exe, sizeof h->exe - 1);
    memcpy(h->exe, exe, e);
    h->exe[e] = 0;
    /* The empty stack at offset 0: samples whose stack could not be taken or stored. */
    struct ag_prof_stack *empty = stack_at(0);
    empty->depth_commit = 1;
    h->stacks_used = sizeof(struct ag_prof_stack);
    modules_adds = 0;
    scan_modules();
    /* The magic last: a reader that sees it finds the layout written. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, AG_PROF_MAGIC, 8);
    return 0;
}

/* The stack record of these frames, made if new; its offset, 0 (the empty stack) when none fits. */
static uint64_t intern(void *const *f, int n)
{
    if (n <= 0)
        return 0;
    uint64_t h = sampling_hash_frames(f, n);
    uint64_t *slots = index_slots();
    uint64_t mine = 0; /* our reserved record, once made */
    uint64_t mask = AG_PROF_INDEX_SLOTS - 1;
    for (uint64_t i = h & mask, probes = 0; probes < 64; i = (i + 1) & mask, probes++) {
        uint64_t slot = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
        while (slot == 0) {
            if (mine == 0) {
                uint64_t bytes = sizeof(struct ag_prof_stack) + (uint64_t)n * 8;
                uint64_t at = __atomic_fetch_add(&HDR->stacks_used, bytes, __ATOMIC_RELAXED);
                if (at + bytes > AG_PROF_STACKS_BYTES)
                    return 0;
                struct ag_prof_stack *s = stack_at(at);
                s->hash = h;
                memcpy(s + 1, f, (size_t)n * 8);
                __atomic_store_n(&s->depth_commit, (uint32_t)n + 1, __ATOMIC_RELEASE);
                mine = at;
            }
            uint64_t want = (h >> 32) << 32 | mine / 8;
            if (__atomic_compare_exchange_n(&slots[i], &slot, want, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return mine;
            /* Another stack took the slot first: `slot` holds it now, compared below. */
        }
        if ((slot >> 32) == (h >> 32)) {
            struct ag_prof_stack *s = stack_at((slot & 0xffffffffu) * 8);
            if (s->hash == h && s->depth_commit == (uint32_t)n + 1 &&
                memcmp(s + 1, f, (size_t)n * 8) == 0)
                return (slot & 0xffffffffu) * 8;
        }
    }
    return 0;
}

static inline uint64_t bucket_of(uint64_t addr, int which)
{
    uint64_t h = (addr >> 4) * (which ? 0xC2B2AE3D27D4EB4Full : 0x9E3779B97F4A7C15ull);
    return h >> (64 - 13); /* AG_PROF_BUCKETS = 2^13 */
}

static void filter_add(uint64_t addr, int delta)
{
    uint8_t *f = &ag_prof_filter[AG_PROF_FILTER_INDEX(addr)];
    uint8_t v = __atomic_load_n(f, __ATOMIC_RELAXED);
    do {
        if (v == 255)
            return; /* saturated: stays set for good (a free then just looks the table up) */
    } while (!__atomic_compare_exchange_n(f, &v, (uint8_t)(v + delta), 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

static void live_insert(uint64_t addr, uint64_t size, uint64_t stack)
{
    uint64_t *k = keys();
    for (int which = 0; which < 2; which++) {
        uint64_t b = bucket_of(addr, which) * AG_PROF_BUCKET_KEYS;
        for (uint64_t j = 0; j < AG_PROF_BUCKET_KEYS; j++) {
            uint64_t expected = 0;
            if (__atomic_load_n(&k[b + j], __ATOMIC_RELAXED) != 0 ||
                !__atomic_compare_exchange_n(&k[b + j], &expected, addr, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_RELAXED))
                continue;
            struct ag_prof_live *e = &entries()[b + j];
            uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
            __atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_RELEASE);
            e->stack = (uint32_t)(stack / 8);
            e->size = size;
            e->unix_ns = clock_ns(CLOCK_REALTIME);
            __atomic_store_n(&e->addr, addr, __ATOMIC_RELAXED);
            __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
            filter_add(addr, 1);
            counter_add(&HDR->live_entries, 1);
            return;
        }
    }
    counter_add(&HDR->dropped_live, 1);
}

/* Frames of the calling code, the agent's own dropped. */
static int capture(void **frames, int max)
{
    void *raw[AG_PROF_MAX_DEPTH + 16];
    int n = unwind != NULL ? unwind(raw, max + 16) : 0;
    int skip = 0;
    while (skip < n && (uint64_t)(uintptr_t)raw[skip] >= self_start &&
           (uint64_t)(uintptr_t)raw[skip] < self_end)
        skip++;
    n -= skip;
    if (n > max)
        n = max;
    if (n > 0)
        memcpy(frames, raw + skip, (size_t)n * sizeof *frames);
    return n < 0 ? 0 : n;
}

/* ------------------------------------------------------------------------------ the hooks */

AG_HIDDEN __attribute__((noinline, cold)) void ag_prof_sample(void *p, size_t size)
{
    struct ag_tls *t = &ag_tls;
    if (sample_bytes == 0 || base == NULL) {
        /* Off: this thread never comes here again; before the set-up, at its next call again. */
        t->prof_left = __atomic_load_n(&decided, __ATOMIC_RELAXED) ? INT64_MAX : 0;
        return;
    }
    if (t->prof_rng == 0) {
        /* A new thread: its own stream, whatever its neighbours draw. */
        static uint64_t seeds;
        uint64_t seed = sampling_mix64(((uint64_t)syscall(SYS_gettid) << 32 ^ (uint64_t)getpid()) ^
                                       sampling_mix64(clock_ns(CLOCK_MONOTONIC)) ^
                                       sampling_mix64((uint64_t)(uintptr_t)t +
                                                      __atomic_fetch_add(&seeds, 1, __ATOMIC_RELAXED)));
        t->prof_rng = seed != 0 ? seed : 0x9E3779B97F4A7C15ull;
        /* The countdown this allocation was taken from was not a draw: start one here. */
        t->prof_left = (int64_t)sampling_countdown(&t->prof_rng, sample_bytes) - (int64_t)size;
        if (t->prof_left >= 0)
            return;
    }
    /* The countdown ended inside this allocation: sampled; the next point is a fresh draw. */
    t->prof_left = (int64_t)sampling_countdown(&t->prof_rng, sample_bytes);
    if (p == NULL || t->busy)
        return;
    int saved_errno = errno;
    ag_busy_enter(); /* the unwinder's own allocations are not the program's */
    void *frames[AG_PROF_MAX_DEPTH];
    int n = capture(frames, AG_PROF_MAX_DEPTH);
    uint64_t stack = intern(frames, n);
    if (n > 0 && stack == 0)
        counter_add(&HDR->dropped_stacks, 1);
    double prob = sampling_probability((double)size / (double)sample_bytes);
    if (prob > 0) {
        struct ag_prof_stack *s = stack_at(stack);
        double w = 1 / prob, x = (double)size;
        counter_add(&s->samples, 1);
        double_add(&s->alloc_objects, w);
        double_add(&s->alloc_space, x * w);
        double_add(&s->alloc_objects_var, (1 - prob) * w * w);
        double_add(&s->alloc_space_var, (1 - prob) * x * x * w * w);
    }
    live_insert((uint64_t)(uintptr_t)p, size, stack);
    counter_add(&HDR->samples, 1);
    ag_busy_leave();
    errno = saved_errno;
}

AG_HIDDEN __attribute__((noinline, cold)) void *ag_prof_sample_p(void *p, size_t size)
{
    ag_prof_sample(p, size);
    return p;
}

AG_HIDDEN __attribute__((noinline, cold)) void ag_prof_forget(void *p)
{
    if (base == NULL)
        return;
    uint64_t addr = (uint64_t)(uintptr_t)p, *k = keys();
    for (int which = 0; which < 2; which++) {
        uint64_t b = bucket_of(addr, which) * AG_PROF_BUCKET_KEYS;
        for (uint64_t j = 0; j < AG_PROF_BUCKET_KEYS; j++) {
            if (__atomic_load_n(&k[b + j], __ATOMIC_ACQUIRE) != addr)
                continue;
            struct ag_prof_live *e = &entries()[b + j];
            uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
            __atomic_store_n(&e->seq, seq + 1, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_RELEASE);
            __atomic_store_n(&e->addr, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
            __atomic_store_n(&k[b + j], 0, __ATOMIC_RELEASE);
            filter_add(addr, -1);
            counter_add(&HDR->live_entries, -1);
            return;
        }
    }
}

/* ------------------------------------------------------------------------------ set-up */

static void load_unwinder(void)
{
    /* libunwind's unw_backtrace when installed (fast: a per-thread cache of unwind information,
     * as record --stacks uses it), else glibc's backtrace (libgcc's unwinder, slower). Called
     * once here, with the agent's guard up: their first call loads and allocates. */
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
        unwind = (int (*)(void **, int))dlsym(h, "unw_backtrace");
        unwinder_cache_per_thread(h);
    }
    if (unwind == NULL)
        unwind = backtrace;
    void *frames[4];
    unwind(frames, 4);
}

/* Starts the sampler when ALLOCLENS_PROFILE_BYTES asks for it: the table in `dir`. */
AG_HIDDEN void ag_prof_init(const char *dir, const char *exe)
{
    const char *s = getenv("ALLOCLENS_PROFILE_BYTES");
    uint64_t bytes = s != NULL ? strtoull(s, NULL, 10) : 0;
    if (bytes == 0) {
        __atomic_store_n(&decided, 1, __ATOMIC_RELEASE);
        return;
    }
    size_t n = strlen(dir);
    if (n >= sizeof table_dir) {
        __atomic_store_n(&decided, 1, __ATOMIC_RELEASE);
        return;
    }
    memcpy(table_dir, dir, n + 1);
    ag_busy_enter();
    load_unwinder();
    dl_iterate_phdr(self_cb, NULL);
    __atomic_store_n(&ag_prof_armed, 1, __ATOMIC_RELEASE);
    sample_bytes = bytes;
    if (map_table(dir, exe) != 0)
        sample_bytes = 0; /* no table (a full disk, a read-only directory): no sampler */
    __atomic_store_n(&decided, 1, __ATOMIC_RELEASE);
    ag_busy_leave();
}

/* In a fork child: a table of its own, empty (the blocks it inherited are the parent's samples),
 * so that it never writes into its parent's. */
AG_HIDDEN void ag_prof_after_fork(const char *exe)
{
    if (base == NULL || sample_bytes == 0)
        return;
    munmap(base, AG_PROF_FILE_BYTES);
    base = NULL;
    memset(ag_prof_filter, 0, sizeof ag_prof_filter);
    ag_tls.prof_rng = 0; /* its own sample points, not its parent's */
    ag_tls.prof_left = 0;
    ag_busy_enter();
    if (map_table(table_dir, exe) != 0)
        sample_bytes = 0;
    ag_busy_leave();
}

/* How long a detach waits, the GOT restored and sampling off, for the calls that were already
 * inside a hook before it lets the table file go. */
#define IN_FLIGHT_MS 20

AG_HIDDEN int ag_prof_attach(const char *dir, const char *exe, uint64_t bytes)
{
    size_t n = strlen(dir);
    if (bytes == 0 || n >= sizeof table_dir)
        return -1;
    ag_busy_enter();
    if (unwind == NULL) {
        load_unwinder();
        dl_iterate_phdr(self_cb, NULL);
    }
    /* An earlier attach's table, anonymous memory since its detach: no call is in it now. */
    if (base != NULL)
        munmap(base, AG_PROF_FILE_BYTES);
    base = NULL;
    memset(ag_prof_filter, 0, sizeof ag_prof_filter);
    memcpy(table_dir, dir, n + 1);
    table_flags = AG_PROF_FLAG_ATTACHED;
    /* A thread's countdown left from an earlier attach runs on (the hooks were out of its way
     * meanwhile): its first point only was drawn with that attach's mean. */
    __atomic_store_n(&ag_prof_armed, 1, __ATOMIC_RELEASE);
    sample_bytes = bytes;
    int rc = map_table(dir, exe);
    if (rc != 0)
        sample_bytes = 0;
    ag_busy_leave();
    return rc;
}

AG_HIDDEN void ag_prof_detach(void)
{
    if (base == NULL || sample_bytes == 0)
        return;
    /* A hook still running meets sampling off (its countdown is set to 0: the hooks are not
     * called again until the next attach's set-up). */
    __atomic_store_n(&sample_bytes, 0, __ATOMIC_RELAXED);
    struct timespec ts = {0, IN_FLIGHT_MS * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    /* Detached once the calls in flight are done: a reader that sees it reads the last state. */
    __atomic_store_n(&HDR->updated_unix_ns, clock_ns(CLOCK_REALTIME), __ATOMIC_RELAXED);
    __atomic_store_n(&HDR->state, AG_PROF_DETACHED, __ATOMIC_RELEASE);
    /* The file is let go, the address range kept: anonymous zeroes replace it, so that a call
     * that was inside a hook longer than that writes nowhere that matters. */
    void *m = mmap(base, AG_PROF_FILE_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    (void)m;
}

/* The agent thread, every interval (and the final snapshot): the exact counters, new modules. */
AG_HIDDEN void ag_prof_tick(const struct ag_counters *c, uint64_t rss, int final)
{
    if (base == NULL || sample_bytes == 0)
        return;
    struct ag_prof_header *h = HDR;
    scan_modules();
    __atomic_store_n(&h->allocs, c->allocs, __ATOMIC_RELAXED);
    __atomic_store_n(&h->frees, c->frees, __ATOMIC_RELAXED);
    __atomic_store_n(&h->live_blocks, c->allocs + c->blocks_in - c->frees - c->blocks_out,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&h->live_bytes, c->bytes_in - c->bytes_out, __ATOMIC_RELAXED);
    __atomic_store_n(&h->requested, c->requested, __ATOMIC_RELAXED);
    __atomic_store_n(&h->rss, rss, __ATOMIC_RELAXED);
    __atomic_store_n(&h->updated_unix_ns, clock_ns(CLOCK_REALTIME), __ATOMIC_RELEASE);
    if (final)
        __atomic_store_n(&h->state, AG_PROF_EXITED, __ATOMIC_RELEASE);
}
