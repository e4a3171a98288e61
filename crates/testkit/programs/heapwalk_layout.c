/* glibc's heap walked from outside (heapwalk): the main thread, in the main arena, and a second
 * thread, in an arena of its own, each allocate 64 chunks of 3 pages (12,272 bytes asked for,
 * chunks of 12,288), write them all, and free every odd one (too large for the tcache, and never
 * next to another free one: they stay as they are). Prints each chunk as "ARENA kept|freed ADDR"
 * (the chunk's address, the block's less 16), then "ready", and holds until stdin closes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 64
#define SIZE 12272

static char *main_blocks[N], *thread_blocks[N];

static void pattern(char **blocks) {
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(SIZE);
        memset(blocks[i], 1, SIZE);
    }
    for (int i = 1; i < N; i += 2) free(blocks[i]);
}

static void *in_thread(void *unused) {
    (void)unused;
    pattern(thread_blocks);
    return NULL;
}

static void print(const char *arena, char **blocks) {
    for (int i = 0; i < N; i++)
        printf("%s %s %p\n", arena, i % 2 ? "freed" : "kept", (void *)(blocks[i] - 16));
}

int main(void) {
    /* stdout's buffer is ours: a malloc'd one would take part of a freed chunk. */
    static char out[8192];
    setvbuf(stdout, out, _IOFBF, sizeof out);
    pattern(main_blocks);
    pthread_t t;
    pthread_create(&t, NULL, in_thread, NULL);
    pthread_join(t, NULL);
    print("main", main_blocks);
    print("thread", thread_blocks);
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return 0;
}
