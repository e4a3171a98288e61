/*
 * Call stacks (record --stacks): capture, interning, modules.
 *
 * Capture: libunwind's unw_backtrace (dlopen'd when stacks are asked for, so the shim needs no
 * libunwind to build and loads it only then). It walks DWARF CFI with libunwind's fast trace
 * cache: 106 ns for 14 frames and 261 ns for 34 here, against 1.8 and 4.1 us for glibc's
 * backtrace() (libgcc); frame pointers cost 16-94 ns but stop at the first function built
 * without them (every Debian library: 1 frame of 14 in a -O2 program), docs/recording.md.
 *
 * Interning: a stack is stored once, in the image's *stack arena*, a memfd shared with the
 * recorder (and with fork children, which inherit it: ids stay unique across fork). A private
 * open-addressing table (hash of the frames -> arena offset), filled with compare-and-swap, finds
 * a known stack without a lock; a new stack is appended to the arena (an atomic bump of its
 * reserve, then a release store of the entry's size) before the record naming it is published,
 * so the recorder, which reads the ring head with acquire, finds the entry whole. The record
 * carries the entry's offset (in 8-byte words); the recorder gives each entry a trace-wide id the
 * first time a record names it. No lock, no allocation: the arena and the table are mappings
 * made when the image starts.
 *
 * Modules: when the image starts (and in a fork child, under its own pid) and whenever a new
 * stack holds an address outside every module known so far (a dlopen since), the loaded objects
 * (dl_iterate_phdr: path, load bias, segments, build-id note) are appended to the arena too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "elf_module.h"
#include "sampling.h"
#include "unwinder.h"

AL_HIDDEN struct al_stacks al_stacks = {.fd = -1};

static int (*unw_backtrace_fn)(void **, int);

/* Private interning table: 2^20 slots of (hash tag, arena offset); 8 MiB of address space,
 * pages touched as stacks arrive. When it is 3/4 full, new stacks are no longer interned. */
#define TABLE_BITS 20
#define TABLE_SLOTS (1u << TABLE_BITS)
static _Atomic uint64_t *table;
static _Atomic uint32_t table_used;

/* Modules known to this process (their loaded ranges), to see when a frame is outside all. */
#define MAX_KNOWN 4096
static struct {
    uint64_t start, end;
} known[MAX_KNOWN];
static _Atomic uint32_t known_count;
static unsigned long long known_adds; /* dlpi_adds at the last scan */
static uint64_t shim_start, shim_end; /* this library's own text: its frames are dropped */

static inline struct al_arena_header *arena(void)
{
    return (struct al_arena_header *)al_stacks.base;
}

static inline uint64_t *arena_words(void)
{
    return (uint64_t *)al_stacks.base;
}

/* Reserves `words` 8-byte words in the arena: their offset, 0 when full. */
static uint32_t arena_reserve(uint32_t words)
{
    uint64_t at = atomic_fetch_add_explicit(&arena()->reserved_words, words, memory_order_relaxed);
    if (at + words > AL_ARENA_BYTES / 8) {
        atomic_store_explicit(&arena()->full, 1, memory_order_relaxed);
        return 0;
    }
    return (uint32_t)at;
}

static inline void arena_commit(uint32_t at, uint32_t words, uint32_t kind)
{
    _Atomic uint64_t *head = (_Atomic uint64_t *)&arena_words()[at];
    atomic_store_explicit(head, (uint64_t)words | (uint64_t)kind << 32, memory_order_release);
}

/* ------------------------------------------------------------------------------- modules */

