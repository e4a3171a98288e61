/* thread-churn MODE THREADS OPS: allocation-bound work on several threads, a fixed amount of it
 * (OPS allocator calls per thread, about), so a run's time is the cost of its calls. The modes are
 * the patterns servers have and that issue 41 measures recording on:
 *   churn    each thread replaces blocks of 16..512 bytes in 64 slots of its own (malloc + free);
 *   realloc  each thread grows, shrinks, replaces and frees blocks in 256 slots of its own
 *            (malloc, realloc, free), the "4-thread malloc/realloc/free program";
 *   cross    xmalloc-test's pattern (Lever and Boreham, USENIX 2000): threads in pairs, one
 *            allocating blocks of 16..1024 bytes and handing them over a ring, the other freeing
 *            them: every free is of another thread's block (odd THREADS: the last one churns).
 * Prints "checksum N" (the same for every allocator and tracer) and exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long ops;
static int mode; /* 0 churn, 1 realloc, 2 cross */

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#define RING 65536
struct pair {
    void *_Atomic slots[RING];
    _Alignas(64) _Atomic long head; /* written by the producer */
    _Alignas(64) _Atomic long tail; /* written by the consumer */
};

struct worker {
    long index;
    struct pair *pair;
    int producer;
    uint64_t checksum;
};

static uint64_t churn(uint64_t seed)
{
    void *slot[64] = {0};
    uint64_t sum = 0;
    for (long i = 0; i < ops / 2; i++) {
        uint64_t r = next_random(&seed);
        size_t n = 16 + (r >> 8) % 497;
        int k = r & 63;
        free(slot[k]);
        slot[k] = malloc(n);
        ((char *)slot[k])[0] = (char)n;
        sum += n;
    }
    for (int k = 0; k < 64; k++)
        free(slot[k]);
    return sum;
}

static uint64_t grow_and_shrink(uint64_t seed)
{
    void *slot[256] = {0};
    uint64_t sum = 0;
    for (long i = 0; i < ops / 2; i++) {
        uint64_t r = next_random(&seed);
        int k = r & 255;
        size_t n = 16 + (r >> 8) % 2033;
        switch ((r >> 20) & 3) {
        case 0: /* replace */
            free(slot[k]);
            slot[k] = malloc(n);
            break;
        case 1:
        case 2: { /* grow or shrink in place or moved */
            void *p = realloc(slot[k], n);
            if (!p)
                abort();
            slot[k] = p;
            break;
        }
        default:
            free(slot[k]);
            slot[k] = NULL;
            n = 0;
        }
        if (n)
            ((char *)slot[k])[n - 1] = (char)k;
        sum += n;
    }
    for (int k = 0; k < 256; k++)
        free(slot[k]);
    return sum;
}

static uint64_t produce(struct pair *pair, uint64_t seed)
{
    uint64_t sum = 0;
    for (long i = 0; i < ops / 2; i++) {
        size_t n = 16 + (next_random(&seed) >> 8) % 1009;
        char *p = malloc(n);
        p[0] = (char)n;
        sum += n;
        while (i - atomic_load_explicit(&pair->tail, memory_order_acquire) >= RING)
            sched_yield(); /* the consumer is a ring behind (yield: threads may outnumber cores) */
        atomic_store_explicit(&pair->slots[i % RING], p, memory_order_relaxed);
        atomic_store_explicit(&pair->head, i + 1, memory_order_release);
    }
    return sum;
}

static uint64_t consume(struct pair *pair)
{
    uint64_t sum = 0;
    for (long i = 0; i < ops / 2; i++) {
        while (atomic_load_explicit(&pair->head, memory_order_acquire) <= i)
            sched_yield();
        char *p = atomic_load_explicit(&pair->slots[i % RING], memory_order_relaxed);
        sum += 1;
        free(p);
        atomic_store_explicit(&pair->tail, i + 1, memory_order_release);
    }
    return sum;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->index + 1);
    if (mode == 1)
        w->checksum = grow_and_shrink(seed);
    else if (mode == 2 && w->pair)
        w->checksum = w->producer ? produce(w->pair, seed) : consume(w->pair);
    else
        w->checksum = churn(seed);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: thread-churn churn|realloc|cross THREADS OPS\n");
        return 2;
    }
    mode = !strcmp(argv[1], "churn") ? 0 : !strcmp(argv[1], "realloc") ? 1 : !strcmp(argv[1], "cross") ? 2 : -1;
    long threads = atol(argv[2]);
    ops = atol(argv[3]);
    if (mode < 0 || threads < 1 || threads > 256 || ops < 2) {
        fprintf(stderr, "thread-churn: bad arguments\n");
        return 2;
    }
    pthread_t tid[256];
    struct worker w[256];
    struct pair *pairs = aligned_alloc(64, sizeof(struct pair) * (size_t)(threads / 2 + 1));
    memset(pairs, 0, sizeof(struct pair) * (size_t)(threads / 2 + 1));
    for (long t = 0; t < threads; t++) {
        w[t] = (struct worker){.index = t};
        if (mode == 2 && t / 2 < threads / 2) {
            w[t].pair = &pairs[t / 2];
            w[t].producer = (t % 2 == 0);
        }
        if (pthread_create(&tid[t], NULL, work, &w[t]))
            return 1;
    }
    uint64_t checksum = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        checksum += w[t].checksum;
    }
    free(pairs);
    printf("checksum %llu\n", (unsigned long long)checksum);
    return 0;
}
