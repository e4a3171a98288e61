#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void *volatile sink;

static void loop(size_t size, int n)
{
    for (int i = 0; i < n; i++) {
        sink = malloc(size);
        free(sink);
    }
}

static void *worker(void *arg)
{
    loop((size_t)(uintptr_t)arg, 20000);
    return NULL;
}

int main(void)
{
    loop(2 << 20, 300);
    loop(256, 100000);
    pthread_t a, b;
    pthread_create(&a, NULL, worker, (void *)(uintptr_t)1000);
    pthread_create(&b, NULL, worker, (void *)(uintptr_t)1000);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pid_t child = fork();
    loop(1002, 20000);
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    return 0;
}
