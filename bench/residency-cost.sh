#!/usr/bin/env bash
# What heap residency readings cost (`record --addresses`, issue 38): on python3 (PYTHONMALLOC=malloc,
# bench/programs/service.py, which frees each round's records while building the next) and on cc1 -O2
# (a big_c.py file), each recorded with --addresses at the default memory interval. Beside the
# recording, the residency of the traced program is read the recorder's way every 100 ms (the
# default interval; the recorder reads at most that often) until it exits: the CPU time of those
# readings as % of one core, their mean and max. Then the trace's RESIDENCY chunk bytes over its
# bytes. Prints one line per program, side by side. Target: <= 2 % of one core.
# Usage: bench/residency-cost.sh [RECORDS] [FUNCTIONS]  (service.py records, 4 rounds; big_c.py functions)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-60000}
FUNCTIONS=${2:-1500}
INTERVAL_MS=100 # recorder::DEFAULT_MEMORY_INTERVAL
WORK=$(mktemp -d /tmp/alloclens-residency.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cargo build --release -q -p alloclens
cargo build --release -q -p procmem --example residency_cost
AL=$PWD/target/release/alloclens
COST=$PWD/target/release/examples/residency_cost

python3 bench/programs/big_c.py "$FUNCTIONS" "$WORK/big.c"
# The interpreter itself, not a wrapper script (pyenv's python3 is a bash script).
PY=$(python3 -c 'import sys; print(sys.executable)')
declare -A CMDS=(
  [python3]="$PY $PWD/bench/programs/service.py $RECORDS 4"
  # The compiler proper, as bench/record-real.sh runs it.
  [cc1-O2]="$(gcc -print-prog-name=cc1) -quiet -imultiarch $(gcc -print-multiarch) -O2 $WORK/big.c -o $WORK/big.s"
)

# The traced program: the descendant of `alloclens record` (under its runner process) once it
# runs PROGRAM (after its exec).
traced_pid() {
  local recorder=$1 program=$2 p pids
  for _ in $(seq 2000); do
    pids=$recorder
    for _ in 1 2 3; do
      pids="$pids $(for p in $pids; do cat /proc/"$p"/task/*/children 2>/dev/null; done)"
    done
    for p in $pids; do
      if [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$program" ]; then echo "$p"; return; fi
    done
    kill -0 "$recorder" 2>/dev/null || return 1
    sleep 0.005
  done
  return 1
}

# RESIDENCY (kind 10) chunk frames' bytes, and the file's (docs/trace-format.md, "Chunks").
residency_bytes() {
  python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at = 20 + struct.unpack_from("<I", data, 12)[0]
chunk = 0
while at + 24 <= len(data) and data[at:at + 4] == b"ALCK":
    length = struct.unpack_from("<I", data, at + 12)[0]
    if data[at + 4] == 10:
        chunk += 24 + length
    at += 24 + length
print(chunk, len(data))
PY
}

export PYTHONMALLOC=malloc
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %8s %8s %9s %8s %8s %12s %11s %11s %8s\n' program readings wall_s core_% mean_ms max_ms heap_MiB_max residency_B trace_B share_%
for name in python3 cc1-O2; do
  read -r -a cmd <<< "${CMDS[$name]}"
  "$AL" record -q --force --addresses -o "$WORK/$name.alt" -- "${cmd[@]}" >/dev/null &
  recorder=$!
  program=$(basename "${cmd[0]}" | cut -c1-15)
  pid=$(traced_pid "$recorder" "$program") || { echo "$name: did not see $program start" >&2; exit 1; }
  line=$("$COST" --every "$INTERVAL_MS" "$pid")
  wait "$recorder"
  read -r chunk total < <(residency_bytes "$WORK/$name.alt")
  python3 - "$name" "$line" "$chunk" "$total" <<'PY'
import sys
name, line, chunk, total = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4])
f = dict(zip(line[0::2], line[1::2]))
print(f"{name:<8} {f['readings']:>8} {float(f['wall_s']):8.2f} {float(f['core_pct']):9.3f} {float(f['mean_ms']):8.3f}"
      f" {float(f['max_ms']):8.3f} {float(f['max_heap_resident_mib']):12.1f} {chunk:11d} {total:11d} {100 * chunk / total:8.3f}")
PY
done
echo "target: core_% <= 2 (readings every ${INTERVAL_MS} ms, the default; the recorder spaces them further when smaps is slow)"
