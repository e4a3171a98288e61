#!/usr/bin/env bash
# The cost of call stacks (issue 27), side by side in one run: untraced vs `alloclens record` vs
# sampled `record --stacks` vs `record --stacks=all` vs heaptrack (which always takes every
# stack), on the allocation-bound microbenchmark (bench/alloc-micro.c, 1 thread), the built-in
# events workload, python3 (PYTHONMALLOC=malloc, a JSON service script), sqlite3 (an in-memory
# database) and gcc's cc1 at -O2. The tools run in interleaved rounds (each round runs every
# tool once on each program), so a change in the machine's load touches every column alike.
# Prints median wall times, slowdowns against the untraced run, and trace bytes per event (every
# allocator call; heaptrack: its heaptrack.*.zst file).
# Targets (issue 27): sampled <= 1.1x untraced on python3, sqlite3 and cc1, and <= 1.1x plain
# record on alloc-micro; --stacks=all at most half of heaptrack's slowdown on alloc-micro and
# events; sampled bytes per event <= 1.1x plain record's.
# Usage: bench/stacks-overhead.sh [ROUNDS] [MICRO_ITERATIONS]   (defaults 3, 2000000)
#   STACK_SAMPLE=BYTES   the sampled column's --stack-sample (default: record's own default)
#   ONLY="python3 cc1"   only these programs
# heaptrack: installed by `apt-get install heaptrack` when missing and run as root, else its
# column is left out.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
ITER=${2:-2000000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-stacks.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if ! command -v heaptrack >/dev/null && [ "$(id -u)" = 0 ]; then
  apt-get install -y -q heaptrack >/dev/null 2>&1 || true
fi
HT=$(command -v heaptrack || true)
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens
SAMPLE=()
[ -n "${STACK_SAMPLE:-}" ] && SAMPLE=(--stack-sample "$STACK_SAMPLE")

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
# The programs: bench/programs/ (python3's service.py, sqlite3's work.sql, a C file for cc1).
python3 bench/programs/big_c.py 400 "$WORK/big.c"
# heaptrack follows only the process it starts: cc1 runs on preprocessed source, and python3 is
# the interpreter itself (`python3` may be a pyenv wrapper script), so every tool sees the same
# process.
gcc -E -o "$WORK/big.i" "$WORK/big.c"
CC1=$(gcc -print-prog-name=cc1)
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')

# name|environment|command
PROGRAMS=(
  "alloc-micro||$WORK/alloc-micro 1 $ITER"
  "events||$AL workload events --events 100"
  "python3|PYTHONMALLOC=malloc|$PY $PWD/bench/programs/service.py 20000 3"
  "sqlite3||$(command -v sqlite3 || echo sqlite3) :memory: -init $PWD/bench/programs/work.sql .quit"
  "cc1-O2||$CC1 -fpreprocessed -quiet -O2 -o $WORK/big.s $WORK/big.i"
)
TOOLS=(native record sampled all heaptrack)
[ -n "$HT" ] || TOOLS=(native record sampled all)

# Wall time of one tool on one program, in seconds (output discarded). Traces go to
# $WORK/NAME.TOOL.alt; heaptrack writes heaptrack.*.zst into its own directory.
run_tool() {
  local tool=$1 name=$2 env_=$3; shift 3
  local dir=$WORK/run-$name-$tool t0 t1
  rm -rf "$dir"; mkdir -p "$dir"
  local pre=()
  case $tool in
    native) ;;
    record) pre=("$AL" record -q --force -o "$WORK/$name.$tool.alt" --) ;;
    sampled) pre=("$AL" record -q --force --stacks "${SAMPLE[@]}" -o "$WORK/$name.$tool.alt" --) ;;
    all) pre=("$AL" record -q --force --stacks=all -o "$WORK/$name.$tool.alt" --) ;;
    heaptrack) pre=("$HT") ;;
  esac
  t0=$(date +%s.%N)
  (cd "$dir" && env $env_ "${pre[@]}" "$@" >/dev/null 2>&1) || true
  t1=$(date +%s.%N)
  if [ "$tool" = heaptrack ]; then cat "$dir"/heaptrack.*.zst 2>/dev/null > "$WORK/$name.ht" || true; fi
  python3 -c "print($t1 - $t0)"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $ROUNDS, interleaved; sampled: --stacks ${SAMPLE[*]:-(default rate)}; compare columns of one run only"
declare -A TIMES
for round in $(seq "$ROUNDS"); do
  for entry in "${PROGRAMS[@]}"; do
    IFS='|' read -r name env_ cmd <<< "$entry"
    case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
    read -r -a argv <<< "$cmd"
    # Each round starts with a different tool, so that none always runs right after another.
    n=${#TOOLS[@]}
    for k in $(seq 0 $((n - 1))); do
      tool=${TOOLS[$(((k + round) % n))]}
      TIMES[$name.$tool]="${TIMES[$name.$tool]:-} $(run_tool "$tool" "$name" "$env_" "${argv[@]}")"
    done
  done
done

printf '%-11s %8s %8s %8s %8s %8s %6s %6s %6s %6s %7s %10s %8s %8s %8s %8s\n' \
  program native record sampled all heaptrk rec/x smp/x all/x ht/x smp/rec events rec_B/ev smp_B/ev all_B/ev ht_B/ev
for entry in "${PROGRAMS[@]}"; do
  IFS='|' read -r name _ _ <<< "$entry"
  case " ${ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
  events=$("$AL" analyze --json "$WORK/$name.record.alt" | python3 -c '
import json, sys
print(sum(p["stats"]["calls_total"] for p in json.load(sys.stdin)["processes"]))')
  size() { stat -c %s "$1" 2>/dev/null || echo 0; }
  python3 - "$name" "$events" "${TIMES[$name.native]}" "${TIMES[$name.record]}" "${TIMES[$name.sampled]}" \
    "${TIMES[$name.all]}" "${TIMES[$name.heaptrack]:-}" "$(size "$WORK/$name.record.alt")" \
    "$(size "$WORK/$name.sampled.alt")" "$(size "$WORK/$name.all.alt")" "$(size "$WORK/$name.ht")" <<'PY'
import statistics, sys
name, events, nat, rec, smp, all_, ht, rb, sb, ab, hb = sys.argv[1:]
med = lambda s: statistics.median(map(float, s.split())) if s.strip() else float("nan")
nat, rec, smp, all_, ht = map(med, (nat, rec, smp, all_, ht))
e = max(int(events), 1)
rb, sb, ab, hb = (int(x) / e for x in (rb, sb, ab, hb))
htb = f"{hb:8.3f}" if hb > 0 else f"{'n/a':>8}"
print(f"{name:<11} {nat:8.3f} {rec:8.3f} {smp:8.3f} {all_:8.3f} {ht:8.3f} {rec/nat:6.2f} {smp/nat:6.2f}"
      f" {all_/nat:6.2f} {ht/nat:6.2f} {smp/rec:7.2f} {e:10d} {rb:8.3f} {sb:8.3f} {ab:8.3f} {htb}")
PY
done
