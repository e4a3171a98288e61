/*
 * Known allocation sites for the heap profile's estimates (crates/alloclens/tests/cli/profile_accuracy.rs):
 *
 *   profile_sites [SEED [TOTAL_MIB]]      (defaults 1, 64)
 *
 * Four functions hold 50, 30, 15 and 5 % of TOTAL_MIB live bytes (site_half, site_thirty,
 * site_fifteen, site_five; the first takes the rounding). Each site's sizes are drawn from a PRNG
 * seeded with SEED, by bytes 5 % small (16 B-4 KiB), 45 % medium (4-128 KiB) and 50 % large
 * (128 KiB-2 MiB), log-uniform within a class: the sampler's p = 1 - exp(-n / 512 KiB) spans
 * 0.00003-0.98. Beside every kept block the same site makes a churn block of a size drawn the same
 * way, which replaces one of CHURN_SLOTS held and is freed by the end: freed blocks must leave the
 * in-use figures.
 *
 * Every allocation goes through one call (`allocate`'s call of a site through a pointer), so a
 * site has two stacks, site_X <- allocate <- build <- main, from build's line of the kept blocks
 * and from its line of the churn blocks: a site's figures are those of its function. Once done it prints one JSON line on stderr, the
 * truth per site (requested bytes and blocks live now, and allocated since the start), then
 * "ready" on stdout, and waits until stdin closes or SIGTERM, then exits (normally: the agent's
 * exit handler runs).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITES 4
#define CHURN_SLOTS 64

/* Distinct bodies (each stamps its block with its own byte), so that no two are folded into one. */
__attribute__((noinline)) void *site_half(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 'h';
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *site_thirty(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 't';
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *site_fifteen(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 'f';
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *site_five(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = '5';
    __asm__ volatile("" ::: "memory");
    return p;
}

struct site {
    const char *name;
    void *(*allocate)(size_t);
    unsigned percent;
    uint64_t target;         /* live bytes to reach */
    uint64_t class_bytes[3]; /* live bytes drawn per size class, to keep their shares */
    uint64_t live_bytes, live_objects, alloc_bytes, alloc_objects;
};

static struct site sites[SITES] = {
    {.name = "site_half", .allocate = site_half, .percent = 50},
    {.name = "site_thirty", .allocate = site_thirty, .percent = 30},
    {.name = "site_fifteen", .allocate = site_fifteen, .percent = 15},
    {.name = "site_five", .allocate = site_five, .percent = 5},
};

/* Size classes: [lo, hi) bytes, and their share of a site's bytes in percent. */
static const struct {
    double lo, hi;
    unsigned share;
} classes[3] = {{16, 4096, 5}, {4096, 131072, 45}, {131072, 2097152, 50}};

static uint64_t rng_state;

/* splitmix64: any seed, 0 included, gives a well-mixed sequence. */
static uint64_t next_random(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return (double)(next_random() >> 11) * 0x1.0p-53;
}

/* A size for the site: from the class furthest below its share so far, log-uniform in it. */
static size_t draw_size(struct site *s)
{
    unsigned c = 0;
    for (unsigned k = 1; k < 3; k++)
        if (s->class_bytes[k] * classes[c].share < s->class_bytes[c] * classes[k].share)
            c = k;
    double lo = log(classes[c].lo), hi = log(classes[c].hi);
    size_t n = (size_t)exp(lo + uniform() * (hi - lo));
    return n < 1 ? 1 : n;
}

static void *volatile last_block;

/* Every allocation of the program's sites is made here, by this one call. */
__attribute__((noinline)) static void *allocate(struct site *s, size_t n)
{
    void *p = s->allocate(n);
    if (!p) {
        fprintf(stderr, "profile_sites: malloc(%zu) failed\n", n);
        exit(1);
    }
    s->alloc_bytes += n;
    s->alloc_objects++;
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void build(void)
{
    struct {
        void *block;
        size_t size;
    } churn[CHURN_SLOTS] = {{0}};
    unsigned open = SITES;
    while (open > 0) {
        /* A site still short of its target, at random. */
        unsigned pick = (unsigned)(next_random() % open), i = 0;
        for (;; i++)
            if (sites[i].live_bytes < sites[i].target && pick-- == 0)
                break;
        struct site *s = &sites[i];
        size_t n = draw_size(s);
        uint64_t left = s->target - s->live_bytes;
        if (n > left)
            n = (size_t)left;
        /* The class the size was drawn from keeps its share, whatever the last block's clamp. */
        unsigned c = n < 4096 ? 0 : n < 131072 ? 1 : 2;
        s->class_bytes[c] += n;
        last_block = allocate(s, n);
        s->live_bytes += n;
        s->live_objects++;
        if (s->live_bytes == s->target)
            open--;
        /* A churn block of the same site replaces one held: freed here or at the end. */
        unsigned slot = (unsigned)(next_random() % CHURN_SLOTS);
        free(churn[slot].block);
        churn[slot].block = allocate(s, draw_size(s));
    }
    for (unsigned k = 0; k < CHURN_SLOTS; k++)
        free(churn[k].block);
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 64;
    if (argc > 3 || mib == 0 || mib > (1u << 20)) {
        fprintf(stderr, "usage: profile_sites [SEED [TOTAL_MIB]]\n");
        return 2;
    }
    rng_state = seed;
    uint64_t total = mib << 20, others = 0;
    for (unsigned i = 1; i < SITES; i++)
        others += sites[i].target = total * sites[i].percent / 100;
    sites[0].target = total - others;
    build();

    fprintf(stderr, "{\"seed\":%" PRIu64 ",\"total_bytes\":%" PRIu64 ",\"sites\":[", seed, total);
    for (unsigned i = 0; i < SITES; i++)
        fprintf(stderr,
                "%s{\"function\":\"%s\",\"percent\":%u,\"live_bytes\":%" PRIu64
                ",\"live_objects\":%" PRIu64 ",\"alloc_bytes\":%" PRIu64 ",\"alloc_objects\":%" PRIu64 "}",
                i ? "," : "", sites[i].name, sites[i].percent, sites[i].live_bytes,
                sites[i].live_objects, sites[i].alloc_bytes, sites[i].alloc_objects);
    fprintf(stderr, "]}\n");
    fflush(stderr);

    /* No SA_RESTART: SIGTERM interrupts the read below, and main returns. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    char buf[256];
    while (!stop) {
        ssize_t r = read(0, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EINTR))
            break;
    }
    return 0;
}