static uint64_t now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct scan {
    int all;  /* report every module (image start, fork child) */
    int seen; /* callbacks so far */
};

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct scan *s = data;
    (void)size;
    if (s->seen++ == 0 && !s->all && info->dlpi_adds == known_adds)
        return 1; /* nothing loaded since the last scan */
    known_adds = info->dlpi_adds;
    uint64_t lo, hi, off;
    int code = elf_code_range(info, &lo, &hi, &off);
    if (!code)
        return 0;
    uint32_t n = atomic_load(&known_count);
    for (uint32_t i = 0; i < n; i++)
        if (known[i].start == lo && known[i].end == hi)
            return 0; /* reported already */
    if (n < MAX_KNOWN) {
        known[n].start = lo;
        known[n].end = hi;
        atomic_store(&known_count, n + 1);
    }
    char exe[4096];
    const char *path = info->dlpi_name;
    if (path == NULL || path[0] == 0) {
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[k > 0 ? k : 0] = 0;
        path = exe;
    }
    const unsigned char *id = NULL;
    size_t id_len = elf_build_id(info, &id);
    if (id_len > 64)
        id_len = 0;
    size_t path_len = strnlen(path, 4095);
    uint32_t words = (uint32_t)(sizeof(struct al_arena_module) / 8 + (id_len + 7) / 8 +
                                (path_len + 7) / 8);
    uint32_t at = arena_reserve(words);
    if (at == 0)
        return 0;
    struct al_arena_module *m = (struct al_arena_module *)&arena_words()[at];
    m->pid = (uint32_t)al_proc.pid;
    m->build_id_len = (uint32_t)id_len;
    m->path_len = (uint32_t)path_len;
    m->reserved = 0;
    m->start = lo;
    m->end = hi;
    m->file_offset = off;
    m->bias = info->dlpi_addr;
    m->unix_ns = now_real_ns();
    unsigned char *tail = (unsigned char *)(m + 1);
    memcpy(tail, id, id_len);
    memcpy(tail + ((id_len + 7) & ~(size_t)7), path, path_len);
    arena_commit(at, words, AL_ARENA_MODULE);
    return 0;
}

static void scan_modules(int all)
{
    struct scan s = {all, 0};
    dl_iterate_phdr(module_cb, &s);
}

static int covered(uint64_t addr)
{
    uint32_t n = atomic_load(&known_count);
    for (uint32_t i = 0; i < n; i++)
        if (addr >= known[i].start && addr < known[i].end)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------------ set-up */

/* Points libunwind's own malloc and free (its GOT slots) at the allocator behind the shim: the
 * calls it makes while it walks a stack are the shim's, not the program's, and the hooks, which
 * run with `in_hook` up during the walk, then see only the calls of a signal handler that
 * interrupted it (queued and recorded, al_record_slow). */
static void bypass_hooks(void *handle)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL)
        return;
    uintptr_t base = lm->l_addr;
    /* ld.so rewrites most pointers of the dynamic section to addresses; not on every port. */
#define AL_DYN_PTR(v) ((uintptr_t)(v) < base ? (uintptr_t)(v) + base : (uintptr_t)(v))
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)AL_DYN_PTR(d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)AL_DYN_PTR(d->d_un.d_ptr); break;
        case DT_JMPREL: tables[0] = (const ElfW(Rela) *)AL_DYN_PTR(d->d_un.d_ptr); break;
        case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
        case DT_RELA: tables[1] = (const ElfW(Rela) *)AL_DYN_PTR(d->d_un.d_ptr); break;
        case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
        }
    }
#undef AL_DYN_PTR
    if (symtab == NULL || strtab == NULL)
        return;
    long page = sysconf(_SC_PAGESIZE);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; tables[k] != NULL && i < sizes[k] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) *r = &tables[k][i];
            unsigned long type = ELF64_R_TYPE(r->r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
                continue;
            const char *name = strtab + symtab[ELF64_R_SYM(r->r_info)].st_name;
            void *to = strcmp(name, "malloc") == 0    ? (void *)al_real.malloc
                       : strcmp(name, "free") == 0    ? (void *)al_real.free
                       : strcmp(name, "calloc") == 0  ? (void *)al_real.calloc
                       : strcmp(name, "realloc") == 0 ? (void *)al_real.realloc
                                                      : NULL;
            if (to == NULL)
                continue;
            void **slot = (void **)(base + r->r_offset);
            uintptr_t at = (uintptr_t)slot & ~(uintptr_t)(page - 1);
            /* Read-only after relocation (RELRO) in a BIND_NOW library: made writable for it. */
            if (mprotect((void *)at, (size_t)page, PROT_READ | PROT_WRITE) == 0)
                *slot = to;
        }
    }
}

