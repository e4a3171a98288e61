#include <stdlib.h>
int main(void) {
    void *p = malloc(12345); free(p);                       /* lifetime 0 */
    void *a = malloc(12345); void *b = malloc(23456);
    free(a); free(b);                                       /* lifetimes 1 and 1 */
    void *c = malloc(30001); c = realloc(c, 30017); free(c); /* one chain, lifetime 1 */
    for (int i = 0; i < 3; i++) { void *volatile l = malloc(31337); (void)l; } /* 3 leaks */
    void *volatile null = NULL; free(null);                 /* a call that frees nothing */
    return 0;
}
