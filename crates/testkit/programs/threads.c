#include <pthread.h>
#include <stdlib.h>
void alloclens_mark(const char *label) __attribute__((weak));
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) { void *volatile p = malloc(777); free(p); } /* lifetime 0 */
    return malloc(4321);                                  /* freed by main, in "cleanup" */
}
int main(void) {
    if (alloclens_mark) alloclens_mark("work");
    pthread_t t; void *kept;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, &kept);
    if (alloclens_mark) alloclens_mark("cleanup");
    free(kept);
    return 0;
}
