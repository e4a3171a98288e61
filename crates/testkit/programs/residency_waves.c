/* Heap residency, the fragmentation of two waves under glibc (analyze --residency): wave A, 40,000
 * blocks of 500 bytes, and after every 16th of them a wave B block of the same size; all of wave A
 * is freed, wave B lives on. The pages left with a wave B block are held by it; the others hold
 * only wave A's free memory, glibc keeping them. Holds for argv[1] ms. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 40000

__attribute__((noinline)) static char *wave_a(void) { return malloc(500); }
__attribute__((noinline)) static char *wave_b(void) { return malloc(500); }

int main(int argc, char **argv) {
    static char *a[N], *b[N / 16 + 1];
    for (int i = 0; i < N; i++) {
        a[i] = wave_a();
        memset(a[i], 1, 500);
        if (i % 16 == 0) {
            b[i / 16] = wave_b();
            memset(b[i / 16], 2, 500);
        }
    }
    for (int i = 0; i < N; i++) free(a[i]);
    usleep(atoi(argv[1]) * 1000);
    /* Wave B is not freed after the hold: the test's readings of the hold are those after the
     * last call (a reading after such frees, before the exit, showed an empty heap). */
    return 0;
}
