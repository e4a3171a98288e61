/* A C program printing `event I` for I in 0..N, one line each. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) printf("event %d\n", i);
    return 0;
}
