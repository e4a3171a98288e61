/* Holds 4000 blocks of 1 KiB (4,096,000 bytes, its own count of live bytes) and replaces one block
 * per step for `rounds` rounds of 50 ms; prints a checksum per round that depends only on its own
 * data, and exits with status 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define N 4000
int main(int argc, char **argv) {
    int rounds = atoi(argv[1]);
    char *b[N];
    unsigned long sum = 0, seed = 12345;
    for (int i = 0; i < N; i++) { b[i] = malloc(1024); memset(b[i], i & 0xff, 1024); }
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 200; k++) {
            seed = seed * 6364136223846793005UL + 1442695040888963407UL;
            int i = (int)((seed >> 33) % N);
            sum += (unsigned char)b[i][7];
            free(b[i]);
            b[i] = malloc(1024);
            memset(b[i], (int)(seed & 0xff), 1024);
        }
        printf("round %d sum %lu\n", r, sum);
        fflush(stdout);
        usleep(50000);
    }
    printf("done\n");
    return 3;
}
