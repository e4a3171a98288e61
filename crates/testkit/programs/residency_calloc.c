/* Heap residency (analyze --residency): a 64 MiB calloc never written (glibc maps it: its pages
 * are not resident), beside 4 MiB malloc'd and written. The calloc comes last, so that no page
 * is touched after the last call (the test's readings of the hold are those after it). Holds for
 * argv[1] ms. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static char *unwritten(void) { return calloc(64, 1 << 20); }
__attribute__((noinline)) static char *written(void) {
    char *p = malloc(4 << 20);
    memset(p, 1, 4 << 20);
    return p;
}

int main(int argc, char **argv) {
    char *small = written();
    char *big = unwritten();
    usleep(atoi(argv[1]) * 1000);
    /* Nothing freed after the hold (the test reads the readings after the last call). */
    (void)small;
    (void)big;
    return 0;
}
