#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void *down(int n) {
    void *p = n == 0 ? malloc(24) : down(n - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}
int main(void) {
    for (int i = 0; i < 50; i++) {
        free(down(i));
        usleep(3000);
    }
    return 0;
}