/* Loads libunwind and maps the arena and the table. Returns 0, or -1 with why in `*why`. */
static int stacks_setup(const char **why)
{
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        *why = "--stacks needs libunwind (libunwind.so.8 not found; install the libunwind8 package)";
        return -1;
    }
    bypass_hooks(h);
    unw_backtrace_fn = (int (*)(void **, int))dlsym(h, "unw_backtrace");
    if (unw_backtrace_fn == NULL) {
        *why = "--stacks: libunwind.so.8 has no unw_backtrace";
        return -1;
    }
    unwinder_cache_per_thread(h);
    table = mmap(NULL, (size_t)TABLE_SLOTS * 8, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) {
        table = NULL;
        *why = "--stacks: cannot map the stack table";
        return -1;
    }
    return 0;
}

static int new_arena(void)
{
    int fd = memfd_create("alloclens-stacks", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, AL_ARENA_BYTES) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    void *base = mmap(NULL, AL_ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                      fd, 0);
    if (base == MAP_FAILED) {
        close(fd);
        return -1;
    }
    al_stacks.fd = fd;
    al_stacks.base = base;
    al_stacks.generation++;
    atomic_store(&arena()->reserved_words, AL_ARENA_HEADER_BYTES / 8);
    al_stacks.unknown_at = 0;
    if (al_stacks.sample_bytes != 0) {
        /* The empty stack of sampled allocations whose stack could not be taken (al_record):
         * made first, so that a full arena cannot refuse it. */
        uint32_t words = (uint32_t)(sizeof(struct al_arena_stack) / 8);
        uint32_t at = arena_reserve(words);
        struct al_arena_stack *e = (struct al_arena_stack *)&arena_words()[at];
        e->depth = 0;
        atomic_store_explicit(&e->id, 0, memory_order_relaxed);
        arena_commit(at, words, AL_ARENA_STACK);
        al_stacks.unknown_at = at;
    }
    return 0;
}

static void known_reset(void)
{
    atomic_store(&known_count, 0);
    known_adds = 0;
}

static void find_shim_range(void)
{
    uint64_t a = (uint64_t)(uintptr_t)&al_stacks_setup;
    /* __tls_get_addr is the loader's: it allocates a dlopen'ed library's TLS on first use. */
    uint64_t loader = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "__tls_get_addr");
    uint32_t n = atomic_load(&known_count);
    for (uint32_t i = 0; i < n; i++) {
        if (a >= known[i].start && a < known[i].end) {
            shim_start = known[i].start;
            shim_end = known[i].end;
        }
        if (loader >= known[i].start && loader < known[i].end) {
            al_stacks.loader_start = known[i].start;
            al_stacks.loader_end = known[i].end;
        }
    }
}

AL_HIDDEN int al_stacks_setup(void)
{
    const char *depth = getenv(AL_ENV_STACKS);
    if (depth == NULL || depth[0] == 0)
        return 0;
    const char *frees = getenv(AL_ENV_FREE_STACKS);
    const char *sample = getenv(AL_ENV_STACK_SAMPLE);
    return al_stacks_setup_with(atoi(depth), frees != NULL && frees[0] == '1',
                                sample != NULL ? strtoull(sample, NULL, 10) : 0);
}

AL_HIDDEN int al_stacks_setup_with(int depth, int frees, uint64_t sample_bytes)
{
    const char *why = NULL;
    if (unw_backtrace_fn == NULL && stacks_setup(&why) != 0) {
        al_write_stderr(why, "");
        return -1;
    }
    al_stacks.depth = depth < 1 ? 1 : depth > (int)AL_MAX_STACK_DEPTH ? (int)AL_MAX_STACK_DEPTH : depth;
    al_stacks.frees = frees;
    al_stacks.sample_bytes = sample_bytes;
    if (al_stacks.base == NULL && new_arena() != 0) {
        al_write_stderr("--stacks: cannot set up the stack arena", "");
        return -1;
    }
    known_reset();
    scan_modules(1);
    find_shim_range();
    /* In this order, and the reverse when they go: a free that sees free_stacks finds stacks_on
     * set (al_record_slow, which would send it back to al_record otherwise). */
    atomic_store(&al_proc.stacks_on, sample_bytes != 0 ? AL_STACKS_SAMPLED : AL_STACKS_ALL);
    atomic_store(&al_proc.free_stacks, frees ? 1 : 0);
    return 0;
}

