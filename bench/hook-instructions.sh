#!/usr/bin/env bash
# Instructions the hooks add per allocator call, counted by callgrind: the figure the machine's
# load does not change, so it can be compared across sessions and machines of the same CPU family.
# In one run, side by side:
# - alloc-micro (1 thread, then 2): instructions per malloc+free pair, callgrind's total for 400k
#   replacements minus 200k over 200k (the difference removes start-up and exit): untraced, under
#   `alloclens record`, `record --stacks` (sampled), the watch agent, the agent with its sampler;
# - python3 (PYTHONMALLOC=malloc, service.py 3000 4 --no-index minus 3000 2 --no-index: the
#   marginal instructions of about 0.55 M calls, start-up removed) untraced, under record, under
#   `record --stacks` and under the agent, with the ratios to untraced. PYTHONHASHSEED=0: with
#   random string hashes python3's own count moves by about 0.5 % from run to run; the sampled
#   stacks' points stay random (a few thousand captures, their count varies).
# Under record, the shim's instructions are counted (valgrind runs the program, the recorder reads
# its rings outside valgrind); the recorder's own CPU is not in these figures (threads-record.sh).
# Usage: bench/hook-instructions.sh          NO_PYTHON=1 skips python3 (its eight runs take minutes)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "bench/hook-instructions.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/alloclens-hooks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens
# The agent alloclens embeds, as crates/embedded's build script made it.
AGENT=$PWD/$(ls -t target/release/build/embedded-*/out/liballoclens_agent.so | head -1)
mkdir -p "$WORK/agent"
# The agent's interval is long so that no periodic snapshot falls inside the count.
agent=(env ALLOCLENS_AGENT_DIR="$WORK/agent" ALLOCLENS_AGENT_INTERVAL_MS=1000000 LD_PRELOAD="$AGENT")
profiled=("${agent[@]}" ALLOCLENS_PROFILE_BYTES=524288)
untraced=(env)
record=("$AL" record -q -o "$WORK/t.alt" --)
stacks=("$AL" record -q --stacks -o "$WORK/t.alt" --)

collected() { # PREFIX... -- CMD...: callgrind's instruction total of CMD run under PREFIX
  local prefix=()
  while [ "$1" != "--" ]; do prefix+=("$1"); shift; done
  shift
  rm -f "$WORK/t.alt" # record does not replace a trace
  "${prefix[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
marginal() { # SMALL LARGE: LARGE - SMALL
  python3 -c "import sys; print(int(sys.argv[2]) - int(sys.argv[1]))" "$1" "$2"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(valgrind --version)"
printf '%-22s %10s %10s %10s\n' "alloc-micro" "per pair" "added" "/untraced"
for threads in 1 2; do
  base=
  for variant in untraced record stacks agent profiled; do
    declare -n prefix=$variant
    a=$(collected "${prefix[@]}" -- "$WORK/alloc-micro" "$threads" 200000)
    b=$(collected "${prefix[@]}" -- "$WORK/alloc-micro" "$threads" 400000)
    per=$(python3 -c "import sys; print((int(sys.argv[2]) - int(sys.argv[1])) / 200000 / int(sys.argv[3]))" "$a" "$b" "$threads")
    base=${base:-$per}
    python3 -c "import sys; n, p = map(float, sys.argv[2:]); print(f'{sys.argv[1]:<22} {p:10.1f} {p-n:+10.1f} {p/n:9.3f}x')" \
      "$threads thread(s), $variant" "$base" "$per"
    unset -n prefix
  done
done

[ -n "${NO_PYTHON:-}" ] && exit 0
PY=$(command -v /usr/bin/python3 || command -v python3)
echo
printf '%-22s %14s %10s\n' "python3 (malloc)" "marginal" "/untraced"
base=
for variant in untraced record stacks agent; do
  declare -n prefix=$variant
  a=$(PYTHONMALLOC=malloc PYTHONHASHSEED=0 collected "${prefix[@]}" -- "$PY" bench/programs/service.py 3000 2 --no-index)
  b=$(PYTHONMALLOC=malloc PYTHONHASHSEED=0 collected "${prefix[@]}" -- "$PY" bench/programs/service.py 3000 4 --no-index)
  m=$(marginal "$a" "$b")
  base=${base:-$m}
  python3 -c "import sys; n, m = map(int, sys.argv[2:]); print(f'{sys.argv[1]:<22} {m/1e6:12.1f} M {m/n:9.3f}x')" "$variant" "$base" "$m"
  unset -n prefix
done
