#!/usr/bin/env bash
# Two builds of alloclens side by side: `record` of alloc-micro under each, alternating (the order
# swapped every round, so that a load that comes and goes hits both alike), and the median of the
# per-round ratios NEW/OLD with their spread. For a change to the recorder or the embedded shim,
# where the figures between sessions move more than the change (bench/HISTORY.md, sixth session).
# Usage: bench/record-ab.sh OLD NEW [ROUNDS] [THREADS] [REPLACEMENTS]   (defaults 11, 1, 20000000)
#   OLD, NEW: alloclens binaries (e.g. a copy of target/release/alloclens before the change).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
[ $# -ge 2 ] || { sed -n 6p "$0" | sed 's/^# //' >&2; exit 2; }
OLD=$(realpath "$1"); NEW=$(realpath "$2"); ROUNDS=${3:-11}; THREADS=${4:-1}; N=${5:-20000000}
for b in "$OLD" "$NEW"; do
  [ -x "$b" ] || { echo "bench/record-ab.sh: $b is not an executable alloclens" >&2; exit 2; }
done
cd "$(dirname "$0")/.."
WORK=$(mktemp -d /tmp/alloclens-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c

wall() { # ALLOCLENS: seconds of one recording
  rm -f "$WORK/t.alt"
  { /usr/bin/time -f "%e" "$1" record -q -o "$WORK/t.alt" -- "$WORK/alloc-micro" "$THREADS" "$N" >/dev/null; } 2>&1 | tail -1
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); alloc-micro $THREADS thread(s), $N replacements each, $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then o=$(wall "$OLD"); n=$(wall "$NEW"); else n=$(wall "$NEW"); o=$(wall "$OLD"); fi
  echo "$o $n"
done | python3 -c '
import sys, statistics as st
pairs = [tuple(map(float, line.split())) for line in sys.stdin]
ratios = sorted(n / o for o, n in pairs)
print(f"old median {st.median(o for o, _ in pairs):.3f} s, new median {st.median(n for _, n in pairs):.3f} s")
print(f"new/old per round: median {st.median(ratios):.3f}, from {ratios[0]:.2f} to {ratios[-1]:.2f}; new faster in {sum(r < 1 for r in ratios)} of {len(ratios)}")
'
