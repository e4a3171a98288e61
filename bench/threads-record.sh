#!/usr/bin/env bash
# What recording costs programs of several threads (issue 41), side by side in one run: untraced,
# `alloclens record -o T -- CMD` and heaptrack, on bench/programs/thread-churn.c's three patterns:
# a 2-thread churn (malloc + free of 16..512 B in each thread's own slots), a 4-thread
# malloc/realloc/free program, and xmalloc-test's pattern on 6 threads (blocks allocated on one
# thread and freed on another). Interleaved rounds (each runs every tool once, in turn), medians of
# the wall time; ratios to untraced. Every run must print the program's checksum, the same for all.
# Targets: record <= 2.5x on the 4- and 6-thread programs, <= 1.2x on the 2-thread churn.
# Usage: bench/threads-record.sh [ROUNDS] [SCALE]   (defaults 3, 1: SCALE multiplies every OPS)
#   NO_HEAPTRACK=1 skips heaptrack (it is the slowest by far).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SCALE=${2:-1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-threads.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cc -O2 -pthread -o "$WORK/thread-churn" bench/programs/thread-churn.c
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens
HEAPTRACK=$(command -v heaptrack || true)
[ -n "${NO_HEAPTRACK:-}" ] && HEAPTRACK=

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $ROUNDS, interleaved; wall time medians; compare the columns of one run only"
python3 - "$AL" "$WORK" "$ROUNDS" "$SCALE" "$HEAPTRACK" <<'PY'
import os, statistics, subprocess, sys, time

AL, WORK, ROUNDS, SCALE, HEAPTRACK = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
PROGRAM = os.path.join(WORK, "thread-churn")
CASES = [  # (name, args, target for record)
    ("churn-2t", ["churn", "2", str(int(50_000_000 * SCALE))], 1.2),
    ("realloc-4t", ["realloc", "4", str(int(10_000_000 * SCALE))], 2.5),
    ("xmalloc-6t", ["cross", "6", str(int(2_000_000 * SCALE))], 2.5),
]
TOOLS = ["native", "record"] + (["heaptrack"] if HEAPTRACK else [])

def run(tool, args, tag):
    cmd = [PROGRAM] + args
    cwd = WORK
    if tool == "record":
        trace = os.path.join(WORK, f"{tag}.alt")
        if os.path.exists(trace):
            os.remove(trace)  # ours, from the round before: record never replaces a file
        cmd = [AL, "record", "-q", "-o", trace, "--"] + cmd
    elif tool == "heaptrack":
        cwd = os.path.join(WORK, f"ht-{tag}")
        os.makedirs(cwd, exist_ok=True)
        for f in os.listdir(cwd):
            os.remove(os.path.join(cwd, f))
        cmd = [HEAPTRACK] + cmd
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    sums = [l for l in p.stdout.splitlines() if l.startswith("checksum")]
    if p.returncode != 0 or not sums:
        sys.exit(f"{tool} on {tag}: status {p.returncode}, no checksum: {p.stderr[-400:]}")
    return wall, sums[0]

print(f"{'program':<12} {'native_s':>9} " + " ".join(f"{t + '_s':>12}" for t in TOOLS[1:])
      + " " + " ".join(f"{t + '/x':>12}" for t in TOOLS[1:]) + "  target(record)")
for name, args, target in CASES:
    walls = {t: [] for t in TOOLS}
    checksums = set()
    for r in range(ROUNDS):
        order = TOOLS[r % len(TOOLS):] + TOOLS[:r % len(TOOLS)]
        for tool in order:
            wall, checksum = run(tool, args, name)
            walls[tool].append(wall)
            checksums.add(checksum)
    if len(checksums) != 1:
        sys.exit(f"{name}: the checksums differ: {checksums}")
    med = {t: statistics.median(v) for t, v in walls.items()}
    ratio = {t: med[t] / med["native"] for t in TOOLS}
    verdict = "met" if ratio["record"] <= target else "not met"
    print(f"{name:<12} {med['native']:9.3f} " + " ".join(f"{med[t]:12.3f}" for t in TOOLS[1:])
          + " " + " ".join(f"{ratio[t]:12.2f}" for t in TOOLS[1:]) + f"  <= {target}x: {verdict}")
PY
