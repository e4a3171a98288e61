/* Loaded with dlopen by traced.c: its calls to malloc resolve to the shim like everyone's. */
#include <stdlib.h>

void plugin_churn(long n)
{
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(1901);
        free(p);
    }
}
