/* A process whose main thread exits first: main starts a worker and calls pthread_exit at once,
 * so the thread-group leader is a zombie (state Z in /proc/PID/stat) while the process runs on.
 * The worker holds MIB MiB (touched), prints "allocated", and once main has exited, "ready"; it
 * ends the process SECONDS later (default: 60). With a third argument "wait", main waits for a
 * line on stdin before it exits. Usage: leader_exit [MIB [SECONDS [wait]]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_t leader;
static long mib = 16, seconds = 60;

static void *worker(void *arg) {
    (void)arg;
    size_t size = (size_t)mib << 20;
    volatile char *block = malloc(size);
    for (size_t i = 0; i < size; i += 4096) block[i] = 1; /* resident, not just mapped */
    printf("allocated\n");
    fflush(stdout);
    pthread_join(leader, NULL); /* returns once main has exited */
    printf("ready\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    free((void *)block);
    exit(0);
}

int main(int argc, char **argv) {
    if (argc > 1) mib = atol(argv[1]);
    if (argc > 2) seconds = atol(argv[2]);
    leader = pthread_self();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    if (argc > 3 && strcmp(argv[3], "wait") == 0) {
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 1;
    }
    pthread_exit(NULL);
}
