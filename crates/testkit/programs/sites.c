/*
 * Known call sites for `record --stacks` (crates/recorder/tests/integration/stacks.rs). Each site allocates a size no other
 * site uses, so a test can find its events by size and check their stacks:
 *
 *   site_a  1000 x 48 B through alloc_block (a helper, not inlined), freed at once
 *   site_b    10 x 4096 B through fill_inline (always inlined: its call sits in site_b)
 *   site_c     5 x 777 B, leaked
 *   site_t   100 x 200 B through alloc_block, on a second thread
 *   site_d     3 x 99 B through alloc_block, freed: in the parent before fork and in the child
 *   site_f    20 x 300 B through alloc_block, in the fork child only
 *   site_e     7 x 555 B, in the image exec'd by "sites exec"
 *   plugin_churn (in a library loaded with dlopen, "sites dlopen PLUGIN") n x 1901 B
 *
 * Built with -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls, so each site's calls are
 * real calls (no tail calls) and the return addresses fall inside the named functions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void *alloc_block(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

static inline __attribute__((always_inline)) void *fill_inline(size_t n)
{
    char *p = malloc(n);
    if (p)
        p[0] = 1;
    return p;
}

__attribute__((noinline)) void site_a(void)
{
    for (int i = 0; i < 1000; i++)
        free(alloc_block(48));
}

__attribute__((noinline)) void site_b(void)
{
    void *keep[10];
    for (int i = 0; i < 10; i++)
        keep[i] = fill_inline(4096);
    for (int i = 0; i < 10; i++)
        free(keep[i]);
}

void *volatile leaked[5];

__attribute__((noinline)) void site_c(void)
{
    for (int i = 0; i < 5; i++)
        leaked[i] = malloc(777);
}

__attribute__((noinline)) void site_d(void)
{
    for (int i = 0; i < 3; i++)
        free(alloc_block(99));
}

__attribute__((noinline)) void site_f(void)
{
    for (int i = 0; i < 20; i++)
        free(alloc_block(300));
}

__attribute__((noinline)) void site_e(void)
{
    for (int i = 0; i < 7; i++)
    {
        void *volatile p = malloc(555);
        free(p);
    }
}

__attribute__((noinline)) void *site_t(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        free(alloc_block(200));
    return NULL;
}

/* site_d from one call site before the fork (in the parent) and after it (in the child): the
 * same stack in both processes. The volatile counter keeps the loop a loop (one call site). */
__attribute__((noinline)) pid_t d_around_fork(void)
{
    pid_t child = -1;
    for (volatile int round = 0; round < 2; round++) {
        site_d();
        if (round == 0 && (child = fork()) != 0)
            break;
    }
    return child;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        char *args[] = {argv[0], "exec-child", NULL};
        execv("/proc/self/exe", args);
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        site_e();
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "dlopen") == 0) {
        void *h = dlopen(argv[2], RTLD_NOW);
        if (!h)
            return 2;
        void (*fn)(long) = (void (*)(long))dlsym(h, "plugin_churn");
        fn(50);
        dlclose(h);
        return 0;
    }
    site_a();
    site_b();
    site_c();
    pthread_t t;
    pthread_create(&t, NULL, site_t, NULL);
    pthread_join(t, NULL);
    pid_t child = d_around_fork();
    if (child == 0) {
        site_f();
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    return 0;
}
