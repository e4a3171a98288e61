/* A program whose allocator calls are known: each mode allocates blocks of a distinctive size a
 * given number of times, so a test can count them in the trace independently of libc's own calls.
 * Usage: traced MODE COUNT [ARGS]. Prints "MODE done COUNT" on stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
void alloclens_mark(const char *label) __attribute__((weak));

static long count;
/* Stores through a volatile sink keep the compiler from eliding allocation/free pairs. */
static void *volatile sink;

static void churn(size_t size, long n)
{
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(size);
        free(p);
    }
}

/* signals: the handler's calls, counted by the program itself (SIGALRM is blocked while its
 * handler runs, so plain increments are exact). */
static volatile sig_atomic_t handler_calls;

static void on_alarm(int sig)
{
    (void)sig;
    /* calloc and realloc(p, 0) (which frees): the main loop uses malloc and free, so the trace
     * tells the two apart (the compiler turns realloc(NULL, n) into malloc). */
    void *p = calloc(1, 3001);
    handler_calls++;
    sink = p;
    p = realloc(p, 0);
    handler_calls++;
    sink = p;
}

static void *worker(void *arg)
{
    churn((size_t)(uintptr_t)arg, count);
    return NULL;
}

/* handoff: one thread allocates blocks and hands them to another that frees them, while that one
 * allocates too. Both allocate at once, so the counter's owner (the shim's al_next_seq) changes
 * while the other thread allocates, until the image shares the counter. */
#define HANDOFF_SLOTS 256
static void *handoff_slots[HANDOFF_SLOTS];

static void *handoff_receiver(void *arg)
{
    (void)arg;
    for (long i = 0; i < count; i++) {
        void *p;
        for (int spins = 0; (p = __atomic_exchange_n(&handoff_slots[i % HANDOFF_SLOTS], NULL,
                                                     __ATOMIC_ACQUIRE)) == NULL;
             spins++)
            if (spins > 1000)
                sched_yield();
        free(p);
        churn(1902, 4);
    }
    return NULL;
}

static void handoff(void)
{
    pthread_t t;
    pthread_create(&t, NULL, handoff_receiver, NULL);
    for (long i = 0; i < count; i++) {
        void *p = malloc(1901);
        churn(1903, 4);
        for (int spins = 0; __atomic_load_n(&handoff_slots[i % HANDOFF_SLOTS], __ATOMIC_ACQUIRE) != NULL;
             spins++)
            if (spins > 1000)
                sched_yield();
        __atomic_store_n(&handoff_slots[i % HANDOFF_SLOTS], p, __ATOMIC_RELEASE);
    }
    pthread_join(t, NULL);
}

/* nomem: a thread starts once the address space is nearly all used (`ulimit -v` as batch
 * systems set it): its first allocation finds no room for the shim's ring. Its stack is small and
 * glibc then serves it from the main arena, so the program itself runs on. */
