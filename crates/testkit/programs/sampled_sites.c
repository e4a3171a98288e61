/*
 * Call sites whose calls and sizes the caller sets, for the estimates of sampled stacks
 * (crates/alloclens/tests/sampled_sites.rs):
 *
 *   sampled_sites CHURN_N CHURN_SIZE BIG_N BIG_SIZE BIG_LEAKED KEEP_N KEEP_SIZE
 *
 *   churn  CHURN_N blocks of CHURN_SIZE bytes, each freed at once
 *   big    BIG_N (at most 64) blocks of BIG_SIZE bytes, all live together, then all but BIG_LEAKED freed
 *   keep   KEEP_N blocks of KEEP_SIZE bytes, never freed: the process's peak is at the end
 *
 * With an eighth argument `wait`, it then prints "ready" and waits for the end of its standard
 * input before it exits (a process to take snapshots of, crates/alloclens/tests/cli/snapshot.rs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) void churn(long n, size_t size)
{
    for (long i = 0; i < n; i++) {
        sink = malloc(size);
        free(sink);
    }
}

/* A static array: an allocation for it would be a small, sampled call of this site. */
static void *blocks[64];

__attribute__((noinline)) void big(long n, size_t size, long leaked)
{
    if (n > 64)
        n = 64;
    for (long i = 0; i < n; i++)
        blocks[i] = malloc(size);
    for (long i = leaked; i < n; i++)
        free(blocks[i]);
}

__attribute__((noinline)) void keep(long n, size_t size)
{
    for (long i = 0; i < n; i++)
        sink = malloc(size);
}

int main(int argc, char **argv)
{
    if (argc != 8 && !(argc == 9 && strcmp(argv[8], "wait") == 0)) {
        fprintf(stderr, "usage: sampled_sites CHURN_N CHURN_SIZE BIG_N BIG_SIZE BIG_LEAKED KEEP_N KEEP_SIZE [wait]\n");
        return 2;
    }
    churn(atol(argv[1]), atol(argv[2]));
    big(atol(argv[3]), atol(argv[4]), atol(argv[5]));
    keep(atol(argv[6]), atol(argv[7]));
    if (argc == 9) {
        char buf[64];
        printf("ready\n");
        fflush(stdout);
        while (read(0, buf, sizeof buf) > 0)
            ;
    }
    return 0;
}
