/*
 * The allocator's own statistics, read through its public API on the agent thread. Which API is
 * chosen by the library that really serves malloc (dladdr of the next malloc), never by which
 * symbols happen to exist: glibc's mallinfo2 is always there, and behind another allocator it
 * would describe glibc's nearly empty heap.
 *
 * Only raw figures are written here, by their API names; the normalisation into one table is in
 * Rust (crates/agent/src/normalise.rs), and so is the parsing of the text reports.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

static enum ag_allocator which = AG_UNKNOWN;

/* glibc */
static struct mallinfo2 (*glibc_mallinfo2)(void);
static int (*glibc_malloc_info)(int, FILE *);
static int (*glibc_malloc_trim)(size_t);
/* jemalloc */
static int (*je_mallctl)(const char *, void *, size_t *, void *, size_t);
/* mimalloc */
static void (*mi_process_info)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
                               size_t *, size_t *);
static void (*mi_stats_print_out)(void (*)(const char *, void *), void *);
static void (*mi_collect)(_Bool);
/* tcmalloc (gperftools' C API) */
static int (*tc_get_numeric)(const char *, size_t *);
static void (*tc_release_free_memory)(void);
/* tbbmalloc */
static int (*tbb_allocation_command)(int, void *);

static const char *const names[] = {
    [AG_UNKNOWN] = "unknown",   [AG_GLIBC] = "glibc",       [AG_JEMALLOC] = "jemalloc",
    [AG_MIMALLOC] = "mimalloc", [AG_TCMALLOC] = "tcmalloc", [AG_TBBMALLOC] = "tbbmalloc",
};

/* The function `name` as defined by the serving library itself (its handle), not by whichever
 * library comes first. */
static void *lookup(void *handle, const char *name)
{
    void *f = handle ? dlsym(handle, name) : NULL;
    return f ? f : dlsym(RTLD_DEFAULT, name);
}

AG_HIDDEN void ag_stats_init(void)
{
    Dl_info info;
    if (!ag_real_resolved() || !dladdr((void *)ag_real.malloc, &info) || !info.dli_fname)
        return;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (strstr(base, "jemalloc")) {
        which = AG_JEMALLOC;
        je_mallctl = lookup(h, "mallctl");
    } else if (strstr(base, "mimalloc")) {
        which = AG_MIMALLOC;
        mi_process_info = lookup(h, "mi_process_info");
        mi_stats_print_out = lookup(h, "mi_stats_print_out");
        mi_collect = lookup(h, "mi_collect");
    } else if (strstr(base, "tcmalloc")) {
        which = AG_TCMALLOC;
        tc_get_numeric = lookup(h, "MallocExtension_GetNumericProperty");
        tc_release_free_memory = lookup(h, "MallocExtension_ReleaseFreeMemory");
    } else if (strstr(base, "tbbmalloc")) {
        which = AG_TBBMALLOC;
        /* The proxy serves malloc; the API is in libtbbmalloc, which the proxy loads. */
        tbb_allocation_command = dlsym(RTLD_DEFAULT, "scalable_allocation_command");
    } else if (strncmp(base, "libc.so", 7) == 0 || strncmp(base, "libc-", 5) == 0) {
        which = AG_GLIBC;
        glibc_mallinfo2 = lookup(h, "mallinfo2");
        glibc_malloc_info = lookup(h, "malloc_info");
        glibc_malloc_trim = lookup(h, "malloc_trim");
    }
    if (h)
        dlclose(h);
}

AG_HIDDEN enum ag_allocator ag_allocator(void)
{
    return which;
}

AG_HIDDEN const char *ag_allocator_name(void)
{
    return names[which];
}

/* ---------------------------------------------------------------------- text buffer */

AG_HIDDEN void ag_buf_put(struct ag_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64 * 1024;
        while (cap < b->len + n)
            cap *= 2;
        void *d = b->data ? mremap(b->data, b->cap, cap, MREMAP_MAYMOVE)
                          : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                 -1, 0);
        if (d == MAP_FAILED) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

AG_HIDDEN void ag_buf_str(struct ag_buf *b, const char *s)
{
    ag_buf_put(b, s, strlen(s));
}

AG_HIDDEN void ag_buf_u64(struct ag_buf *b, uint64_t v)
{
    char d[24];
    int i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    ag_buf_put(b, d + i, sizeof d - i);
}

