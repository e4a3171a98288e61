#!/usr/bin/env bash
# The cost of call stacks, side by side in one run: untraced vs `alloclens record` vs
# `alloclens record --stacks` vs heaptrack (which always records stacks), on the allocation-bound
# microbenchmark (bench/alloc-micro.c, 1 thread) and on real programs (python3 with
# PYTHONMALLOC=malloc running a JSON service script; gcc's cc1 compiling at -O2). Prints wall times (median of
# the repeats), slowdown ratios against the untraced run, and trace bytes per allocation (calls
# other than frees, counted by `alloclens analyze` on the --stacks trace; heaptrack: the bytes of its
# heaptrack.*.zst files for the same program).
# Targets (issue 19): --stacks slowdown at most half of heaptrack's on the microbenchmark and at
# most 1.3x on real programs; bytes per allocation no more than heaptrack's.
# Usage: bench/stacks-overhead.sh [REPEATS] [MICRO_ITERATIONS]   (defaults 3, 2000000)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
ITER=${2:-2000000}
WORK=$(mktemp -d /tmp/alloclens-stacks.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
command -v heaptrack >/dev/null || { echo "stacks-overhead: heaptrack is not installed (scripts/setup.sh bench)" >&2; exit 1; }
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens

cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
cat > "$WORK/service.py" <<'PY'
import json, random
random.seed(1)
docs = [{"id": i, "name": "user%d" % i, "tags": ["t%d" % random.randrange(50) for _ in range(8)],
         "score": random.random()} for i in range(20000)]
for _ in range(3):
    text = json.dumps(docs)
    docs = json.loads(text)
    docs = sorted(docs, key=lambda d: (d["score"], d["name"]))
    index = {}
    for d in docs:
        for t in d["tags"]:
            index.setdefault(t, []).append(d["id"])
print(len(text), len(index))
PY
python3 - "$WORK/big.c" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("#include <string.h>\n")
    for i in range(400):
        f.write(f"""
struct s{i} {{ int a[{i % 17 + 3}]; double d; char name[32]; }};
int f{i}(struct s{i} *p, int n) {{
    int acc = {i};
    for (int k = 0; k < n; k++) {{ acc += p->a[k % {i % 17 + 3}] * (k ^ {i}); if (acc > 1000) acc -= p->d; }}
    memcpy(p->name, "abc", 4);
    return acc + (int)strlen(p->name);
}}
""")
PY

# heaptrack follows only the process it starts (not gcc's cc1): the compile runs cc1 itself on
# preprocessed source, so every tool sees the same process.
gcc -E -o "$WORK/big.i" "$WORK/big.c"
CC1=$(gcc -print-prog-name=cc1)
# The interpreter itself: `python3` may be a wrapper script (pyenv), which heaptrack would trace
# instead of the interpreter it execs.
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')

# Wall time of a command in seconds (its output discarded). Usage: timed DIR CMD ARGS...
timed() {
  local dir=$1 t0 t1; shift
  t0=$(date +%s.%N); (cd "$dir" && "$@" >/dev/null 2>&1) || true; t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" "$@"; }
# Calls other than frees in a trace.
allocations() {
  "$AL" analyze --json "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(p["stats"]["calls_total"] - p["stats"]["calls"].get("free", 0) for p in d["processes"]))'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); shared machine: compare columns of one run only"
printf '%-12s %9s %9s %9s %9s %8s %8s %8s %10s %10s %10s %11s\n' program untraced record stacks heaptrack rec/x stacks/x ht/x allocs rec_B/al stk_B/al ht_B/al
run_case() {
  local name=$1; shift
  local env_=$1; shift
  local bases=() recs=() stks=() hts=()
  for _ in $(seq "$REPEATS"); do
    rm -rf "$WORK/run"; mkdir -p "$WORK/run"
    bases+=("$(timed "$WORK/run" env $env_ "$@")")
    recs+=("$(timed "$WORK/run" env $env_ "$AL" record -q --force -o "$WORK/r.alt" -- "$@")")
    stks+=("$(timed "$WORK/run" env $env_ "$AL" record -q --force --stacks -o "$WORK/s.alt" -- "$@")")
    rm -rf "$WORK/ht"; mkdir -p "$WORK/ht"
    # Debian's heaptrack 1.4 writes heaptrack.PROGRAM.PID.zst into the current directory.
    hts+=("$(timed "$WORK/ht" env $env_ heaptrack "$@")")
  done
  local allocs rb sb hb
  allocs=$(allocations "$WORK/s.alt")
  rb=$(stat -c %s "$WORK/r.alt"); sb=$(stat -c %s "$WORK/s.alt")
  hb=$(cat "$WORK/ht"/heaptrack.*.zst 2>/dev/null | wc -c)
  python3 - "$name" "$(median "${bases[@]}")" "$(median "${recs[@]}")" "$(median "${stks[@]}")" \
    "$(median "${hts[@]}")" "$allocs" "$rb" "$sb" "$hb" <<'PY'
import sys
name, b, r, s, h, n, rb, sb, hb = sys.argv[1:]
b, r, s, h, n = float(b), float(r), float(s), float(h), max(int(n), 1)
print(f"{name:<12} {b:9.3f} {r:9.3f} {s:9.3f} {h:9.3f} {r/b:8.2f} {s/b:8.2f} {h/b:8.2f}"
      f" {n:10d} {int(rb)/n:10.3f} {int(sb)/n:10.3f} {int(hb)/n:11.3f}")
PY
}
run_case alloc-micro "" "$WORK/alloc-micro" 1 "$ITER"
run_case python3 "PYTHONMALLOC=malloc" "$PY" "$WORK/service.py"
run_case cc1-O2 "" "$CC1" -fpreprocessed -quiet -O2 -o "$WORK/big.s" "$WORK/big.i"
echo "slowdown targets: stacks/x <= ht/x / 2 on alloc-micro, <= 1.3 on python3 and cc1-O2; stk_B/al <= ht_B/al"
