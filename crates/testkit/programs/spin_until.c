/* Spins without calling the allocator or making a system call until the first byte of FILE
 * (mapped shared) is no longer 0, then leaves with _exit(0) (no exit handler, no allocator call):
 * a process that never reaches an attach's safe point, and that the test ends when it chooses.
 * With "loader", a second thread spins so inside dl_iterate_phdr's callback, holding the dynamic
 * loader's lock that dlopen needs, while the main thread calls malloc and free every millisecond:
 * an attach borrows the main thread and its dlopen waits for that lock until the process exits.
 * Prints "spinning" once it spins. Usage: spin_until FILE [loader] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static volatile const char *flag;
static volatile int in_loader;

static void spin(void)
{
    while (!*flag)
        ;
    _exit(0);
}

static int inside_loader(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info, (void)size, (void)data;
    in_loader = 1;
    spin();
    return 0;
}

static void *hold_loader(void *arg)
{
    (void)arg;
    dl_iterate_phdr(inside_loader, NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    flag = mmap(NULL, 1, PROT_READ, MAP_SHARED, fd, 0);
    if (flag == MAP_FAILED)
        return 2;
    if (argc < 3 || strcmp(argv[2], "loader")) {
        printf("spinning\n");
        fflush(stdout);
        spin();
    }
    pthread_t t;
    if (pthread_create(&t, NULL, hold_loader, NULL))
        return 2;
    while (!in_loader)
        ;
    printf("spinning\n");
    fflush(stdout);
    struct timespec ms = {0, 1000000};
    for (;;) {
        void *volatile block = malloc(64); /* volatile: kept, not folded away */
        free(block);
        nanosleep(&ms, NULL);
    }
}
