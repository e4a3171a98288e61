/* memcheck's nine leak cases (the table in mc_leakcheck.c; memcheck/tests/leak-cases.c), our
 * own program: for each case a global root RRR, a block AAA and a block BBB, linked by start
 * pointers (->) or interior pointers (-?->):
 *
 *   (1) RRR ---------> BBB           BBB still reachable
 *   (2) RRR -> AAA -> BBB            both still reachable
 *   (3)               BBB            definitely lost
 *   (4)        AAA -> BBB            AAA definitely, BBB indirectly lost
 *   (5) RRR ----?----> BBB           possibly lost
 *   (6) RRR -> AAA -?-> BBB          AAA still reachable, BBB possibly lost
 *   (7) RRR -?-> AAA -> BBB          both possibly lost
 *   (8) RRR -?-> AAA -?-> BBB        both possibly lost
 *   (9)        AAA -?-> BBB          AAA definitely, BBB indirectly lost
 *
 * Case k's blocks are 24 + 8k (AAA) and 40 + 8k (BBB) bytes, zeroed, so the per-kind bytes
 * tell the cases apart; the link from AAA sits at offset 16 and interior pointers point 8 bytes
 * in, at a zero word, so that none of memcheck's heuristics (std::string, new[], length64,
 * multiple inheritance) applies. No stdio: the C library allocates nothing of its own. Built at
 * -O0: the compiler would drop the calloc of a block nothing reads. */
#include <stdlib.h>
#include <string.h>

void *case1_root, *case2_root, *case5_root, *case6_root, *case7_root, *case8_root;

static char *aaa(int k) { return calloc(1, 24 + 8 * k); }
static char *bbb(int k) { return calloc(1, 40 + 8 * k); }

static void link_to(char *from, void *to) { memcpy(from + 16, &to, sizeof to); }

static void *interior(char *p) { return p + 8; }

__attribute__((noinline)) static void make_cases(void)
{
    char *a, *b;
    case1_root = bbb(1);

    a = aaa(2), b = bbb(2);
    link_to(a, b);
    case2_root = a;

    (void)bbb(3);

    a = aaa(4), b = bbb(4);
    link_to(a, b);

    case5_root = interior(bbb(5));

    a = aaa(6), b = bbb(6);
    link_to(a, interior(b));
    case6_root = a;

    a = aaa(7), b = bbb(7);
    link_to(a, b);
    case7_root = interior(a);

    a = aaa(8), b = bbb(8);
    link_to(a, interior(b));
    case8_root = interior(a);

    a = aaa(9), b = bbb(9);
    link_to(a, interior(b));
}

/* Overwrites the stack the cases were made on, so that no stale pointer is left there. */
__attribute__((noinline)) static void clear_stack(void)
{
    volatile char zeros[16384];
    for (size_t i = 0; i < sizeof zeros; i++)
        zeros[i] = 0;
}

int main(void)
{
    make_cases();
    clear_stack();
    return 0;
}
