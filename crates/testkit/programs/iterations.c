/* A program of iterations with known memory, for `alloclens gate`:
 * `iterations N LEAK CACHE [PAUSE_MS]`. fill_cache keeps CACHE bytes from the second iteration to
 * the end (a cache, never freed on purpose: a step after the first iteration); each iteration
 * churns 64 blocks of 1,000 bytes (freed in it) and leak_step keeps LEAK bytes more (a leak: the
 * live bytes grow LEAK per iteration). It prints `iteration I` before each, flushed, and pauses
 * PAUSE_MS (default 0) before its calls: `record --marker` places a marker where the recorder
 * reads the line, so the pause makes each iteration a phase of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *volatile sink;

__attribute__((noinline)) void *fill_cache(size_t bytes) {
    void *p = malloc(bytes);
    memset(p, 1, bytes);
    return p;
}

__attribute__((noinline)) void leak_step(size_t bytes) {
    if (bytes)
        sink = malloc(bytes); /* the previous one is lost */
}

__attribute__((noinline)) void churn(void) {
    void *blocks[64];
    for (int i = 0; i < 64; i++)
        blocks[i] = malloc(1000);
    for (int i = 0; i < 64; i++)
        free(blocks[i]);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: iterations N LEAK CACHE [PAUSE_MS]\n");
        return 2;
    }
    long pause_ms = argc == 5 ? atol(argv[4]) : 0;
    struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
    int n = atoi(argv[1]);
    size_t leak = strtoul(argv[2], NULL, 10), cache = strtoul(argv[3], NULL, 10);
    void *volatile kept = NULL;
    for (int i = 0; i < n; i++) {
        printf("iteration %d\n", i);
        fflush(stdout);
        if (pause_ms)
            nanosleep(&pause, NULL);
        if (i == 1 && cache)
            kept = fill_cache(cache);
        churn();
        leak_step(leak);
    }
    (void)kept;
    return 0;
}
