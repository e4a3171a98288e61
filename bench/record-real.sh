#!/usr/bin/env bash
# Tracing real programs: untraced vs `alloclens record` (with and without addresses) vs heaptrack on a
# python3 script and a gcc -O2 compile, then `alloclens analyze` vs `heaptrack_print` on the traces
# they made. Prints, side by side from one run: wall times, slowdown ratios, trace bytes per event,
# analysis events/s and peak memory. The `-addr` columns are `record --addresses`.
# Usage: bench/record-real.sh [REPEATS]  (default 3; the median wall time of the repeats is used)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
WORK=$(mktemp -d /tmp/alloclens-real.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens

# The programs (bench/programs/): a python3 service, and a C file gcc -O2 works on for a few seconds.
python3 bench/programs/big_c.py 1500 "$WORK/big.c"

median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
timed() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); python3 -c "print($t1-$t0)"; }
peak() { /usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null | tail -1; }
# Three runs of an analysis: "median_s first_s peak_KiB". The first run is printed too: on a VM
# whose host takes back the memory a guest freed, the first run after a pause pays for faulting
# it in again (python3's 500 MiB analysis: 1.5 s instead of 0.72 s, 1.1 s of it system time).
peak3() {
  local runs=() mem=0 t m
  for _ in 1 2 3; do read -r t m < <(peak "$@"); runs+=("$t"); [ "$m" -gt "$mem" ] && mem=$m; done
  echo "$(median "${runs[@]}") ${runs[0]} $mem"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
printf '%-10s %9s %9s %9s %9s %7s %7s %7s %10s %9s %9s %9s\n' program untraced record rec-addr heaptrack rec/x addr/x ht/x events rec_B/ev addr_B/ev ht_B/ev
# Every python object through malloc, as in the git-cinnabar study (and so that tracers see them).
export PYTHONMALLOC=malloc
# The interpreter itself, not a wrapper script (pyenv's python3 is a bash script).
PY=$(python3 -c 'import sys; print(sys.executable)')
declare -A CMDS=(
  [python3]="$PY $PWD/bench/programs/service.py 60000 4"
  [gcc-O2]="$(command -v gcc) -O2 -c $WORK/big.c -o $WORK/big.o"
  # The compiler proper alone: heaptrack follows neither fork nor exec, so on `gcc` it sees only the
  # driver; on cc1 both tracers see the same work.
  [cc1-O2]="$(gcc -print-prog-name=cc1) -quiet -imultiarch $(gcc -print-multiarch) -O2 $WORK/big.c -o $WORK/big.s"
)
# Debian's heaptrack (1.4) has no output option: it writes heaptrack.NAME.PID.zst into the current
# directory, so each run gets a directory of its own.
heaptrack_run() { local dir=$1; shift; rm -rf "$dir"; mkdir -p "$dir"; (cd "$dir" && heaptrack "$@"); }
heaptrack_file() { { ls -S "$1"/heaptrack.*.zst 2>/dev/null || true; } | head -1; }
for name in python3 gcc-O2 cc1-O2; do
  read -r -a cmd <<< "${CMDS[$name]}"
  base=(); rec=(); na=(); ht=()
  for _ in $(seq "$REPEATS"); do
    base+=("$(timed "${cmd[@]}")")
    rec+=("$(timed "$AL" record -q --force -o "$WORK/$name.alt" -- "${cmd[@]}")")
    na+=("$(timed "$AL" record -q --force --addresses -o "$WORK/$name-addr.alt" -- "${cmd[@]}")")
    if command -v heaptrack >/dev/null; then
      ht+=("$(timed heaptrack_run "$WORK/ht-$name" "${cmd[@]}")")
    fi
  done
  b=$(median "${base[@]}"); r=$(median "${rec[@]}"); n=$(median "${na[@]}"); h=$( [ ${#ht[@]} -gt 0 ] && median "${ht[@]}" || echo 0)
  read -r events allocs < <("$AL" analyze --json "$WORK/$name.alt" | python3 -c "
import json, sys
a = json.load(sys.stdin)
calls = [p['stats']['calls'] for p in a['processes']]
frees = ('free', 'free_sized', 'free_aligned_sized')
print(sum(sum(c.values()) for c in calls), sum(n for c in calls for k, n in c.items() if k not in frees))" 2>/dev/null || echo 0 0)
  rb=$(stat -c %s "$WORK/$name.alt"); nb=$(stat -c %s "$WORK/$name-addr.alt"); hb=$({ cat "$WORK/ht-$name"/heaptrack.*.zst 2>/dev/null || true; } | wc -c)
  # heaptrack's own count of allocation calls: when it saw far fewer than we did (it follows
  # neither fork nor exec), its trace is not of the same work and its columns are left out.
  ht_allocs=0; htf=$(heaptrack_file "$WORK/ht-$name")
  [ -n "$htf" ] && ht_allocs=$(heaptrack_print -p 0 -a 0 -T 0 -f "$htf" 2>/dev/null | sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p') || true
  ht_same=1; [ "${ht_allocs:-0}" -lt $(( allocs / 2 )) ] && ht_same=0
  python3 - "$name" "$b" "$r" "$n" "$h" "$events" "$rb" "$nb" "${hb:-0}" "$ht_same" <<'PY'
import sys
name, b, r, n, h, e, rb, nb, hb, same = sys.argv[1:]
b, r, n, h, e = float(b), float(r), float(n), float(h), max(int(e), 1)
rb, nb, hb = int(rb), int(nb), int(hb)
same = same == "1" and h > 0
ht_x = f"{h/b:7.2f}" if same else f"{'n/a':>7}"
ht_b = f"{hb/e:9.3f}" if same else f"{'n/a':>9}"
print(f"{name:<10} {b:9.3f} {r:9.3f} {n:9.3f} {h:9.3f} {r/b:7.2f} {n/b:7.2f} {ht_x}"
      f" {e:10d} {rb/e:9.3f} {nb/e:9.3f} {ht_b}")
PY
  if [ "$ht_same" = 0 ] && [ -n "$htf" ]; then
    echo "  (${name}: heaptrack recorded ${ht_allocs:-0} of ${allocs} allocation calls: it does not follow exec, so it traced another program than record did; its figures are left out)"
  fi
  echo "$name $events $ht_same" >> "$WORK/events"
  echo "$name-addr $events $ht_same" >> "$WORK/events"
done

echo
echo "analysis: median of 3 runs, first_s the first of them, peak memory the largest of the 3"
printf '%-12s %9s %8s %15s %11s %29s %8s %10s\n' trace analyze_s first_s events/s analyze_MiB heaptrack_print_s first_s print_MiB
# heaptrack_print once per program: the "-addr" row shares its heaptrack trace.
declare -A HT_PRINT=()
while read -r name events ht_same; do
  read -r at af am < <(peak3 "$AL" analyze "$WORK/$name.alt")
  program=${name%-addr}
  if [ -z "${HT_PRINT[$program]:-}" ]; then
    HT_PRINT[$program]="0 0 0"; htf=$(heaptrack_file "$WORK/ht-$program")
    [ -n "$htf" ] && [ "$ht_same" = 1 ] && HT_PRINT[$program]=$(peak3 heaptrack_print "$htf")
  fi
  read -r ht hf hm <<< "${HT_PRINT[$program]}"
  python3 -c "
e=$events; at=$at; af=$af; am=$am/1024; ht=$ht; hf=$hf; hm=$hm/1024
hts = f'{ht:10.3f} ({e/ht/1e6:5.1f} M ev/s) {hf:8.3f} {hm:10.0f}' if ht > 0 else f'{\"n/a\":>17}'
print(f'{\"$name\":<12} {at:9.3f} {af:8.3f} {e/max(at,1e-9)/1e6:7.1f} M ev/s {am:11.0f} {hts}')"
done < "$WORK/events"
