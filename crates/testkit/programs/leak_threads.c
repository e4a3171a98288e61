/* Roots besides globals, for record --leaks: a block held only on a worker thread's stack
 * (4321 bytes: the worker still runs when main returns, and is killed by the exit) and one held
 * only in the main thread's TLS (1234 bytes). One block is lost (777 bytes). The worker's DTV
 * (glibc's, pointed to 16 bytes in from its thread control block) is possibly lost, as memcheck
 * says too.
 * `leak_threads PROGRAM`: the worker execs PROGRAM instead, which kills main (an exec from a thread
 * other than main: the process runs on as PROGRAM). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static __thread void *tls_block;
static atomic_int ready;
static const char *exec_path;

static void *worker(void *arg)
{
    (void)arg;
    void *volatile on_stack = malloc(4321);
    atomic_store(&ready, 1);
    if (exec_path)
        execl(exec_path, exec_path, (char *)NULL);
    for (;;)
        pause();
    return on_stack;
}

/* Overwrites the stack below main's frame, where the frames of malloc's callees (an allocator's, a
 * preloaded hook's) left the lost block's address: a conservative scan at exit would take that
 * stale copy for a root, whatever the layout of those frames (LeakSanitizer's tests do the same). */
static __attribute__((noinline)) void scrub_stack(void)
{
    volatile char scratch[16384];
    for (size_t i = 0; i < sizeof scratch; i++)
        scratch[i] = 0;
}

int main(int argc, char **argv)
{
    pthread_t t;
    exec_path = argc > 1 ? argv[1] : NULL;
    tls_block = malloc(1234);
    if (!malloc(777))
        return 1;
    scrub_stack();
    pthread_create(&t, NULL, worker, NULL);
    while (!atomic_load(&ready))
        usleep(1000);
    while (exec_path)
        pause();
    return 0;
}
