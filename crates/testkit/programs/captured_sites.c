/* Known call sites for crates/symbols/tests/resolve.rs: each capture() records its return address,
 * i.e. an address inside the caller, as an unwinder would. main prints them, then its own
 * /proc/self/maps, so the test resolves them exactly as alloclens resolves a recorded stack. */
#include <stdio.h>

static void *return_addresses[8];
static int captured;

__attribute__((noinline)) void capture(void) {
    return_addresses[captured++] = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

/* Inlined into outer_with_inline: its return address gives two frames. */
static inline __attribute__((always_inline)) void inlined_step(void) {
    capture();
}

__attribute__((noinline)) void outer_with_inline(void) {
    inlined_step();
    __asm__ volatile("" ::: "memory"); /* no tail call: the return address stays in this function */
}

__attribute__((noinline)) void alpha(void) {
    capture();
    __asm__ volatile("" ::: "memory");
}

int main(void) {
    alpha();
    outer_with_inline();
    for (int i = 0; i < captured; i++)
        printf("ra %p\n", return_addresses[i]);
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    while (maps && fgets(line, sizeof line, maps))
        printf("map %s", line);
    return 0;
}
