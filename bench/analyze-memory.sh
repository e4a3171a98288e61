#!/usr/bin/env bash
# Peak memory of `alloclens analyze` (and `analyze --sites`) on traces with and without call
# stacks, for the same program run for N and 4N iterations: issue 19 asks that analyze with
# stacks stream in memory bounded by the live set plus the stack table, so the max RSS must not
# grow with the number of events. The program keeps 1,000 blocks live in a ring and replaces one
# per iteration from one of 4 call sites (a fixed live set, few stacks, many short-lived blocks).
# Prints, per trace: events (calls, frees included), trace bytes, and analyze's max RSS (/usr/bin/time -v).
# Then the memory per live block (issue 24: at most 64 bytes, and 256 MiB on every trace here): a
# python3 program (PYTHONMALLOC=malloc) that keeps 4.5 M small objects live at its peak, recorded
# without addresses (block ids) and with them: analyze's max RSS over the image's peak live blocks.
# Usage: bench/analyze-memory.sh [ITERATIONS]   (default 1000000; the second run does 4x)
#        ALLOCLENS=path/to/alloclens to measure a given build (default: a release build).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
WORK=$(mktemp -d /tmp/alloclens-analyze-mem.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ -x /usr/bin/time ] || { echo "analyze-memory: /usr/bin/time is not installed (apt-get install time)" >&2; exit 1; }
if [ -z "${ALLOCLENS:-}" ]; then
  cargo build --release -q -p alloclens
  ALLOCLENS=$PWD/target/release/alloclens
fi
cat > "$WORK/ring.c" <<'C'
#include <stdlib.h>
#define LIVE 1000
static void *ring[LIVE];
__attribute__((noinline)) static void *site_a(size_t n) { return malloc(n); }
__attribute__((noinline)) static void *site_b(size_t n) { return malloc(n + 8); }
__attribute__((noinline)) static void *site_c(size_t n) { return calloc(1, n); }
__attribute__((noinline)) static void *site_d(size_t n) { return malloc(2 * n); }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    for (long i = 0; i < n; i++) {
        size_t size = 16 + (size_t)(i % 7) * 24;
        void *p;
        switch (i % 4) {
        case 0: p = site_a(size); break;
        case 1: p = site_b(size); break;
        case 2: p = site_c(size); break;
        default: p = site_d(size); break;
        }
        free(ring[i % LIVE]);
        ring[i % LIVE] = p;
    }
    for (int k = 0; k < LIVE; k++) free(ring[k]);
    return 0;
}
C
cc -O1 -fno-omit-frame-pointer -o "$WORK/ring" "$WORK/ring.c"

# Max RSS in KiB of a command (its output discarded).
max_rss() {
  /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }'
}
printf '%-8s %-10s %12s %12s %14s %20s\n' stacks iterations events trace_bytes analyze_KiB "analyze_--sites_KiB"
for iterations in "$N" $((4 * N)); do
  for stacks in no yes; do
    opt=(); [ "$stacks" = yes ] && opt=(--stacks)
    "$ALLOCLENS" record -q --force "${opt[@]}" -o "$WORK/t.alt" -- "$WORK/ring" "$iterations"
    events=$("$ALLOCLENS" analyze --json "$WORK/t.alt" | python3 -c '
import json, sys
print(sum(p["stats"]["calls_total"] for p in json.load(sys.stdin)["processes"]))')
    plain=$(max_rss "$ALLOCLENS" analyze "$WORK/t.alt")
    sites=-
    [ "$stacks" = yes ] && sites=$(max_rss "$ALLOCLENS" analyze --sites "$WORK/t.alt")
    printf '%-8s %-10s %12s %12s %14s %20s\n' "$stacks" "$iterations" "$events" \
      "$(stat -c %s "$WORK/t.alt")" "$plain" "$sites"
  done
done

# Bytes per live block: everything analyze holds (record buffers included) over the peak live
# blocks of the program's image.
PY=$(python3 -c 'import sys; print(sys.executable)')
cat > "$WORK/live.py" <<'PY'
d = {i: str(i) for i in range(1500000)}
l = [(i, i * 2.5) for i in range(500000)]
print(len(d), len(l))
PY
echo
printf '%-18s %12s %12s %14s %16s\n' python3-live events peak_blocks analyze_KiB bytes_per_block
for mode in block-ids addresses; do
  opt=(); [ "$mode" = addresses ] && opt=(--addresses)
  PYTHONMALLOC=malloc "$ALLOCLENS" record -q --force "${opt[@]}" -o "$WORK/py.alt" -- "$PY" "$WORK/live.py" >/dev/null
  read -r events peak < <("$ALLOCLENS" analyze --json "$WORK/py.alt" | python3 -c '
import json, sys
ps = json.load(sys.stdin)["processes"]
print(sum(p["stats"]["calls_total"] for p in ps), max(p["stats"]["peak_live_allocations"]["value"] for p in ps))')
  kib=$(max_rss "$ALLOCLENS" analyze "$WORK/py.alt")
  printf '%-18s %12s %12s %14s %16s\n' "$mode" "$events" "$peak" "$kib" "$((kib * 1024 / peak))"
done
