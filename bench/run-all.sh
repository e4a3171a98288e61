#!/bin/sh
# Every benchmark, one after the other; each prints its own ratios measured side by side in one run.
set -eu
cd "$(dirname "$0")/.."
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
for b in bench/sampler-cost.sh bench/record-overhead.sh bench/record-real.sh bench/stacks-overhead.sh bench/analyze-memory.sh bench/ksm-cost.sh bench/watch-overhead.sh bench/replay-speed.sh bench/merge-scale.sh bench/attach-cost.sh bench/profile-cost.sh bench/leaks-cost.sh bench/live-cost.sh bench/residency-cost.sh bench/threads-record.sh bench/hook-instructions.sh; do
  if [ -x "$b" ] || [ -f "$b" ]; then
    echo "== $b"
    sh "$b"
  fi
done
