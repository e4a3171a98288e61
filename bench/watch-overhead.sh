#!/usr/bin/env bash
# What the watch agent costs a program: the churn microbenchmark (alloc-micro, 1 and 2 threads) and
# a real program (a python3 service-like script), each with no agent, with the agent
# (liballoclens_agent.so, 1 s interval) and under `alloclens record`, side by side in one run.
# Prints wall times (median of the repeats) and the ratios to the run without agent.
# Targets: agent/none <= 1.10 on churn, <= 1.02 on the real program.
# Usage: bench/watch-overhead.sh [ITERATIONS_PER_THREAD] [REPEATS]   (defaults 5000000, 5)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${1:-5000000}
REPEATS=${2:-5}
WORK=$(mktemp -d /tmp/alloclens-watch-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
cargo build --release -q -p alloclens -p agent
AL=$PWD/target/release/alloclens
AGENT=$(ls -t target/release/build/agent-*/out/liballoclens_agent.so | head -1)
mkdir -p "$WORK/agent"

cat > "$WORK/service.py" <<'PY'
import json, random
random.seed(1)
docs = [{"id": i, "name": "user%d" % i, "tags": ["t%d" % random.randrange(50) for _ in range(8)],
         "score": random.random()} for i in range(60000)]
for _ in range(4):
    text = json.dumps(docs)
    docs = json.loads(text)
    docs = sorted(docs, key=lambda d: (d["score"], d["name"]))
print(len(text))
PY

wall() { # wall time of a command, seconds
  python3 -c 'import subprocess,sys,time
t=time.monotonic(); subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL,check=True); print(f"{time.monotonic()-t:.4f}")' "$@"
}
with_agent() { env ALLOCLENS_AGENT_DIR="$WORK/agent" ALLOCLENS_AGENT_INTERVAL_MS=1000 LD_PRELOAD="$AGENT" "$@"; }
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.4f}')" "$@"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) (shared: figures are noisy)"
printf '%-22s %9s %9s %9s %9s %9s\n' program none agent record agent/x record/x
run_case() { # NAME CMD...
  local name=$1; shift
  local n=() a=() r=()
  # Interleaved repeats, medians: the machine is shared and noisy.
  for _ in $(seq "$REPEATS"); do
    n+=("$(wall "$@")")
    a+=("$(with_agent wall "$@")")
    r+=("$(wall "$AL" record -q -o "$WORK/t.alt" -- "$@")")
    rm -f "$WORK/t.alt"
  done
  python3 - "$name" "$(median "${n[@]}")" "$(median "${a[@]}")" "$(median "${r[@]}")" <<'PY'
import sys
name, n, a, r = sys.argv[1], *map(float, sys.argv[2:])
print(f"{name:<22} {n:9.3f} {a:9.3f} {r:9.3f} {a/n:9.3f} {r/n:9.3f}")
PY
}
run_case "churn 1 thread" "$WORK/alloc-micro" 1 "$ITER"
run_case "churn 2 threads" "$WORK/alloc-micro" 2 "$ITER"
run_case "python3 service.py" python3 "$WORK/service.py"
