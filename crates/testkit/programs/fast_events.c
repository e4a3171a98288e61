/* A program with fast events, like the CMS reconstruction of issue 15: before each event line it
 * moves its RSS by 16-48 MiB (touching or dropping 16 MiB blocks, a different total each event),
 * reads its own RSS and VSS from /proc/self/statm, prints them with its monotonic clock,
 * then holds still for a while (argv[2], µs) before the next event. A resident base (argv[3], MiB)
 * makes each smaps_rollup walk (a full sample) slow: ~40 ms for 1 GiB, longer than an event, as
 * 800 MiB (30 ms) was in CMS. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (16UL << 20)

static void own(unsigned long *rss, unsigned long *vss) {
    char text[256] = {0};
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0 || read(fd, text, sizeof text - 1) <= 0) exit(2);
    close(fd);
    long page = sysconf(_SC_PAGESIZE);
    if (sscanf(text, "%lu %lu", vss, rss) != 2) exit(3);
    *vss *= page;
    *rss *= page;
}

int main(int argc, char **argv) {
    int events = atoi(argv[1]);
    long hold_us = atol(argv[2]);
    size_t base = strtoul(argv[3], NULL, 10) << 20;
    /* 4 KiB pages (transparent huge pages would make the walk 512 times cheaper). */
    int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
    char *resident = mmap(NULL, base, prot, flags, -1, 0);
    char *moving = mmap(NULL, 3 * BLOCK, prot, flags, -1, 0);
    if (resident == MAP_FAILED || moving == MAP_FAILED) return 4;
    madvise(resident, base, MADV_NOHUGEPAGE);
    madvise(moving, 3 * BLOCK, MADV_NOHUGEPAGE);
    memset(resident, 1, base);
    int touched = 0;
    unsigned seed = 12345;
    for (int i = 0; i < events; i++) {
        seed = seed * 1103515245u + 12345u;
        int want = (touched + 1 + (seed >> 16) % 3) % 4; /* 0-3 blocks, never the same as now */
        /* Touching and MADV_DONTNEED, unlike mmap and munmap, do not wait for a reader of
           smaps_rollup (it holds the mmap lock for reading): the walk cannot slow the events. */
        for (; touched < want; touched++) memset(moving + touched * BLOCK, 2, BLOCK);
        for (; touched > want; touched--) madvise(moving + (touched - 1) * BLOCK, BLOCK, MADV_DONTNEED);
        unsigned long rss, vss;
        own(&rss, &vss);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        char line[160];
        int n = snprintf(line, sizeof line, "event %d rss %lu vss %lu at %ld.%09ld\n", i, rss,
                         vss, (long)t.tv_sec, t.tv_nsec);
        if (write(1, line, n) != n) return 6;
        struct timespec hold = {0, hold_us * 1000};
        nanosleep(&hold, NULL);
    }
    return 0;
}
