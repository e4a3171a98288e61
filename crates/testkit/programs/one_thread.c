/* The watch agent and the program's own threads. Allocates and frees for 400 ms, then prints
 * "threads N single S" (N: Threads in /proc/self/status, S: glibc's __libc_single_threaded).
 * With the argument "start", then starts a thread of its own (that allocates and ends), and
 * prints the same line again 300 ms later. Then keeps 1000 blocks, prints "held", and makes no
 * heap call for 1500 ms. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <unistd.h>

static int threads(void) {
    char b[4096];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        size_t len = fread(b, 1, sizeof b - 1, f);
        b[len] = 0;
        fclose(f);
        char *t = strstr(b, "\nThreads:");
        if (t)
            n = atoi(t + 9);
    }
    return n;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++)
        free(malloc(64));
    return NULL;
}

int main(int argc, char **argv) {
    static void *keep[1000];
    double end = now() + 0.4;
    while (now() < end) {
        for (int i = 0; i < 1000; i++)
            keep[i] = malloc(16 + i % 100);
        for (int i = 0; i < 1000; i++)
            free(keep[i]);
        usleep(1000);
    }
    printf("threads %d single %d\n", threads(), __libc_single_threaded);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "start") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, work, NULL);
        pthread_join(t, NULL);
        usleep(300000);
        printf("threads %d single %d\n", threads(), __libc_single_threaded);
        fflush(stdout);
    }
    for (int i = 0; i < 1000; i++)
        keep[i] = malloc(100);
    printf("held\n");
    fflush(stdout);
    usleep(1500000);
    for (int i = 0; i < 1000; i++)
        free(keep[i]);
    return 0;
}
