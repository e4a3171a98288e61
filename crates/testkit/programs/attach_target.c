/* A program to attach to (record --pid): THREADS workers (default 4) allocate and free one block
 * after another, each thread's sizes telling its calls apart and in order: thread t's i-th block
 * is SIZE_BASE + t * SIZE_STRIDE + i % SIZE_CYCLE bytes, so a trace that lost a call shows a gap.
 * The main thread reads commands on stdin (blocked in read between them):
 *   load PATH   dlopen PATH, call its plugin_churn(1000) (plugin.c: 1000 malloc/free of 1901
 *               bytes), print "loaded"
 *   got         print "malloc slot: hook" when the executable's GOT slot of malloc (read through
 *               the address of malloc, which PIE code loads from it) points elsewhere than the
 *               process's malloc (dlsym(RTLD_DEFAULT): an attached library is not global), else
 *               "malloc slot: allocator"
 *   EOF         stop the workers; print "thread T: N calls" for each (N: its mallocs plus its
 *               frees), then "done"; exit status 0 when every block read back what was written.
 * Prints "ready" once the workers run.
 * Usage: attach_target [THREADS] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE_BASE 10000
#define SIZE_STRIDE 2000
#define SIZE_CYCLE 1024
#define MAX_THREADS 16

static volatile int stop;

struct worker {
    pthread_t thread;
    int index;
    unsigned long calls, errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (unsigned long i = 0; !stop; i++) {
        size_t size = SIZE_BASE + (size_t)w->index * SIZE_STRIDE + i % SIZE_CYCLE;
        unsigned char *volatile p = malloc(size);
        if (p == NULL) {
            w->errors++;
            continue;
        }
        p[0] = (unsigned char)i;
        p[size - 1] = (unsigned char)w->index;
        if (p[0] != (unsigned char)i || p[size - 1] != (unsigned char)w->index)
            w->errors++;
        free(p);
        w->calls += 2;
    }
    return NULL;
}

/* The executable's GOT slot of malloc, loaded afresh at each call. */
static __attribute__((noinline)) void *malloc_slot(void)
{
    void *(*volatile f)(size_t) = malloc;
    return (void *)f;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (threads < 0 || threads > MAX_THREADS)
        threads = 4;
    static struct worker workers[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        workers[t].index = t;
        pthread_create(&workers[t].thread, NULL, work, &workers[t]);
    }
    printf("ready\n");
    fflush(stdout);
    char line[4096];
    int failed = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "load ", 5) == 0) {
            void *h = dlopen(line + 5, RTLD_NOW);
            void (*churn)(long) = h ? (void (*)(long))dlsym(h, "plugin_churn") : NULL;
            if (churn == NULL) {
                printf("load failed: %s\n", dlerror());
                failed = 1;
            } else {
                churn(1000);
                printf("loaded\n");
            }
            fflush(stdout);
        } else if (strcmp(line, "got") == 0) {
            int hooked = malloc_slot() != dlsym(RTLD_DEFAULT, "malloc");
            printf("malloc slot: %s\n", hooked ? "hook" : "allocator");
            fflush(stdout);
        }
    }
    stop = 1;
    unsigned long errors = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(workers[t].thread, NULL);
        printf("thread %d: %lu calls\n", t, workers[t].calls);
        errors += workers[t].errors;
    }
    printf("done\n");
    return errors == 0 && !failed ? 0 : 1;
}