static int nomem(const char *stderr_path)
{
    churn(2101, count);
    int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* where the shim warns */
    if (fd < 0 || dup2(fd, 2) < 0)
        return 9;
    close(fd);
    long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%ld", &pages) != 1)
        return 10;
    fclose(statm);
    struct rlimit limit;
    getrlimit(RLIMIT_AS, &limit);
    limit.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (2 << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0)
        return 11;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_t t;
    if (pthread_create(&t, &attr, worker, (void *)(uintptr_t)2102) != 0)
        return 12;
    pthread_join(t, NULL);
    churn(2103, count);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    count = atol(argv[2]);
    if (!strcmp(mode, "threads")) {
        int n = argc > 3 ? atoi(argv[3]) : 4;
        pthread_t t[64];
        for (int i = 0; i < n; i++)
            pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(2000 + i));
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    } else if (!strcmp(mode, "ops")) {
        for (long i = 0; i < count; i++) {
            void *a = malloc(1101);
            void *b = calloc(3, 367); /* 1101 bytes */
            a = realloc(a, 1102);
            b = reallocarray(b, 2, 551); /* 1102 */
            void *c = NULL;
            if (posix_memalign(&c, 64, 1103) != 0)
                return 3;
            void *d = aligned_alloc(64, 1104);
            void *e = memalign(64, 1105);
            void *f = valloc(1106);
            void *g = pvalloc(1107);
            sink = a; sink = b; sink = c; sink = d; sink = e; sink = f; sink = g;
            free(a); free(b); free(c); free(d); free(e); free(f); free(g);
        }
    } else if (!strcmp(mode, "fork")) {
        churn(1201, count);
        pid_t pid = fork();
        if (pid == 0) {
            churn(1202, count);
            exit(0);
        }
        churn(1203, count);
        int st;
        waitpid(pid, &st, 0);
    } else if (!strcmp(mode, "forkexec") || !strcmp(mode, "spawn")) {
        churn(1301, count);
        char *args[] = {argv[0], "leaf", argv[2], NULL};
        pid_t pid;
        if (!strcmp(mode, "spawn")) {
            if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ) != 0)
                return 4;
        } else if ((pid = fork()) == 0) {
            churn(1302, count);
            execv(argv[0], args);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 5;
    } else if (!strcmp(mode, "exec") || !strcmp(mode, "spawnrun") || !strcmp(mode, "vforkrun")) {
        /* Runs argv[3..] by exec in place, posix_spawn, or vfork + execvp. */
        if (argc < 4)
            return 2;
        churn(1901, count);
        if (!strcmp(mode, "exec")) {
            execv(argv[3], argv + 3);
            return 9;
        }
        pid_t pid;
        if (!strcmp(mode, "spawnrun")) {
            if (posix_spawn(&pid, argv[3], NULL, NULL, argv + 3, environ) != 0)
                return 4;
        } else if ((pid = vfork()) == 0) {
            execvp(argv[3], argv + 3);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 5;
    } else if (!strcmp(mode, "signals")) {
        /* Allocates in a loop while a 50 us interval timer allocates in its handler, until the
         * handler made `count` calls; writes both counts to argv[3]. */
        if (argc < 4)
            return 2;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval on = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &on, NULL);
        long main_calls = 0;
        while (handler_calls < count) {
            void *volatile p = malloc(2001);
            main_calls++;
            free(p);
            main_calls++;
        }
        setitimer(ITIMER_REAL, &off, NULL);
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, SIGALRM);
        sigprocmask(SIG_BLOCK, &block, NULL); /* a last pending alarm stays pending */
        FILE *f = fopen(argv[3], "w");
        if (!f)
            return 10;
        fprintf(f, "%ld %ld\n", (long)handler_calls, main_calls);
        fclose(f);
        return 0;
    } else if (!strcmp(mode, "leaf")) {
        churn(1401, count);
    } else if (!strcmp(mode, "quickexit")) {
        churn(1501, count);
        printf("%s done %ld\n", mode, count);
        fflush(stdout);
        _exit(7);
    } else if (!strcmp(mode, "sigkill")) {
        churn(1601, count);
        printf("%s done %ld\n", mode, count);
        fflush(stdout);
        raise(SIGKILL);
    } else if (!strcmp(mode, "mark")) {
        if (alloclens_mark)
            alloclens_mark("first");
        churn(1701, count);
        if (alloclens_mark)
            alloclens_mark("second");
        churn(1702, count);
        printf("phase third\n");
        fflush(stdout);
        usleep(100000);
        churn(1703, count);
    } else if (!strcmp(mode, "dlopen")) {
        void *h = dlopen(argv[3], RTLD_NOW);
        if (!h)
            return 6;
        void (*fn)(long) = (void (*)(long))dlsym(h, "plugin_churn");
        if (!fn)
            return 7;
        fn(count);
    } else if (!strcmp(mode, "handoff")) {
        /* In the process, then in fork children: each image starts with its own counter. */
        handoff();
        int children = argc > 3 ? atoi(argv[3]) : 0;
        for (int c = 0; c < children; c++) {
            pid_t pid = fork();
            if (pid == 0) {
                handoff();
                exit(0);
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 8;
        }
    } else if (!strcmp(mode, "nomem")) {
        if (argc < 4)
            return 2;
        int status = nomem(argv[3]);
        if (status != 0)
            return status;
    } else if (!strcmp(mode, "grow")) {
        /* COUNT MiB kept, allocated and touched 64 KiB at a time over about half a second,
           between small transient blocks; then held 0.4 s (memory samples see the top). */
        long blocks = count * 16;
        for (long i = 0; i < blocks; i++) {
            char *p = malloc(65536 - 64);
            if (!p)
                return 3;
            memset(p, 1, 65536 - 64);
            sink = p;
            for (int j = 0; j < 8; j++) {
                void *t = malloc(1901);
                sink = t;
                free(t);
            }
            if (i % 32 == 31)
                usleep(500000 / (blocks / 32 + 1));
        }
        usleep(400000);
    } else if (!strcmp(mode, "exitcode")) {
        churn(1801, count);
        return 42;
    } else {
        return 2;
    }
    printf("%s done %ld\n", mode, count);
    return 0;
}
