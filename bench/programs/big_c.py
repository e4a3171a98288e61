"""Writes a C file that gcc -O2 works on for about a second per 300 functions.
Usage: big_c.py FUNCTIONS OUT.c"""
import sys

functions, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write("#include <string.h>\n")
    for i in range(functions):
        f.write(f"""
struct s{i} {{ int a[{i % 17 + 3}]; double d; char name[32]; }};
int f{i}(struct s{i} *p, int n) {{
    int acc = {i};
    for (int k = 0; k < n; k++) {{ acc += p->a[k % {i % 17 + 3}] * (k ^ {i}); if (acc > 1000) acc -= p->d; }}
    memcpy(p->name, "abc", 4);
    return acc + (int)strlen(p->name);
}}
""")
