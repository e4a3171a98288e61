#!/usr/bin/env bash
# merge at fleet scale (issue 28): 1,000 results directories made from a few real ones under other
# host names, merged in one `alloclens merge` (wall time, peak RSS); then a trace of N allocator calls
# (workload churn, 1 thread; default 100 M calls) merged alone: calls per second, peak RSS (GNU time),
# bytes per call of the calls table; and, when python3 has the duckdb package, DuckDB's 16-byte
# size histogram over it.
# Usage: bench/merge-scale.sh [DIRS] [CALLS]  (defaults 1000, 100000000)
# The timed merges run through crates/dataset/examples/merge.rs (the library's `dataset::merge`, the
# same code `alloclens merge` runs, built in release: lighter than the whole CLI); ALLOCLENS=path
# uses that alloclens for run and record instead of building it in release (their speed is not
# measured here). WORK=dir keeps the files
# there (default: a temporary directory, removed at the end; the trace takes ~1.6 bytes per call,
# the dataset ~2.8).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
DIRS=${1:-1000}
CALLS=${2:-100000000}
if [ -n "${WORK:-}" ]; then
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-merge.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
fi
cargo build --release -q -p dataset --example merge
MERGE=$PWD/target/release/examples/merge
if [ -n "${ALLOCLENS:-}" ]; then
  AL=$ALLOCLENS
else
  cargo build --release -q -p alloclens
  AL=$PWD/target/release/alloclens
fi
[ -x /usr/bin/time ] || { echo "merge-scale: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(uname -r)"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

# GNU time's "Maximum resident set size" (KiB) and "Elapsed (wall clock) time" of a command.
timed() {
  local log=$1; shift
  /usr/bin/time -v "$@" 2> "$log" || { cat "$log" >&2; return 1; }
}
peak_kib() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
# CPU time (user + sys, seconds) of a command: what a loaded machine does not inflate.
cpu_s() {
  awk -F': ' '/User time \(seconds\)|System time \(seconds\)/ { s += $2 } END { print s }' "$1"
}
wall_s() {
  sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}

# 1. A few real results directories: three commands under three allocators (glibc alone where
#    jemalloc or mimalloc is not installed), two repeats.
mkdir -p "$WORK/real"
i=0
for cmd in "twowave --wave-mb 8 --hold-ms 200" "churn --ops 300000" "realloc"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$AL" run -a glibc,jemalloc,mimalloc -r 2 --interval 20ms --force -o "$WORK/real/r$i" -- "$AL" workload $cmd > /dev/null 2>&1 ||
    "$AL" run -a glibc -r 2 --interval 20ms --force -o "$WORK/real/r$i" -- "$AL" workload $cmd > /dev/null
done

# 2. DIRS copies under other host names: results.json's hostname and creation time made unique, so
#    each is a distinct run of a distinct host (a plain copy would be skipped as a duplicate).
rm -rf "$WORK/fleet" "$WORK/fleet.ds"
mkdir -p "$WORK/fleet"
for n in $(seq 1 "$DIRS"); do
  src=$WORK/real/r$(( (n - 1) % 3 + 1 ))
  dst=$WORK/fleet/node-$n
  mkdir "$dst"
  cp "$src/samples.csv" "$src/markers.csv" "$dst/"
  sed -e "s/\"hostname\": \"[^\"]*\"/\"hostname\": \"node-$n\"/" \
      -e "s/\"created\": \"\([^\"]*\)\"/\"created\": \"\1-copy$n\"/" "$src/results.json" > "$dst/results.json"
done
sample_bytes=$(du -sb "$WORK/fleet" | cut -f1)
timed "$WORK/fleet.time" "$MERGE" "$WORK"/fleet/node-* -o "$WORK/fleet.ds"
fleet_s=$(wall_s "$WORK/fleet.time")
echo
echo "merge of $DIRS results directories ($((sample_bytes / 1024 / 1024)) MiB): $fleet_s s wall, peak RSS $(( $(peak_kib "$WORK/fleet.time") / 1024 )) MiB, dataset $(( $(du -sb "$WORK/fleet.ds" | cut -f1) / 1024 / 1024 )) MiB (target: under 60 s)"
grep -h '^alloclens: merged' "$WORK/fleet.time" || true

# 3. A trace of CALLS calls: churn makes one malloc and one free per op (plus a few at the start).
rm -f "$WORK/churn.alt"
"$AL" record -q -o "$WORK/churn.alt" -- "$AL" workload churn --ops $((CALLS / 2)) > /dev/null
trace_bytes=$(stat -c %s "$WORK/churn.alt")
rm -rf "$WORK/calls.ds"
timed "$WORK/calls.time" "$MERGE" "$WORK/churn.alt" -o "$WORK/calls.ds"
# The merged rows are the calls plus the trace's row of `traces`.
rows=$(sed -n 's/^alloclens: merged 1 source (\([0-9]*\) rows).*/\1/p' "$WORK/calls.time")
calls=$((rows - 1))
calls_s=$(wall_s "$WORK/calls.time")
# One file per writer thread: the table is their sum.
calls_bytes=$(find "$WORK/calls.ds/kind=calls" -name '*.parquet' -exec stat -c %s {} + | awk '{ s += $1 } END { print s }')
echo
echo "trace: $calls calls, $(awk "BEGIN { printf \"%.2f\", $trace_bytes / $calls }") bytes per call"
echo "merge of the trace: $calls_s s wall, $(awk "BEGIN { printf \"%.1f\", $calls / $calls_s / 1e6 }") M calls/s (target >= 20), peak RSS $(( $(peak_kib "$WORK/calls.time") / 1024 )) MiB (target <= 256)"
calls_cpu=$(cpu_s "$WORK/calls.time")
echo "merge CPU (user + sys): $calls_cpu s = $(awk "BEGIN { printf \"%.0f\", $calls_cpu * 1e9 / $calls }") ns per call (20 M calls/s on 2 cores needs <= 100)"
echo "calls table: $((calls_bytes / 1024 / 1024)) MiB, $(awk "BEGIN { printf \"%.2f\", $calls_bytes / $calls }") bytes per call (target <= 3)"
if python3 -c 'import duckdb' 2> /dev/null; then
  python3 - "$WORK/calls.ds" <<'PY'
import sys, time, duckdb
ds = sys.argv[1]
con = duckdb.connect()
start = time.monotonic()
rows = con.sql(f"""select size // 16 * 16 as low, count(*) as n
  from read_parquet('{ds}/kind=calls/*/*/*.parquet', hive_partitioning = true)
  where op <> 'free' group by all order by low""").fetchall()
took = time.monotonic() - start
print(f"DuckDB {duckdb.__version__}: 16-byte size histogram ({len(rows)} buckets) in {took:.2f} s")
PY
else
  echo "DuckDB: python3 has no duckdb package (pip install duckdb): histogram query not timed"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
