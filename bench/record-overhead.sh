#!/usr/bin/env bash
# Side-by-side cost of tracing: untraced vs `alloclens record` vs heaptrack, on an allocation-bound
# microbenchmark (1 and 2 threads). Prints wall times, slowdown ratios and trace bytes per event;
# the `addr` columns are `record --addresses` (ADDRESSES=1 for the library front end).
# Usage: bench/record-overhead.sh [ITERATIONS_PER_THREAD] [REPEATS]   (defaults 5000000, 3;
# the median of the repeats is printed)
# NO_HEAPTRACK=1 skips heaptrack (quicker while iterating on the recorder).
# Works when started with `sh` too: re-executes itself under bash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${1:-5000000}
REPEATS=${2:-3}
WORK=$(mktemp -d /tmp/alloclens-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
# The recorder as a library front end (the full CLI works the same: alloclens record -o F -- CMD).
cargo build --release -q -p recorder --example record
REC=target/release/examples/record

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "workload: alloc-micro, $ITER replacements per thread (2 calls each)"
# rec_ns/ev: wall time added by recording, per event (the "2 threads no worse per event than 1" figure).
printf '%-8s %10s %10s %10s %10s %8s %8s %8s %10s %12s %11s %12s\n' threads untraced record rec-addr heaptrack rec/x addr/x ht/x rec_ns/ev rec_B/event addr_B/event ht_B/event
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
for T in 1 2; do
  bases=(); recs=(); nas=(); hts=()
  ht_bytes=0
  # Interleaved repeats, medians: the machine is shared and noisy.
  for _ in $(seq "$REPEATS"); do
    t0=$(now); "$WORK/alloc-micro" "$T" "$ITER" >/dev/null; t1=$(now)
    bases+=("$(secs "$t0" "$t1")")
    t0=$(now); "$REC" "$WORK/t$T.alt" "$WORK/alloc-micro" "$T" "$ITER" >/dev/null 2>"$WORK/rec$T.log"; t1=$(now)
    recs+=("$(secs "$t0" "$t1")")
    t0=$(now); ADDRESSES=1 "$REC" "$WORK/n$T.alt" "$WORK/alloc-micro" "$T" "$ITER" >/dev/null 2>&1; t1=$(now)
    nas+=("$(secs "$t0" "$t1")")
    if [ -z "${NO_HEAPTRACK:-}" ] && command -v heaptrack >/dev/null; then
      # Debian's heaptrack 1.4 has no output option: it writes heaptrack.*.zst into the current directory.
      rm -rf "$WORK/ht$T"; mkdir -p "$WORK/ht$T"
      t0=$(now); (cd "$WORK/ht$T" && heaptrack "$WORK/alloc-micro" "$T" "$ITER") >/dev/null 2>&1; t1=$(now)
      hts+=("$(secs "$t0" "$t1")")
      ht_bytes=$(cat "$WORK/ht$T"/heaptrack.*.zst 2>/dev/null | wc -c)
    fi
  done
  base=$(median "${bases[@]}"); rec=$(median "${recs[@]}"); na=$(median "${nas[@]}")
  ht="n/a"; [ ${#hts[@]} -gt 0 ] && ht=$(median "${hts[@]}")
  events=$(sed -n 's/^record: \([0-9]*\) events.*/\1/p' "$WORK/rec$T.log")
  rec_bytes=$(stat -c %s "$WORK/t$T.alt"); na_bytes=$(stat -c %s "$WORK/n$T.alt")
  python3 - "$T" "$base" "$rec" "$na" "$ht" "$events" "$rec_bytes" "$na_bytes" "$ht_bytes" <<'PY'
import sys
t, base, rec, na, ht, events, rb, nb, hb = sys.argv[1:]
base, rec, na, events = float(base), float(rec), float(na), int(events or 1)
rb, nb, hb = int(rb), int(nb), int(hb or 0)
htr = f"{float(ht)/base:.2f}" if ht != "n/a" else "n/a"
hts = f"{float(ht):.3f}" if ht != "n/a" else "n/a"
added = (rec - base) * 1e9 / events
print(f"{t:<8} {base:10.3f} {rec:10.3f} {na:10.3f} {hts:>10} {rec/base:8.2f} {na/base:8.2f} {htr:>8}"
      f" {added:10.1f} {rb/events:12.3f} {nb/events:11.3f} {hb/events:12.3f}")
PY
done
