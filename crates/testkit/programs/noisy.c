/* Allocation sizes and frees from an LCG: a trace that compresses poorly (about 1.6 B/event). */
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    static void *slot[4096];
    unsigned long x = 12345;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        unsigned k = (x >> 33) % 4096;
        free(slot[k]);
        slot[k] = malloc(1 + (x >> 45) % 5000);
    }
    return 0;
}
