/* Allocation-bound microbenchmark: each thread replaces a random block among 256 live ones with
 * a new one of a random size (16..511 bytes), N times. Prints the calls it made.
 * Usage: alloc-micro THREADS ITERATIONS_PER_THREAD */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long iterations;

static void *run(void *arg)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(uintptr_t)(arg + 1);
    char *slots[256] = {0};
    for (long i = 0; i < iterations; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned s = x & 255;
        free(slots[s]);
        slots[s] = malloc(16 + (x >> 8) % 496);
        slots[s][0] = (char)i;
    }
    for (int s = 0; s < 256; s++)
        free(slots[s]);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    iterations = argc > 2 ? atol(argv[2]) : 10000000;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    printf("calls %ld\n", (long)threads * (2 * iterations + 256));
    return 0;
}
