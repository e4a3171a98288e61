/* Two processes (a fork) allocate with sizes from an LCG (a trace that compresses poorly) and
 * mark a phase each time round: about 1.7 B/event. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
extern void alloclens_mark(const char *) __attribute__((weak));
static void noisy(long n, unsigned long x) {
    static void *slot[4096];
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        unsigned k = (x >> 33) % 4096;
        free(slot[k]);
        slot[k] = malloc(1 + (x >> 45) % 5000);
        if (i % 100000 == 0 && alloclens_mark) alloclens_mark("round");
    }
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    pid_t child = fork();
    noisy(n, child == 0 ? 7 : 12345);
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    return 0;
}
