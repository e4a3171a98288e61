#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static const size_t sizes[] = {1, 24, 25, 100, 1000, 4000, 200000, 5 << 20};
    size_t sum = 0, n = sizeof sizes / sizeof *sizes;
    size_t made = 0; /* usable bytes of every block that became live, freed or not */
    void *keep[16];
    for (size_t i = 0; i < n; i++) {
        keep[i] = malloc(sizes[i]);
        memset(keep[i], 1, sizes[i]);
        sum += malloc_usable_size(keep[i]);
    }
    made = sum;
    void *gone = malloc(300000); /* mmapped, freed: not live */
    made += malloc_usable_size(gone);
    free(gone);
    /* reallocs of every kind: a new block, grown in place, moved (a block after it), into an
     * mmapped chunk and out of one, shrunk; and realloc(p, 0), which frees under glibc */
    static const size_t resized[] = {56, 5000, 300000, 100, 30};
    void *r = realloc(NULL, 40);
    made += malloc_usable_size(r);
    void *after = NULL;
    for (size_t i = 0; i < sizeof resized / sizeof *resized; i++) {
        r = realloc(r, resized[i]);
        made += malloc_usable_size(r);
        if (after == NULL) {
            after = malloc(16);
            made += malloc_usable_size(after);
        }
    }
    void *zero = malloc(70);
    made += malloc_usable_size(zero);
    volatile size_t none = 0;
    if (realloc(zero, none) != NULL) return 1;
    keep[n++] = r;
    keep[n++] = after;
    sum += malloc_usable_size(r) + malloc_usable_size(after);
    char line[96];
    int len = snprintf(line, sizeof line, "live: usable=%zu blocks=%zu made=%zu\n", sum, n, made);
    if (write(1, line, (size_t)len) != len) return 1;
    return keep[0] == NULL;
}
