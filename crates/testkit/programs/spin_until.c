/* Spins without calling the allocator or making a system call until the first byte of FILE
 * (mapped shared) is no longer 0, then leaves with _exit(0) (no exit handler, no allocator call):
 * a process that never reaches an attach's safe point, and that the test ends when it chooses.
 * Prints "spinning" once the file is mapped. Usage: spin_until FILE */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 2;
    volatile const char *flag = mmap(NULL, 1, PROT_READ, MAP_SHARED, fd, 0);
    if (flag == MAP_FAILED)
        return 2;
    printf("spinning\n");
    fflush(stdout);
    while (!*flag)
        ;
    _exit(0);
}
