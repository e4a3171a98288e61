/* THREADS threads (default 4) that malloc, fill, realloc, check and free blocks as fast as they
 * can until stdin reaches its end, for the attach tests: a block whose bytes are not what was
 * written (a corrupted heap, a clobbered register) is counted as an error. At the end each thread
 * prints its line and main prints "done"; the exit status is 0 when no thread saw an error.
 * Usage: busy_threads [THREADS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop;

struct worker {
    pthread_t thread;
    int index;
    unsigned long iterations, errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned seed = (unsigned)w->index * 7919u + 1;
    while (!stop) {
        size_t size = 16 + (seed = seed * 1103515245u + 12345u) % 4000;
        unsigned char *p = malloc(size);
        memset(p, (int)(size & 0xff), size);
        size_t bigger = size + 64 + seed % 8192;
        p = realloc(p, bigger);
        for (size_t i = 0; i < size; i++)
            if (p[i] != (unsigned char)(size & 0xff)) {
                w->errors++;
                break;
            }
        free(p);
        w->iterations++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (n < 1 || n > 64)
        return 2;
    struct worker workers[64];
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker){.index = i};
        pthread_create(&workers[i].thread, NULL, work, &workers[i]);
    }
    printf("running %d\n", n);
    fflush(stdout);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0)
        ;
    stop = 1;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(workers[i].thread, NULL);
        printf("thread %d: %s, %lu errors\n", i, workers[i].iterations > 0 ? "ran" : "idle",
               workers[i].errors);
        failed |= workers[i].errors != 0 || workers[i].iterations == 0;
    }
    printf("done\n");
    return failed;
}
