#!/bin/sh
# ksmd's CPU and the time to merge, per pages_to_scan: forkworkers with 4 workers each building the
# same 64 MiB after the fork (what only KSM can share), run by `alloclens run --ksm` once per
# pages_to_scan value (KSM off and on side by side each time). Prints, per value: the time until the
# tree's merged bytes settled, how much of the workers' copies merged, the PSS saved, ksmd's CPU (%
# of one core over the run) and its full scans. Needs root (it drives the machine's ksmd, and gives
# every setting back). Environment: SCAN="100 1000 5000 20000" SLEEP_MS=20 WORKERS=4 MB=64
# LINGER_MS=30000 (how long the workers hold their data: the slowest rate must merge within it)
# MECHANISM=auto (or prctl, madvise: --ksm-mechanism, how the tree is made mergeable).
set -eu
cd "$(dirname "$0")/.."
SCAN=${SCAN:-"100 1000 5000 20000"}
SLEEP_MS=${SLEEP_MS:-20}
WORKERS=${WORKERS:-4}
MB=${MB:-64}
LINGER_MS=${LINGER_MS:-30000}
MECHANISM=${MECHANISM:-auto}
cargo build --quiet --release -p alloclens
bin=target/release/alloclens
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(nproc) cores, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "forkworkers: $WORKERS workers x $MB MiB built after the fork, held ${LINGER_MS} ms; sleep_millisecs=$SLEEP_MS; --ksm-mechanism $MECHANISM"
for scan in $SCAN; do
  "$bin" run --ksm --ksm-mechanism "$MECHANISM" --ksm-set "pages_to_scan=$scan" --ksm-set "sleep_millisecs=$SLEEP_MS" \
    -a glibc -r 1 --exact-pss --interval 250ms --program-output discard -o "$out/scan-$scan" \
    -- "$bin" workload forkworkers --workers "$WORKERS" --shared-mb 8 --events 5 \
       --postfork-mb "$MB" --linger-ms "$LINGER_MS" >/dev/null
done
python3 - "$out" "$WORKERS" "$MB" $SCAN <<'PY'
import json, sys
out, workers, mb, scans = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
expected = workers * mb * 2**20
print(f"{'pages_to_scan':>13}  {'settled':>8}  {'merged':>7}  {'PSS saved':>10}  {'ksmd CPU':>8}  {'full scans':>10}")
for scan in scans:
    r = json.load(open(f"{out}/scan-{scan}/results.json"))
    on = next(x for x in r["runs"] if x["params"].get("ksm") == "on")
    k, s = on["ksm"], r["ksm_savings"][0]
    merged = k["merging"]["peak"] / expected
    # Settled only when most of the copies merged: otherwise the run ended first.
    settled = f"{k['settle_s']:.1f} s" if k["settle_s"] is not None and merged >= 0.7 else "no"
    saved = s["saved_mean"] / 2**20 if s["saved_mean"] is not None else float("nan")
    cpu = k["ksmd_cpu_pct"] if k["ksmd_cpu_pct"] is not None else float("nan")
    print(f"{scan:>13}  {settled:>8}  {merged:>6.0%}  {saved:>6.1f} MiB  {cpu:>6.1f} %  {k['full_scans']:>10}")
PY
