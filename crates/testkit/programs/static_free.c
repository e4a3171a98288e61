/* Statically linked, so no preloaded shim can see its one malloc and free. */
#include <stdlib.h>
int main(void) { free(malloc(100)); return 0; }