AG_HIDDEN void ag_buf_kv(struct ag_buf *b, const char *prefix, const char *key, uint64_t v)
{
    ag_buf_str(b, prefix);
    ag_buf_str(b, key);
    ag_buf_put(b, "=", 1);
    ag_buf_u64(b, v);
    ag_buf_put(b, "\n", 1);
}

/* ---------------------------------------------------------------------- raw figures */

static void glibc_raw(struct ag_buf *b, const char *prefix)
{
    if (!glibc_mallinfo2)
        return;
    struct mallinfo2 m = glibc_mallinfo2();
    ag_buf_kv(b, prefix, "mallinfo2.arena", m.arena);
    ag_buf_kv(b, prefix, "mallinfo2.ordblks", m.ordblks);
    ag_buf_kv(b, prefix, "mallinfo2.smblks", m.smblks);
    ag_buf_kv(b, prefix, "mallinfo2.hblks", m.hblks);
    ag_buf_kv(b, prefix, "mallinfo2.hblkhd", m.hblkhd);
    ag_buf_kv(b, prefix, "mallinfo2.fsmblks", m.fsmblks);
    ag_buf_kv(b, prefix, "mallinfo2.uordblks", m.uordblks);
    ag_buf_kv(b, prefix, "mallinfo2.fordblks", m.fordblks);
    ag_buf_kv(b, prefix, "mallinfo2.keepcost", m.keepcost);
}

static void je_size(struct ag_buf *b, const char *prefix, const char *name)
{
    size_t v, sz = sizeof v;
    if (je_mallctl(name, &v, &sz, NULL, 0) == 0 && sz == sizeof v)
        ag_buf_kv(b, prefix, name, v);
}

static void je_ssize(struct ag_buf *b, const char *prefix, const char *name)
{
    ssize_t v;
    size_t sz = sizeof v;
    /* -1 (never) is written as the largest u64: the reader knows it. */
    if (je_mallctl(name, &v, &sz, NULL, 0) == 0 && sz == sizeof v)
        ag_buf_kv(b, prefix, name, (uint64_t)v);
}

static void je_bool(struct ag_buf *b, const char *prefix, const char *name)
{
    _Bool v;
    size_t sz = sizeof v;
    if (je_mallctl(name, &v, &sz, NULL, 0) == 0 && sz == sizeof v)
        ag_buf_kv(b, prefix, name, v);
}

static void je_unsigned(struct ag_buf *b, const char *prefix, const char *name)
{
    unsigned v;
    size_t sz = sizeof v;
    if (je_mallctl(name, &v, &sz, NULL, 0) == 0 && sz == sizeof v)
        ag_buf_kv(b, prefix, name, v);
}

static void jemalloc_raw(struct ag_buf *b, const char *prefix)
{
    if (!je_mallctl)
        return;
    /* The stats are a copy refreshed by writing the epoch. */
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    je_mallctl("epoch", &epoch, &sz, &epoch, sz);
    je_size(b, prefix, "stats.allocated");
    je_size(b, prefix, "stats.active");
    je_size(b, prefix, "stats.metadata");
    je_size(b, prefix, "stats.resident");
    je_size(b, prefix, "stats.mapped");
    je_size(b, prefix, "stats.retained");
    /* 4096 = MALLCTL_ARENAS_ALL: the merged statistics of every arena. */
    je_size(b, prefix, "stats.arenas.4096.pdirty");
    je_size(b, prefix, "stats.arenas.4096.pmuzzy");
    je_size(b, prefix, "arenas.page");
    je_unsigned(b, prefix, "arenas.narenas");
    je_ssize(b, prefix, "opt.dirty_decay_ms");
    je_ssize(b, prefix, "opt.muzzy_decay_ms");
    je_bool(b, prefix, "background_thread");
}

static void mimalloc_raw(struct ag_buf *b, const char *prefix)
{
    if (!mi_process_info)
        return;
    size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
    mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
    ag_buf_kv(b, prefix, "mi_process_info.current_rss", rss);
    ag_buf_kv(b, prefix, "mi_process_info.peak_rss", peak_rss);
    ag_buf_kv(b, prefix, "mi_process_info.current_commit", commit);
    ag_buf_kv(b, prefix, "mi_process_info.peak_commit", peak_commit);
}

