/* A custom "allocator" whose valloc crashes and whose pvalloc never returns. */
#include <unistd.h>
#include <stddef.h>
void *valloc(size_t n) { (void)n; *(volatile int *)0 = 1; return 0; }
void *pvalloc(size_t n) { (void)n; for (;;) pause(); }
