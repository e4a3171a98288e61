#!/usr/bin/env bash
# How close a replay comes to the original run (issue 25, point 6): every built-in workload and three
# real programs (python3 with PYTHONMALLOC=malloc, sqlite3, gcc's cc1) are recorded once under glibc
# (`alloclens record`, which notes the program's memory on its call axis: MEMORY chunks), then
# replayed under glibc (`alloclens replay -a glibc`). Prints, per trace, for the process image with
# the most calls: its peak live requested bytes, the original's peak and mean (over calls) heap (private anonymous memory, watch's
# smaps split) against the replay's peak and mean RSS (the replay's memory is all anonymous: its
# driver's start, `rss_before`, is included), their ratios, the original's RSS and the part of it
# that is not heap (code, files, stacks: what a replay does not reproduce), and the replay's time
# against the original image's time (first to last call, recorded: the tracing's 1.0-1.2x included).
# Usage: bench/replay-fidelity.sh [--keep DIR]   ALLOCLENS=path/to/alloclens to use a given build
#        (default: a release build); ONLY=python3,cc1 for some programs only; --keep DIR keeps the
#        traces and results. Memory figures are not sensitive to machine load; times are.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
KEEP=
if [ "${1:-}" = --keep ]; then KEEP=${2:?--keep needs a directory}; mkdir -p "$KEEP"; fi
WORK=${KEEP:-$(mktemp -d /tmp/alloclens-fidelity.XXXXXX)}
[ -n "$KEEP" ] || trap 'rm -rf "$WORK"' EXIT
if [ -z "${ALLOCLENS:-}" ]; then
  cargo build --release -q -p alloclens
  ALLOCLENS=$PWD/target/release/alloclens
fi
AL=$ALLOCLENS
for tool in python3 sqlite3 gcc; do
  command -v "$tool" >/dev/null || { echo "replay-fidelity: $tool is not installed (scripts/setup.sh bench)" >&2; exit 1; }
done

# The programs (bench/programs/): python3 builds, serialises, parses and sorts records (every
# object through malloc); sqlite3 fills, indexes, joins and aggregates an in-memory database; cc1
# works on a C file for a second or two.
python3 bench/programs/big_c.py 500 "$WORK/big.c"
PY=$(python3 -c 'import sys; print(sys.executable)')   # the interpreter, not a pyenv shim script
CC1=$(gcc -print-prog-name=cc1)

# name|command (the built-in workloads at sizes that record in a few seconds)
PROGRAMS=(
  "twowave|$AL workload twowave --wave-mb 32 --hold-ms 300"
  "events|$AL workload events --events 100"
  "xthread|$AL workload xthread --objects 200000"
  "forkworkers|$AL workload forkworkers --workers 2 --events 30 --shared-mb 16"
  "churn|$AL workload churn --ops 1000000"
  "realloc|$AL workload realloc"
  "tree|$AL workload tree --procs 2 --mb 16 --seconds 1"
  "leak|$AL workload leak --duration-ms 1000"
  "cache|$AL workload cache --duration-ms 1000 --capacity-mb 16"
  "python3|$PY $PWD/bench/programs/service.py 30000 2"
  "sqlite3|sqlite3 :memory: -init $PWD/bench/programs/work.sql .quit"
  "cc1|$CC1 -quiet -imultiarch $(gcc -print-multiarch) -O2 $WORK/big.c -o $WORK/big.s"
)

if [ -n "${ONLY:-}" ]; then
  kept=()
  for entry in "${PROGRAMS[@]}"; do [[ ",$ONLY," == *",${entry%%|*},"* ]] && kept+=("$entry"); done
  PROGRAMS=("${kept[@]}")
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
for entry in "${PROGRAMS[@]}"; do
  name=${entry%%|*}
  read -r -a cmd <<< "${entry#*|}"
  env=()
  [ "$name" = python3 ] && env=(env PYTHONMALLOC=malloc)
  "$AL" record -q --force -o "$WORK/$name.alt" -- "${env[@]}" "${cmd[@]}" >/dev/null 2>"$WORK/$name.record.err" \
    || { echo "replay-fidelity: recording $name failed:" >&2; cat "$WORK/$name.record.err" >&2; exit 1; }
  "$AL" analyze --json "$WORK/$name.alt" > "$WORK/$name.analysis.json"
  # A replay that fails (a crash in the replay) is a row of the table, with its ending.
  "$AL" replay -a glibc --force -o "$WORK/$name.replay" "$WORK/$name.alt" >/dev/null 2>"$WORK/$name.replay.err" \
    || echo "replay-fidelity: replaying $name failed: $(grep -m1 'warning' "$WORK/$name.replay.err" || tail -1 "$WORK/$name.replay.err")" >&2
done

python3 - "$WORK" "${PROGRAMS[@]%%|*}" <<'PY'
import json, sys
work, names = sys.argv[1], sys.argv[2:]
MiB = 1 << 20
def mib(b): return f"{b / MiB:.1f}" if b is not None else "-"
def ratio(a, b): return f"{a / b:.2f}" if a and b else "-"
head = ("program", "images", "calls", "live pk", "heap pk", "replay pk", "pk ratio", "heap mean", "replay mean",
        "mean ratio", "RSS pk", "rest pk", "orig s", "replay s", "time ratio")
print("  ".join(f"{h:>11}" for h in head))
for name in names:
    analysis = json.load(open(f"{work}/{name}.analysis.json"))
    try:
        replays = json.load(open(f"{work}/{name}.replay/replay.json"))
        glibc = next(r for r in replays if r["variant"] == "glibc")
    except (OSError, ValueError, StopIteration) as e:
        print(f"{name:>11}  replay failed: no replay.json ({e})")
        continue
    if not glibc["ok"]:
        print(f"{name:>11}  replay failed: {glibc['ending']}")
        continue
    # The image with the most calls, in the replay and in the analysis.
    image = max(glibc["images"], key=lambda i: i["calls"])
    proc = next(p for p in analysis["processes"]
                if (p["pid"], p["exec_index"]) == (image["pid"], image["exec_index"]))
    mem = proc.get("memory") or {}
    heap, rss, rest = mem.get("heap") or {}, mem.get("rss") or {}, mem.get("non_heap") or {}
    f = image["figures"]
    orig_s = proc["duration_ns"] / 1e9
    row = (name, str(len(analysis["processes"])), str(image["calls"]),
           mib(proc["stats"]["peak_live_bytes"]["value"]), mib(heap.get("peak")), mib(f["peak_rss"]), ratio(f["peak_rss"], heap.get("peak")),
           mib(heap.get("mean")), mib(f["mean_rss_over_calls"]),
           ratio(f["mean_rss_over_calls"], heap.get("mean")),
           mib(rss.get("peak")), mib(rest.get("peak")),
           f"{orig_s:.3f}", f"{image['seconds']:.3f}", ratio(image["seconds"], orig_s))
    print("  ".join(f"{c:>11}" for c in row))
print("MiB. live: the trace's peak live requested bytes; heap: the original's private anonymous memory "
      "(smaps readings: malloc's, and the program's own anonymous mmaps); replay: its anonymous RSS "
      "(statm, driver start included); means over calls; rest: the original's RSS - heap.")
PY
