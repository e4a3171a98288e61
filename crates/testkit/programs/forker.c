#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) { void *volatile p = malloc(64); (void)p; } /* 100 kept each */
    for (int i = 0; i < 10000; i++) { void *volatile p = malloc(500); free(p); }
    return NULL;
}
int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    usleep(300000);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 1000; i++) { void *volatile p = malloc(1000); (void)p; }
        usleep(300000);
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child %d\n", (int)child);
    fflush(stdout);
    execl("/bin/sh", "sh", "-c", "sleep 0.3; exit 3", (char *)NULL);
    return 1;
}
