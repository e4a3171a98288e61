#!/usr/bin/env bash
# What the watch agent costs a program: the churn microbenchmark (alloc-micro, 1 and 2 threads) and
# a real program (a python3 service-like script), each with no agent, with the agent
# (liballoclens_agent.so, 1 s interval) and under `alloclens record`, side by side in one run.
# Prints wall times (median of the repeats) and the ratios to the run without agent, then (when
# valgrind is installed) the instructions per malloc+free pair of alloc-micro with and without the
# agent, counted by callgrind: a figure the machine's load does not change.
# Targets: agent/none <= 1.10 on churn, <= 1.02 on the real program.
# Usage: bench/watch-overhead.sh [ITERATIONS_PER_THREAD] [REPEATS]   (defaults 20000000, 5)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${1:-20000000}
REPEATS=${2:-5}
WORK=$(mktemp -d /tmp/alloclens-watch-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
cargo build --release -q -p alloclens -p agent
AL=$PWD/target/release/alloclens
# The agent alloclens embeds, as crates/embedded's build script made it.
AGENT=$PWD/$(ls -t target/release/build/embedded-*/out/liballoclens_agent.so | head -1)
mkdir -p "$WORK/agent"


timed() { # "WALL CPU" of a command, seconds; CPU = user + system of it and every process it waited for
  python3 -c 'import resource,subprocess,sys,time
r=lambda: (lambda u: u.ru_utime + u.ru_stime)(resource.getrusage(resource.RUSAGE_CHILDREN))
c=r(); t=time.monotonic(); subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True)
print(f"{time.monotonic()-t:.4f}:{r()-c:.4f}")' "$@"
}
# The timer (python) runs without the agent; env starts the program with it.
agent_env=(env ALLOCLENS_AGENT_DIR="$WORK/agent" ALLOCLENS_AGENT_INTERVAL_MS=1000 LD_PRELOAD="$AGENT")

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (shared: figures are noisy)"
# Wall time and CPU time (the program's, the agent thread's and the recorder's: what the machine pays),
# medians of the repeats. On a shared machine the CPU ratio is the steadier one.
printf '%-20s %8s %8s %8s %8s %8s %9s %9s %9s %9s\n' program none agent record agent/x record/x cpu-none cpu-agent cpu-agent/x cpu-rec/x
run_case() { # NAME CMD...
  local name=$1; shift
  local n=() a=() r=()
  # Each command once first: a failure stops here with its message (the timed runs hide output).
  "$@" >/dev/null; "${agent_env[@]}" "$@" >/dev/null; "$AL" record -q -o "$WORK/t.alt" -- "$@" >/dev/null
  rm -f "$WORK/t.alt" # record does not overwrite a trace
  # Interleaved repeats, medians: the machine is shared and noisy.
  for _ in $(seq "$REPEATS"); do
    n+=("$(timed "$@")")
    a+=("$(timed "${agent_env[@]}" "$@")")
    r+=("$(timed "$AL" record -q -o "$WORK/t.alt" -- "$@")")
    rm -f "$WORK/t.alt"
  done
  python3 - "$name" "${n[*]}" "${a[*]}" "${r[*]}" <<'PY'
import statistics, sys
name = sys.argv[1]
def med(runs, i):
    return statistics.median(float(x.split(":")[i]) for x in runs.split())
(n, a, r), (cn, ca, cr) = ([med(x, i) for x in sys.argv[2:]] for i in (0, 1))
print(f"{name:<20} {n:8.3f} {a:8.3f} {r:8.3f} {a/n:8.3f} {r/n:8.3f} {cn:9.3f} {ca:9.3f} {ca/cn:9.3f} {cr/cn:9.3f}")
PY
}
run_case "churn 1 thread" "$WORK/alloc-micro" 1 "$ITER"
run_case "churn 2 threads" "$WORK/alloc-micro" 2 "$ITER"
# The system interpreter itself (a version manager's python3 may be a shell script).
PY=$(command -v /usr/bin/python3 || command -v python3)
# PYTHONHASHSEED=0: with random string hashes python3 does different work on every run (its
# instruction count moves by about 0.5 %, hook-instructions.sh).
run_case "python3 service.py" env PYTHONHASHSEED=0 "$PY" "$PWD/bench/programs/service.py" 60000 4 --no-index

# Instructions per malloc+free pair: callgrind's total for 400k minus 200k replacements, over 200k
# (the difference removes start-up and exit).
if command -v valgrind >/dev/null; then
  instructions() { # total instructions of CMD..., counted by callgrind
    "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$WORK/alloc-micro" 1 "$N" 2>&1 |
      sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  }
  per_pair() { # instructions per pair of CMD... (a prefix: nothing or the agent's env)
    local a b
    a=$(N=200000 instructions "$@"); b=$(N=400000 instructions "$@")
    python3 -c "import sys; print((int(sys.argv[2]) - int(sys.argv[1])) / 200000)" "$a" "$b"
  }
  none=$(per_pair env)
  agent=$(per_pair "${agent_env[@]}")
  python3 -c "import sys; n, a = map(float, sys.argv[1:]); print(f'callgrind, alloc-micro 1 thread: {n:.1f} instructions per malloc+free pair without agent, {a:.1f} with (+{a-n:.1f}), agent/x {a/n:.3f}')" "$none" "$agent"
fi
