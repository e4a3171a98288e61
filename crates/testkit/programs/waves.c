#include <stdlib.h>
enum { N = 200000 };
static void *keep[N];
int main(void) {
    for (int wave = 0; wave < 3; wave++) {
        for (int i = 0; i < N; i++) keep[i] = malloc(16 + (i % 7) * 8);
        for (int i = 0; i < N; i += 2) free(keep[i]);
        for (int i = 1; i < N; i += 2) free(keep[i]);
    }
    return 0;
}
