/* Heap residency with a known layout (analyze --residency): 64 pairs of blocks, each block exactly
 * one page of glibc's main arena (4080 bytes at a page's start, the next chunk's 16-byte header at
 * its end), allocated alternately by keep_block and temp_block and written; then free_temps frees
 * every temp block. Each kept page holds one live block (keep_block's); each freed page holds
 * none (temp_block's, the last block freed there). A fence block keeps the last freed page from
 * the top chunk. Holds for argv[1] ms, then exits. Exit 2 when glibc did not lay the blocks out
 * as this expects. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE 4096
#define PAIRS 64
#define BLOCK (PAGE - 16)

__attribute__((noinline)) static void *keep_block(void) { return malloc(BLOCK); }
__attribute__((noinline)) static void *temp_block(void) { return malloc(BLOCK); }
__attribute__((noinline)) static void free_temps(void **temp) {
    for (int i = 0; i < PAIRS; i++) free(temp[i]);
}

/* Stored here so that the compiler keeps every call (it may drop a malloc whose block is unused). */
void *volatile kept_pointer;

int main(int argc, char **argv) {
    static void *keep[PAIRS], *temp[PAIRS];
    /* Where the top chunk begins: a block too large for any bin comes from it, and freed it
     * goes back into it. Then a padding chunk from there, sized so that the next chunk's data
     * begins on a page. */
    char *probe = malloc(40000);
    kept_pointer = probe;
    uintptr_t top = (uintptr_t)probe - 16;
    free(probe);
    size_t pad = 40960 + (PAGE - (top + 16) % PAGE) % PAGE;
    void *padding = malloc(pad - 8); /* a chunk of exactly `pad` bytes */
    kept_pointer = padding;
    for (int i = 0; i < PAIRS; i++) {
        keep[i] = keep_block();
        temp[i] = temp_block();
        memset(keep[i], 1, BLOCK);
        memset(temp[i], 2, BLOCK);
        if ((uintptr_t)keep[i] % PAGE || (uintptr_t)temp[i] % PAGE) {
            fprintf(stderr, "block %d not at a page start (%p %p)\n", i, keep[i], temp[i]);
            return 2;
        }
    }
    void *fence = malloc(64);
    kept_pointer = fence;
    free_temps(temp);
    printf("held %p\n", keep[0]);
    fflush(stdout);
    usleep(atoi(argv[1]) * 1000);
    /* Nothing freed after the hold: the test's readings of the hold are those after the last
     * call, and a free here would end the layout before a reading could. The exit takes it. */
    return 0;
}
