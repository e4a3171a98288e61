#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    for (int i = 0; i < 24 * 16; i++) {              /* 24 MiB in 64 KiB blocks, kept */
        char *volatile p = malloc(65536 - 64);
        memset(p, 1, 65536 - 64);
        if (i % 16 == 15) usleep(10000);
    }
    usleep(1000000);                                  /* held: the samples see it all */
    return 0;
}
