#!/usr/bin/env bash
# Replay speed: calls per second of `alloclens replay` per installed allocator, on a trace of the
# churn workload (1 thread) and of a python3 script (PYTHONMALLOC=malloc), beside the native
# program's own allocator-call rate (its calls over its wall time), and the driver's own cost per call:
# the replay under a bump "allocator" (malloc hands out the next address of a 64 GiB reservation,
# free does nothing, realloc copies) with --touch none, so nearly all of its time is the driver's.
# Usage: bench/replay-speed.sh [CHURN_OPS] [REPEATS]  (defaults 3000000, 3; medians of the repeats)
# The replays run through crates/replay/examples/replay_speed.rs (the library's own driver, built
# in release: lighter than the whole CLI), the same code `alloclens replay --serial
# --no-allocator-stats` runs; ALLOCLENS=path uses that alloclens for record and analyze instead of
# building it in release (their speed is not measured here).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=${1:-3000000}
REPEATS=${2:-3}
WORK=$(mktemp -d /tmp/alloclens-replay.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cargo build --release -q -p replay --example replay_speed
RS=$PWD/target/release/examples/replay_speed
if [ -n "${ALLOCLENS:-}" ]; then
  AL=$ALLOCLENS
else
  cargo build --release -q -p alloclens
  AL=$PWD/target/release/alloclens
fi

cat > "$WORK/bump.c" <<'C'
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
static char *base, *next;
static void *take(size_t n, size_t align)
{
    if (!base) {
        base = mmap(NULL, (size_t)64 << 30, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        next = base;
    }
    if (align < 16) align = 16;
    next = (char *)(((size_t)next + align - 1) & ~(align - 1));
    void *p = next;
    next += (n + 15) & ~(size_t)15;
    return p;
}
void *malloc(size_t n) { return take(n, 16); }
void *calloc(size_t a, size_t b) { return take(a * b, 16); }
/* No sizes are kept: the new block gets n bytes from the old address (the reservation is one
 * mapping, so reading past a smaller old block stays inside it). Correct for the driver's own
 * Rust vectors; costs a copy per replayed realloc (churn has none). */
void *realloc(void *p, size_t n) { void *q = take(n, 16); if (p) memmove(q, p, n); return q; }
void free(void *p) { (void)p; }
int posix_memalign(void **out, size_t a, size_t n) { *out = take(n, a); return 0; }
void *aligned_alloc(size_t a, size_t n) { return take(n, a); }
void *memalign(size_t a, size_t n) { return take(n, a); }
void *valloc(size_t n) { return take(n, 4096); }
void *pvalloc(size_t n) { return take(n, 4096); }
size_t malloc_usable_size(void *p) { (void)p; return 0; }
C
cc -O2 -shared -fPIC -o "$WORK/libbump.so" "$WORK/bump.c"


median() { python3 -c "import sys,statistics; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }
wall() { python3 -c "import subprocess,sys,time; t=time.monotonic(); subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True); print(time.monotonic()-t)" "$@"; }
calls_of() { "$AL" analyze --json "$1" | python3 -c 'import json,sys; print(sum(p["stats"]["calls_total"] for p in json.load(sys.stdin)["processes"]))'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
ALLOCS=$("$AL" allocators --json | python3 -c 'import json,sys; print(",".join(a["name"] for a in json.load(sys.stdin) if a["installed"]))')

CHURN=("$RS" churn "$OPS")
"$AL" record -q -o "$WORK/churn.alt" -- "${CHURN[@]}" >/dev/null 2>&1
PY=(env PYTHONMALLOC=malloc python3 "$PWD/bench/programs/service.py" 30000 3 --no-index)
"$AL" record -q -o "$WORK/python3.alt" -- "${PY[@]}" >/dev/null 2>&1

printf '%-10s %-12s %14s %14s %12s %14s %12s\n' trace variant calls/s ns/call vs-native cpu-calls/s cpu-ns/call
for name in churn python3; do
  trace="$WORK/$name.alt"
  calls=$(calls_of "$trace")
  natives=()
  for _ in $(seq "$REPEATS"); do
    if [ "$name" = churn ]; then
      # The workload's own count and time (its calls, not Rust's bookkeeping; no process start).
      read -r calls seconds < <("${CHURN[@]}")
      natives+=("$seconds")
    else
      natives+=("$(wall "${PY[@]}")")
    fi
  done
  native=$(median "${natives[@]}")
  native_rate=$(python3 -c "print($calls / $native)")
  printf '%-10s %-12s %14.0f %14.1f %12s   (%s calls over the program time: its allocator calls and its own work)\n' \
    "$name" native "$native_rate" "$(python3 -c "print($native / $calls * 1e9)")" 1.00x "$calls"
  "$RS" "$trace" "$ALLOCS" --repeat "$REPEATS" > "$WORK/$name.rates"
  # The bump allocator again, touching nothing: what is left is the driver's own cost per call.
  "$RS" "$trace" "bump=$WORK/libbump.so" --touch none --repeat "$REPEATS" > "$WORK/$name.bare"
  python3 - "$name" "$native_rate" "$WORK/$name.rates" "$WORK/$name.bare" <<'PY'
import statistics, sys
name, native = sys.argv[1], float(sys.argv[2])
def rows(path):
    for line in open(path):
        label, _calls, *rates = line.split()
        pairs = [r.split("/") for r in rates if "/" in r]
        ok = [(float(w), float(c)) for w, c in pairs]
        yield label.split("=")[0], ok, " ".join(rates)
def show(label, ok, note=""):
    wall = statistics.median(w for w, _ in ok)
    cpu = statistics.median(c for _, c in ok)
    print(f"{name:<10} {label:<12} {wall:14.0f} {1e9 / wall:14.1f} {wall / native:11.2f}x {cpu:14.0f} {1e9 / cpu:12.1f}{note}")
for v, ok, text in rows(sys.argv[3]):
    if ok:
        show(v, ok)
    else:
        print(f"{name:<10} {v:<12} {text:>14}")
for v, ok, _ in rows(sys.argv[4]):
    if ok:
        show("driver", ok, "   (bump allocator, --touch none: the driver's own cost per call)")
PY
done
echo "Replays are --serial (one thread), --touch pages unless said, without the agent (alloclens replay --serial --no-allocator-stats)."
