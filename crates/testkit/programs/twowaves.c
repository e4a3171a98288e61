/* LinkedIn's two waves (Venice): 200,000 blocks of 500 bytes, every 16th kept: glibc keeps the
 * freed memory between the survivors. Holds it for `argv[1]` seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = 200000;
    char **a = malloc(n * sizeof *a);
    for (int i = 0; i < n; i++) { a[i] = malloc(500); memset(a[i], 1, 500); }
    for (int i = 0; i < n; i++) if (i % 16) { free(a[i]); a[i] = 0; }
    printf("held\n");
    fflush(stdout);
    sleep(atoi(argv[1]));
    return 0;
}
