#!/usr/bin/env bash
# Side-by-side cost of tracing: untraced vs `alloclens record` vs heaptrack, on an allocation-bound
# microbenchmark (1 and 2 threads). Prints wall times, slowdown ratios, wall and CPU time added per
# event, and trace bytes per event;
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

# Runs a command; prints its wall time and the CPU time (user + system) of it and every process
# it waited for, in seconds. Usage: timed [--cwd DIR] [--err FILE] CMD ARGS...
cat > "$WORK/timed.py" <<'PY'
import os, resource, subprocess, sys, time
args = sys.argv[1:]
cwd, err = None, subprocess.DEVNULL
while args[0] in ("--cwd", "--err"):
    if args[0] == "--cwd":
        cwd = args[1]
    else:
        err = open(args[1], "w")
    args = args[2:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
subprocess.run(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, check=False)
wall = time.monotonic() - t0
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{wall:.4f} {cpu:.4f}")
PY
timed() { python3 "$WORK/timed.py" "$@"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "workload: alloc-micro, $ITER replacements per thread (2 calls each)"
# rec_ns/ev: wall time added by recording, per event (the "2 threads no worse per event than 1"
# figure); rec_cpu_ns/ev: CPU time added per event, the program's and the recorder's together (what
# the tracing costs whatever the cores: see the explanation printed at the end).
printf '%-8s %10s %10s %10s %10s %8s %8s %8s %10s %14s %12s %11s %12s\n' threads untraced record rec-addr heaptrack rec/x addr/x ht/x rec_ns/ev rec_cpu_ns/ev rec_B/event addr_B/event ht_B/event
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.4f}')" "$@"; }
for T in 1 2; do
  bases=(); base_cpus=(); recs=(); rec_cpus=(); nas=(); hts=()
  ht_bytes=0
  # Interleaved repeats, medians: the machine is shared and noisy.
  for _ in $(seq "$REPEATS"); do
    read -r wall cpu < <(timed "$WORK/alloc-micro" "$T" "$ITER")
    bases+=("$wall"); base_cpus+=("$cpu")
    read -r wall cpu < <(timed --err "$WORK/rec$T.log" "$REC" "$WORK/t$T.alt" "$WORK/alloc-micro" "$T" "$ITER")
    recs+=("$wall"); rec_cpus+=("$cpu")
    read -r wall _ < <(ADDRESSES=1 timed "$REC" "$WORK/n$T.alt" "$WORK/alloc-micro" "$T" "$ITER")
    nas+=("$wall")
    if [ -z "${NO_HEAPTRACK:-}" ] && command -v heaptrack >/dev/null; then
      # Debian's heaptrack 1.4 has no output option: it writes heaptrack.*.zst into the current directory.
      rm -rf "$WORK/ht$T"; mkdir -p "$WORK/ht$T"
      read -r wall _ < <(timed --cwd "$WORK/ht$T" heaptrack "$WORK/alloc-micro" "$T" "$ITER")
      hts+=("$wall")
      ht_bytes=$(cat "$WORK/ht$T"/heaptrack.*.zst 2>/dev/null | wc -c)
    fi
  done
  base=$(median "${bases[@]}"); rec=$(median "${recs[@]}"); na=$(median "${nas[@]}")
  base_cpu=$(median "${base_cpus[@]}"); rec_cpu=$(median "${rec_cpus[@]}")
  ht="n/a"; [ ${#hts[@]} -gt 0 ] && ht=$(median "${hts[@]}")
  events=$(sed -n 's/^record: \([0-9]*\) events.*/\1/p' "$WORK/rec$T.log")
  rec_bytes=$(stat -c %s "$WORK/t$T.alt"); na_bytes=$(stat -c %s "$WORK/n$T.alt")
  python3 - "$T" "$base" "$rec" "$na" "$ht" "$events" "$rec_bytes" "$na_bytes" "$ht_bytes" "$base_cpu" "$rec_cpu" "$WORK/added" <<'PY'
import sys
t, base, rec, na, ht, events, rb, nb, hb, base_cpu, rec_cpu, added_file = sys.argv[1:]
base, rec, na, events = float(base), float(rec), float(na), int(events or 1)
rb, nb, hb = int(rb), int(nb), int(hb or 0)
htr = f"{float(ht)/base:.2f}" if ht != "n/a" else "n/a"
hts = f"{float(ht):.3f}" if ht != "n/a" else "n/a"
added = (rec - base) * 1e9 / events
added_cpu = (float(rec_cpu) - float(base_cpu)) * 1e9 / events
print(f"{t:<8} {base:10.3f} {rec:10.3f} {na:10.3f} {hts:>10} {rec/base:8.2f} {na/base:8.2f} {htr:>8}"
      f" {added:10.1f} {added_cpu:14.1f} {rb/events:12.3f} {nb/events:11.3f} {hb/events:12.3f}")
with open(added_file, "a") as f:
    f.write(f"{t} {added:.2f} {added_cpu:.2f} {float(base_cpu) * 1e9 / events:.2f}\n")
PY
done

# The 2-thread target, with what bounds it on this machine. With one program thread the recorder has
# a core of its own, so only its part beyond the program's pace shows in the wall time; with as many
# program threads as cores, every nanosecond of recorder CPU is taken from the program, so the wall
# time added per event is at least (CPU added per event) / cores.
python3 - "$WORK/added" "$(nproc)" <<'PY'
import sys
rows = {int(t): (float(w), float(c), float(p)) for t, w, c, p in (l.split() for l in open(sys.argv[1]))}
cores = int(sys.argv[2])
(w1, c1, p1), (w2, c2, p2) = rows[1], rows[2]
print(f"2 threads against 1, per event: wall time added {w2:.1f} against {w1:.1f} ns"
      f" ({'met' if w2 <= w1 else 'not met'}: target no worse); CPU time added {c2:.1f} against {c1:.1f} ns")
if cores <= 2:
    bound = c2 / cores
    print(f"  on {cores} cores the 2-thread run has no idle core for the recorder: its wall time added"
          f" is at least {c2:.1f} / {cores} = {bound:.1f} ns per event however the work is scheduled"
          f" ({'above' if bound > w1 else 'within'} the 1-thread figure)")
PY
