/* touch_exit MIB [HOLD_MS [FREED_MS [BEFORE_MS]]]: touches MIB mebibytes of heap, holds them
 * HOLD_MS milliseconds (0: not at all), then exits with the memory still held: its peak RSS is at
 * least MIB MiB, for however short a time. With FREED_MS, it frees them instead and lives FREED_MS
 * milliseconds more; with BEFORE_MS, it waits that long before touching: a peak between two
 * samples, which only the kernel's high-water mark keeps. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    if (ms > 0) nanosleep(&t, 0);
}
int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 64;
    long hold_ms = argc > 2 ? atol(argv[2]) : 0;
    long freed_ms = argc > 3 ? atol(argv[3]) : -1;
    sleep_ms(argc > 4 ? atol(argv[4]) : 0);
    volatile char *p = malloc(mib << 20);
    if (!p) return 1;
    memset((char *)p, 1, mib << 20);
    sleep_ms(hold_ms);
    int touched = p[mib] == 1;
    if (freed_ms >= 0) {
        free((char *)p); /* an mmap'd block: its pages go back at once */
        sleep_ms(freed_ms);
    }
    return !touched;
}