static void tcmalloc_raw(struct ag_buf *b, const char *prefix)
{
    static const char *const props[] = {
        "generic.current_allocated_bytes",
        "generic.heap_size",
        "generic.total_physical_bytes",
        "tcmalloc.pageheap_free_bytes",
        "tcmalloc.pageheap_unmapped_bytes",
        "tcmalloc.central_cache_free_bytes",
        "tcmalloc.transfer_cache_free_bytes",
        "tcmalloc.thread_cache_free_bytes",
        "tcmalloc.current_total_thread_cache_bytes",
        "tcmalloc.max_total_thread_cache_bytes",
        "tcmalloc.slack_bytes",
        "tcmalloc.metadata_bytes",
    };
    if (!tc_get_numeric)
        return;
    for (size_t i = 0; i < sizeof props / sizeof *props; i++) {
        size_t v;
        if (tc_get_numeric(props[i], &v))
            ag_buf_kv(b, prefix, props[i], v);
    }
}

AG_HIDDEN void ag_stats_raw(struct ag_buf *b, const char *prefix)
{
    switch (which) {
    case AG_GLIBC:
        glibc_raw(b, prefix);
        break;
    case AG_JEMALLOC:
        jemalloc_raw(b, prefix);
        break;
    case AG_MIMALLOC:
        mimalloc_raw(b, prefix);
        break;
    case AG_TCMALLOC:
        tcmalloc_raw(b, prefix);
        break;
    case AG_TBBMALLOC: /* no statistics API (only scalable_allocation_command) */
    case AG_UNKNOWN:
        break;
    }
}

/* ---------------------------------------------------------------------- text reports */

/* malloc_info writes to a FILE: one made once on the agent thread, with a static buffer and a
 * cookie that appends to the text buffer, so reading it allocates nothing (an allocation between
 * mallinfo2 and malloc_info would make the two disagree). */
static struct ag_buf text;
static char file_buffer[4096];
static FILE *text_file;

static ssize_t text_write(void *cookie, const char *data, size_t n)
{
    (void)cookie;
    ag_buf_put(&text, data, n);
    return (ssize_t)n;
}

static void mi_out(const char *msg, void *arg)
{
    (void)arg;
    ag_buf_str(&text, msg);
}

static void section(struct ag_buf *b, const char *name)
{
    if (text.failed) {
        text.failed = 0;
        text.len = 0;
        return;
    }
    ag_buf_str(b, "section ");
    ag_buf_str(b, name);
    ag_buf_put(b, " ", 1);
    ag_buf_u64(b, text.len);
    ag_buf_put(b, "\n", 1);
    ag_buf_put(b, text.data, text.len);
    ag_buf_put(b, "\n", 1);
    text.len = 0;
}

AG_HIDDEN void ag_stats_text(struct ag_buf *b)
{
    if (which == AG_GLIBC && glibc_malloc_info) {
        if (!text_file) {
            text_file = fopencookie(NULL, "w", (cookie_io_functions_t){.write = text_write});
            if (text_file)
                setvbuf(text_file, file_buffer, _IOFBF, sizeof file_buffer);
        }
        if (text_file) {
            text.len = 0;
            glibc_malloc_info(0, text_file);
            fflush(text_file);
            section(b, "malloc_info");
        }
    } else if (which == AG_MIMALLOC && mi_stats_print_out) {
        text.len = 0;
        mi_stats_print_out(mi_out, NULL);
        section(b, "mi_stats");
    }
}

/* ---------------------------------------------------------------------- trim */

AG_HIDDEN int ag_stats_trim(void)
{
    switch (which) {
    case AG_GLIBC:
        if (glibc_malloc_trim) {
            glibc_malloc_trim(0);
            return 1;
        }
        return 0;
    case AG_JEMALLOC:
        /* 4096 = MALLCTL_ARENAS_ALL: every arena's dirty and muzzy pages go back. */
        return je_mallctl && je_mallctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0;
    case AG_MIMALLOC:
        if (mi_collect) {
            mi_collect(1);
            return 1;
        }
        return 0;
    case AG_TCMALLOC:
        if (tc_release_free_memory) {
            tc_release_free_memory();
            return 1;
        }
        return 0;
    case AG_TBBMALLOC:
        /* TBBMALLOC_CLEAN_ALL_BUFFERS = 0 in tbb/scalable_allocator.h */
        return tbb_allocation_command && tbb_allocation_command(0, NULL) == 0;
    case AG_UNKNOWN:
        break;
    }
    return 0;
}
