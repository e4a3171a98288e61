/* Known call sites for crates/analyze/tests/integration/call_sites.rs: A reaches helper 3 times from one line, B once, C directly;
 * helper is inlined into B's caller path through an always-inline step. Each "allocation" captures its
 * stack with glibc's backtrace() (dropping capture's own frame, as the shim drops its own) and prints it,
 * then the program prints /proc/self/maps, so the test folds real stacks resolved from real modules. */
#include <execinfo.h>
#include <stdio.h>

__attribute__((noinline)) void capture(void) {
    void *frames[64];
    int n = backtrace(frames, 64);
    printf("stack");
    for (int i = 1; i < n; i++)
        printf(" %p", frames[i]);
    printf("\n");
}

__attribute__((noinline)) void helper(void) {
    capture();
    __asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void inlined_step(void) {
    helper();
}

static volatile int repeats = 3; /* volatile: the loop is not unrolled into three call sites */

__attribute__((noinline)) void A(void) {
    for (int i = 0; i < repeats; i++)
        helper();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void B(void) {
    inlined_step();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void C(void) {
    capture();
    __asm__ volatile("" ::: "memory");
}

int main(void) {
    A();
    B();
    C();
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    while (maps && fgets(line, sizeof line, maps))
        printf("map %s", line);
    return 0;
}
