/* The verdict matrix's programs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
/* The verdict matrix's programs: argv[1] names what memory does for argv[2] ms, a step every
 * argv[3] ms (default 100); each prints "done" and exits 0.
 * leak:   keeps 1 MiB more a step (64 blocks of 16 KiB), frees it all before exit.
 * frag:   glibc fragmentation: each step frees the previous step's 128 blocks and allocates 128
 *         blocks 16 bytes larger, each right behind a small pin that stays (taken from the heap's
 *         top: allocated large, then shrunk, the block fills the rest). The holes sit between
 *         pins, too small for anything asked later: heap and glibc's free bytes grow by 2 MiB a
 *         step, live bytes stay flat (8 KiB of pins a step). Frees it all before exit.
 * retain: 200,000 blocks of 200 bytes; after a third of the time frees 15 of each 16: glibc keeps
 *         the freed memory between the survivors.
 * mmap:   maps 4 MiB more of private anonymous memory a step, outside malloc.
 * shm:    touches 4 MiB more of a shared anonymous mapping a step. */
static long ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000L + t.tv_nsec / 1000000; }
#define STEPS 4096
static char *kept[STEPS][128];
int main(int argc, char **argv) {
    const char *what = argv[1];
    long start = ms(), run = atol(argv[2]), end = start + run;
    long step_us = (argc > 3 ? atol(argv[3]) : 100) * 1000;
    int r = 0;
    if (!strcmp(what, "retain")) {
        int n = 200000;
        char **a = malloc(n * sizeof *a);
        for (int i = 0; i < n; i++) { a[i] = malloc(200); memset(a[i], 1, 200); }
        while (ms() < start + run / 3) usleep(20000);
        for (int i = 0; i < n; i++) if (i % 16) { free(a[i]); a[i] = 0; }
        while (ms() < end) usleep(20000);
        printf("done\n");
        return 0;
    }
    char *shared = NULL;
    if (!strcmp(what, "shm"))
        shared = mmap(NULL, 1L << 30, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    static char *big[128];
    for (; ms() < end && r < STEPS; r++) {
        if (!strcmp(what, "leak")) {
            for (int i = 0; i < 64; i++) { kept[r][i] = malloc(16384); memset(kept[r][i], r, 16384); }
        } else if (!strcmp(what, "frag")) {
            size_t size = 16384 + 16 * (size_t)r;
            for (int i = 0; i < 128; i++) free(big[i]);
            for (int i = 0; i < 128; i++) {
                kept[r][i] = realloc(malloc(size + 80), 48);
                memset(kept[r][i], r, 48);
                big[i] = malloc(size);
                memset(big[i], r, size);
            }
        } else if (!strcmp(what, "mmap")) {
            char *p = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            memset(p, r, 4 << 20);
        } else if (!strcmp(what, "shm")) {
            memset(shared + ((long)r << 22) % (1L << 30), r, 4 << 20);
        }
        usleep(step_us);
    }
    for (int i = 0; i < 128; i++) free(big[i]);
    for (int s = 0; s < r; s++)
        for (int i = 0; i < 128; i++) free(kept[s][i]);
    printf("done\n");
    return 0;
}