AL_HIDDEN void al_stacks_off(void)
{
    atomic_store(&al_proc.free_stacks, 0);
    atomic_store(&al_proc.stacks_on, 0);
}

AL_HIDDEN void al_stacks_discard(void)
{
    al_stacks_off();
    if (al_stacks.base != NULL)
        munmap(al_stacks.base, AL_ARENA_BYTES);
    al_stacks.base = NULL;
    if (al_stacks.fd >= 0)
        close(al_stacks.fd);
    al_stacks.fd = -1;
    if (table != NULL)
        memset((void *)table, 0, (size_t)TABLE_SLOTS * 8);
    atomic_store(&table_used, 0);
}

AL_HIDDEN void al_stacks_fork_child(void)
{
    /* The arena is shared with the parent (MAP_SHARED): entries keep their offsets and the
     * recorder's ids, so the child's table stays valid. Its modules are reported again under the
     * child's pid. Without the arena's descriptor (a program that closed it) a new arena starts. */
    if (!atomic_load(&al_proc.stacks_on))
        return;
    /* The forking thread, the child's only one, draws its own sample points: with the parent's
     * generator both would sample the same allocations of the code they share after fork. */
    al_tls.sample_rng = 0;
    al_tls.sample_left = 0;
    if (al_stacks.fd < 0 || fcntl(al_stacks.fd, F_GETFD) < 0) {
        munmap(al_stacks.base, AL_ARENA_BYTES);
        al_stacks.base = NULL;
        munmap((void *)table, (size_t)TABLE_SLOTS * 8);
        table = mmap(NULL, (size_t)TABLE_SLOTS * 8, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        atomic_store(&table_used, 0);
        if (table == MAP_FAILED || new_arena() != 0) {
            table = NULL;
            al_stacks_off();
            return;
        }
    }
    known_reset();
    scan_modules(1);
}

/* ------------------------------------------------------------------------------ capture */

static inline uint64_t hash_frames(void *const *f, int n)
{
    return sampling_hash_frames(f, n);
}

/* Per-thread cache in front of the shared table: the table is 8 MiB probed at random, so a
 * lookup there is a cache and TLB miss (80 % of the capture's own time on cc1); a thread's
 * recent stacks are a direct-mapped 4 KiB here, matched by their full 64-bit hash. */
#define TCACHE 256
static __thread struct {
    uint64_t hash;
    uint32_t at;
} tcache[TCACHE] __attribute__((tls_model(AL_TLS_MODEL)));
/* The arena the cache's offsets are in (a fork child that starts a new arena moves on). */
static __thread uint32_t tcache_generation __attribute__((tls_model(AL_TLS_MODEL)));

static int same_stack(uint32_t at, void *const *f, int n)
{
    const struct al_arena_stack *s = (const struct al_arena_stack *)&arena_words()[at];
    if (s->depth != (uint32_t)n)
        return 0;
    return memcmp(s + 1, f, (size_t)n * 8) == 0;
}

/* Appends a new stack to the arena; its offset, 0 when the arena is full. */
static uint32_t append_stack(void *const *f, int n)
{
    for (int i = 0; i < n; i++)
        if (!covered((uint64_t)(uintptr_t)f[i])) {
            scan_modules(0);
            break;
        }
    uint32_t words = (uint32_t)(sizeof(struct al_arena_stack) / 8 + (uint32_t)n);
    uint32_t at = arena_reserve(words);
    if (at == 0)
        return 0;
    struct al_arena_stack *s = (struct al_arena_stack *)&arena_words()[at];
    s->depth = (uint32_t)n;
    atomic_store_explicit(&s->id, 0, memory_order_relaxed);
    memcpy(s + 1, f, (size_t)n * 8);
    arena_commit(at, words, AL_ARENA_STACK);
    return at;
}

AL_HIDDEN __attribute__((noinline)) uint32_t al_stack_capture(void)
{
    void *frames[AL_MAX_STACK_DEPTH + 8];
    int n = unw_backtrace_fn(frames, al_stacks.depth + 8);
    int skip = 0;
    while (skip < n && (uint64_t)(uintptr_t)frames[skip] >= shim_start &&
           (uint64_t)(uintptr_t)frames[skip] < shim_end)
        skip++;
    void **f = frames + skip;
    n -= skip;
    if (n > al_stacks.depth)
        n = al_stacks.depth;
    uint32_t found = 0;
    uint64_t h = n > 0 ? hash_frames(f, n) : 0;
    unsigned c = (unsigned)(h >> 8) & (TCACHE - 1);
    if (n > 0 && tcache[c].hash == h && al_stacks.generation == tcache_generation) {
        return tcache[c].at;
    }
    if (n > 0 && table != NULL) {
        uint64_t mask = TABLE_SLOTS - 1;
        for (uint64_t i = h >> (64 - TABLE_BITS), probes = 0; probes < 64; i = (i + 1) & mask,
                      probes++) {
            uint64_t slot = atomic_load_explicit(&table[i], memory_order_acquire);
            if (slot == 0) {
                if (atomic_load_explicit(&table_used, memory_order_relaxed) > TABLE_SLOTS / 4 * 3)
                    break;
                uint32_t at = append_stack(f, n);
                if (at == 0)
                    break;
                uint64_t want = (h & 0xffffffff00000000ull) | at;
                if (atomic_compare_exchange_strong(&table[i], &slot, want)) {
                    atomic_fetch_add_explicit(&table_used, 1, memory_order_relaxed);
                    found = at;
                    break;
                }
                /* Another thread took the slot: if it is this stack, use its entry (ours is
                 * never named, so the recorder never gives it an id); else probe on. */
                if ((slot >> 32) == (h >> 32) && same_stack((uint32_t)slot, f, n)) {
                    found = (uint32_t)slot;
                    break;
                }
                found = at; /* a different stack there: ours stays valid, unindexed */
                break;
            }
            if ((slot >> 32) == (h >> 32) && same_stack((uint32_t)slot, f, n)) {
                found = (uint32_t)slot;
                break;
            }
        }
    }
    if (found != 0) {
        if (tcache_generation != al_stacks.generation) {
            memset(tcache, 0, sizeof tcache);
            tcache_generation = al_stacks.generation;
        }
        tcache[c].hash = h;
        tcache[c].at = found;
    }
    return found;
}

/* ----------------------------------------------------------------------------- sampling */

static uint64_t draw_countdown(struct al_tls *t)
{
    return sampling_countdown(&t->sample_rng, al_stacks.sample_bytes);
}

AL_HIDDEN __attribute__((noinline)) int al_sample_slow(struct al_tls *t, uint64_t size)
{
    if (t->sample_rng == 0) {
        /* A new thread, or the child of a fork: its own stream, whatever its neighbours draw. */
        static _Atomic uint64_t seeds;
        uint64_t seed = sampling_mix64(((uint64_t)al_gettid() << 32 ^ (uint64_t)getpid()) ^
                              sampling_mix64(al_clock_ns(CLOCK_MONOTONIC)) ^
                              sampling_mix64((uint64_t)(uintptr_t)t + atomic_fetch_add(&seeds, 1)));
        t->sample_rng = seed != 0 ? seed : 0x9E3779B97F4A7C15ull;
        t->sample_left = draw_countdown(t);
        if (size < t->sample_left) {
            t->sample_left -= size;
            return 0;
        }
    }
    /* The countdown ends inside this allocation: sampled. The bytes to the next point are a
     * fresh draw from its end (the process is memoryless), so P(sampled) = 1 - exp(-size / R). */
    t->sample_left = draw_countdown(t);
    return 1;
}
