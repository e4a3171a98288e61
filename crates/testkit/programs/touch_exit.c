/* Touches MIB mebibytes of heap, holds them HOLD_MS milliseconds (0: exits at once), then exits
 * with the memory still held: its peak RSS is at least MIB MiB, for however short a time. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 64;
    long hold_ms = argc > 2 ? atol(argv[2]) : 0;
    volatile char *p = malloc(mib << 20);
    if (!p) return 1;
    memset((char *)p, 1, mib << 20);
    struct timespec t = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
    if (hold_ms > 0) nanosleep(&t, 0);
    return p[mib] != 1;
}
