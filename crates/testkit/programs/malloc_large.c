/* Like mimalloc-bench's malloc-large: four slots, each repeatedly freed and refilled with a
 * 5-25 MiB block that is written all over, for 1.5 s. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void) {
    void *slot[4] = {0};
    unsigned seed = 1;
    double end = now() + 1.5;
    while (now() < end) {
        seed = seed * 1103515245u + 12345u;
        size_t size = (size_t)(5 + (seed >> 16) % 21) << 20;
        int i = (seed >> 8) % 4;
        free(slot[i]);
        slot[i] = malloc(size);
        memset(slot[i], 1, size);
    }
    return 0;
}
