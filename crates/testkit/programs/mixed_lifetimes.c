/*
 * One call site (one stack) making two kinds of blocks, for the weighting of sampled per-site
 * distributions (crates/alloclens/tests/cli/sampled_sites.rs):
 *
 *   mixed_lifetimes ROUNDS SMALL_PER_ROUND SMALL_SIZE LARGE_SIZE
 *
 * Each round makes one LARGE_SIZE block, kept until the next round's (lifetime 2 * SMALL_PER_ROUND
 * + 1 calls), then SMALL_PER_ROUND blocks of SMALL_SIZE, each freed at once (lifetime 0 calls).
 * Every block comes from the one call of malloc in `allocate`, called from one place.
 */
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

__attribute__((noinline)) void *allocate(size_t size)
{
    void *p = malloc(size);
    sink = p;
    return p;
}

/* Frees a small block at once; keeps a large one until the next. (A function of its own, so that
 * the compiler cannot duplicate the call of `allocate` into two branches: two stacks.) */
__attribute__((noinline)) void settle(void *p, int is_large)
{
    static void *large;
    if (!is_large) {
        free(p);
    } else {
        free(large);
        large = p;
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: mixed_lifetimes ROUNDS SMALL_PER_ROUND SMALL_SIZE LARGE_SIZE\n");
        return 2;
    }
    long rounds = atol(argv[1]), small = atol(argv[2]);
    size_t sizes[2] = {atol(argv[3]), atol(argv[4])};
    for (long i = 0; i < rounds * (small + 1); i++) {
        int is_large = i % (small + 1) == 0;
        settle(allocate(sizes[is_large]), is_large);
    }
    settle(NULL, 1); /* frees the last large block */
    return 0;
}
