#!/usr/bin/env bash
# The error of sampled stacks' per-site estimates (issue 27, item 5; heapprofd's method): each
# program is recorded twice, with `record --stacks=all` (the truth) and with `record --stacks`
# (sampled at the default rate, or --stack-sample BYTES); a third trace subsamples the first
# offline with the same Poisson process (crates/analyze/examples/subsample_stacks.rs), which
# measures the estimator alone (same run: no ASLR, scheduling or hash-seed differences). Sites are
# the allocating functions of `analyze --sites --json`, matched across traces by function name and
# module file name (addresses differ between recordings), summed over processes.
# For the top sites (>= 1 % of the calls or the bytes of the full trace) it prints the relative
# error of calls, requested bytes, peak-live bytes and leaked bytes (the last two only for sites
# holding >= 1 % of that figure and at least R bytes of it), and the share of errors within 2
# standard errors. Time-bound workloads (leak) make different calls in two runs: their "recorded"
# rows compare two different runs, the "subsampled" ones the estimator.
# Target: <= 5 % on sites with >= 1 % of the bytes at the default rate.
# Usage: bench/stacks-accuracy.sh [STACK_SAMPLE_BYTES]   (default: record's default)
#   ALLOCLENS=path/to/alloclens to use a given build (default: a release build of this tree);
#   ONLY="sqlite3 cc1" to measure only those programs.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-accuracy.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ -z "${ALLOCLENS:-}" ]; then
    cargo build --release -q -p alloclens
    cargo build --release -q -p analyze --example subsample_stacks
    ALLOCLENS=$PWD/target/release/alloclens
    SUBSAMPLE=$PWD/target/release/examples/subsample_stacks
else
    SUBSAMPLE=$(dirname "$ALLOCLENS")/examples/subsample_stacks
fi
SAMPLED=(--stacks)
[ -n "$RATE" ] && SAMPLED+=(--stack-sample "$RATE")
# The rate the sampled traces get (read back from the first one) for the offline subsample.
SUB_RATE=$RATE

cat > "$WORK/compare.py" <<'PY'
import json, sys, math
def sites(path):
    doc = json.load(open(path))
    out = {"rate": doc.get("stack_sample_bytes", 0)}
    for p in doc["processes"]:
        for f in p["functions"]:
            g = f["figures"]
            if g["calls"] == 0:
                continue
            # A function's listed location is the first file:line seen: not stable across traces.
            key = (f["function"], f["module"].rsplit("/", 1)[-1])
            e = g.get("estimate") or {}
            acc = out.setdefault(key, [0.0] * 8)
            for i, (name, se) in enumerate([("calls", "calls_se"), ("requested_bytes", "requested_bytes_se"),
                                            ("peak_live_bytes", "peak_live_bytes_se"), ("leaked_bytes", "leaked_bytes_se")]):
                acc[i] += g[name]
                acc[4 + i] += e.get(se, 0.0) ** 2
    return out
name, full, sampled = sys.argv[1], sites(sys.argv[2]), sites(sys.argv[3])
rate = sampled.pop("rate")
full.pop("rate")
totals = [sum(v[i] for v in full.values()) for i in range(4)]
top = [k for k, v in full.items() if v[0] >= 0.01 * totals[0] or v[1] >= 0.01 * totals[1]]
errors = [[] for _ in range(4)]
big_bytes, within_2se, checked = [], 0, 0
for k in top:
    t, s = full[k], sampled.get(k, [0.0] * 8)
    for i in range(4):
        # Peak-live and leaked bytes: only where the site holds >= 1 % of them and at least R bytes
        # (below R a site's figure rests on about one sample, or none).
        if totals[i] == 0 or t[i] < 0.01 * totals[i] or (i >= 2 and t[i] < rate):
            continue
        err = (s[i] - t[i]) / t[i]
        errors[i].append(abs(err))
        if i == 1 and t[1] >= 0.01 * totals[1]:
            big_bytes.append(abs(err))
        se = math.sqrt(s[4 + i])
        checked += 1
        within_2se += abs(s[i] - t[i]) <= 2 * se
def fmt(e):
    if not e:
        return "%17s" % "-"
    e = sorted(e)
    return "%5.1f%% %5.1f%% %3d" % (100 * e[len(e) // 2], 100 * e[-1], len(e))
ok = sum(e <= 0.05 for e in big_bytes)
print("%-22s %5d %s %s %s %s  %3d/%-3d %5.0f%%" % (name, len(top), fmt(errors[0]), fmt(errors[1]), fmt(errors[2]),
      fmt(errors[3]), ok, len(big_bytes), 100 * within_2se / checked if checked else 0))
PY

# measure NAME COMMAND...: the three traces and the comparisons.
measure() {
    local name=$1; shift
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
    local all="$WORK/$name.all.alt" sampled="$WORK/$name.sampled.alt" sub="$WORK/$name.sub.alt"
    PYTHONHASHSEED=0 "$ALLOCLENS" record -q --stacks=all -o "$all" -- "$@" >/dev/null 2>&1 || { echo "$name: record failed" >&2; return; }
    PYTHONHASHSEED=0 "$ALLOCLENS" record -q "${SAMPLED[@]}" -o "$sampled" -- "$@" >/dev/null 2>&1 || { echo "$name: record failed" >&2; return; }
    if [ -z "$SUB_RATE" ]; then
        SUB_RATE=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["stack_sample_bytes"])' \
            < <("$ALLOCLENS" analyze --sites --json "$sampled" 2>/dev/null))
    fi
    "$SUBSAMPLE" "$all" "$sub" "$SUB_RATE" 2>/dev/null
    for t in all sampled sub; do
        "$ALLOCLENS" analyze --sites --json "$WORK/$name.$t.alt" > "$WORK/$name.$t.json" 2>/dev/null
    done
    python3 "$WORK/compare.py" "$name (recorded)" "$WORK/$name.all.json" "$WORK/$name.sampled.json"
    python3 "$WORK/compare.py" "$name (subsampled)" "$WORK/$name.all.json" "$WORK/$name.sub.json"
}

echo "relative error of the estimates per top site (>= 1 % of calls or bytes): median, max, sites counted"
printf '%-22s %5s %17s %17s %17s %17s  %7s %6s\n' program sites calls bytes peak-live leaked "<=5%" "in 2se"
measure events "$ALLOCLENS" workload events --events 100
measure churn "$ALLOCLENS" workload churn --ops 1000000
measure realloc "$ALLOCLENS" workload realloc
measure twowave "$ALLOCLENS" workload twowave
measure xthread "$ALLOCLENS" workload xthread --objects 200000
measure leak "$ALLOCLENS" workload leak --duration-ms 1000 --hold-ms 0
PY=$(python3 -c 'import sys; print(sys.executable)')
PYTHONMALLOC=malloc measure python3 "$PY" "$PWD/bench/programs/service.py" 20000 3
if command -v sqlite3 >/dev/null; then
    measure sqlite3 sqlite3 :memory: \
        "create table t(a integer primary key, b text); with recursive c(x) as (select 1 union all select x+1 from c where x<200000) insert into t(b) select printf('row %d %s', x, hex(randomblob(20))) from c; create index tb on t(b); select count(*), sum(length(b)) from t;"
fi
CC1=$(gcc -print-prog-name=cc1 2>/dev/null || true)
if [ -x "$CC1" ]; then
    python3 bench/programs/big_c.py 300 "$WORK/big.c"
    measure cc1 "$CC1" -quiet -imultiarch "$(gcc -print-multiarch)" -O2 "$WORK/big.c" -o "$WORK/big.s"
fi
echo "stack sample bytes: $SUB_RATE"
