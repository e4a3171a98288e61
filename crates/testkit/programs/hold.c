/* A C program holding N blocks (alternately 40000 and 100 bytes) then freeing them: its calls are
 * one malloc and one free per block, plus the array's malloc and free. */
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    void **keep = malloc(n * sizeof *keep);
    for (int i = 0; i < n; i++) keep[i] = malloc(i % 2 ? 100 : 40000);
    for (int i = 0; i < n; i++) free(keep[i]);
    free(keep);
    return 0;
}
