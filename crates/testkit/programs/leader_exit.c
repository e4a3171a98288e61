/* A process whose main thread exits first: main holds MIB MiB (touched), starts a worker and calls
 * pthread_exit, so the thread-group leader is a zombie (state Z in /proc/PID/stat) while the
 * process runs on. Main prints "allocated" once the memory is resident and, with a third argument
 * "wait", waits for a line on stdin before exiting; the worker prints "ready" once main has exited
 * and ends the process SECONDS later (default: 60).
 * Usage: leader_exit [MIB [SECONDS [wait]]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_t leader;
static long seconds = 60;

static void *worker(void *arg) {
    pthread_join(leader, NULL); /* returns once main has exited */
    printf("ready\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    free(arg);
    exit(0);
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 16;
    if (argc > 2) seconds = atol(argv[2]);
    size_t size = (size_t)mib << 20;
    volatile char *block = malloc(size);
    for (size_t i = 0; i < size; i += 4096) block[i] = 1; /* resident, not just mapped */
    printf("allocated\n");
    fflush(stdout);
    if (argc > 3 && strcmp(argv[3], "wait") == 0) {
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 1;
    }
    leader = pthread_self();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)block) != 0) return 1;
    pthread_exit(NULL);
}
