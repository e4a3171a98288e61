#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static const size_t sizes[] = {1, 24, 25, 100, 1000, 4000, 200000, 5 << 20};
    size_t sum = 0, n = sizeof sizes / sizeof *sizes;
    void *keep[16];
    for (size_t i = 0; i < n; i++) {
        keep[i] = malloc(sizes[i]);
        memset(keep[i], 1, sizes[i]);
        sum += malloc_usable_size(keep[i]);
    }
    void *gone = malloc(300000); /* mmapped, freed: not live */
    free(gone);
    char line[64];
    int len = snprintf(line, sizeof line, "live: usable=%zu blocks=%zu\n", sum, n);
    if (write(1, line, (size_t)len) != len) return 1;
    return keep[0] == NULL;
}
