/* Long-lived blocks freed chunks later (in allocation order, then in reverse), short-lived ones,
 * realloc chains, a fork whose child frees inherited blocks: about 500,000 events. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#define N 120000
static void *keep[N];
int main(void) {
    for (int i = 0; i < N; i++) {
        keep[i] = malloc(16 + (i * 37) % 700);
        void *volatile brief = malloc(24 + i % 50); /* dies at once */
        free(brief);
    }
    char *grow = malloc(8);
    for (int i = 1; i < 2000; i++) grow = realloc(grow, 8 + 40 * i);
    for (int i = 0; i < N / 2; i++) free(keep[i]);         /* in allocation order */
    pid_t child = fork();
    if (child == 0) {
        for (int i = N / 2; i < N / 2 + 1000; i++) free(keep[i]); /* inherited blocks */
        for (int i = 0; i < 5000; i++) {
            void *volatile b = malloc(100 + i % 9);
            free(b);
        }
        _exit(0);
    }
    waitpid(child, NULL, 0);
    for (int i = N - 1; i >= N / 2 + 100; i--) free(keep[i]); /* in reverse */
    free(grow);
    return 0;
}
