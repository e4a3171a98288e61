#!/usr/bin/env bash
# What `record --leaks` costs (issue 40), side by side in one run against the tools that answer
# the same question: each program native, under `alloclens record` (plain), `alloclens record
# --leaks`, valgrind's memcheck (`--leak-check=full`, its default kinds) and LeakSanitizer
# (gcc's standalone runtime, liblsan.so.0, preloaded into the unchanged program: what
# -fsanitize=leak links in). Programs: python3 (bench/programs/service.py, PYTHONMALLOC=malloc,
# so every object is a heap call) and gcc's cc1 at -O2 on a generated C file. Interleaved rounds
# (each round runs every variant once, starting with another each time); medians of wall seconds,
# and their ratios to native and to plain `record`.
# Target (issue 40): record --leaks <= 1.3x plain record on python3 and cc1.
# Usage: bench/leaks-cost.sh [ROUNDS]   (default 3; memcheck makes it ~5 min)
#   ONLY="python3"   only these programs
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-leaks-cost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

command -v valgrind >/dev/null || { echo "leaks-cost: valgrind is missing (scripts/setup.sh bench installs it)" >&2; exit 1; }
LSAN=$(gcc -print-file-name=liblsan.so)
[ -f "$LSAN" ] || { echo "leaks-cost: gcc's liblsan.so is missing (Debian: liblsan0)" >&2; exit 1; }
LSAN=$(readlink -f "$LSAN")
cargo build --release -q -p alloclens
ALLOCLENS=$PWD/target/release/alloclens
python3 bench/programs/big_c.py 120 "$WORK/big.c"
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
CC1=$(gcc -print-prog-name=cc1)

# name|environment|command
PROGRAMS=(
  "python3|PYTHONMALLOC=malloc|$PY $PWD/bench/programs/service.py 4000 1"
  "cc1-O2||$CC1 -quiet -imultiarch $(gcc -print-multiarch) -O2 $WORK/big.c -o $WORK/big.s"
)
SELECTED=()
for entry in "${PROGRAMS[@]}"; do
  case " ${ONLY:-${entry%%|*}} " in *" ${entry%%|*} "*) SELECTED+=("$entry") ;; esac
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "valgrind: $(valgrind --version); LSan: $LSAN; rounds: $ROUNDS, interleaved"
python3 - "$WORK" "$ALLOCLENS" "$LSAN" "$ROUNDS" "${SELECTED[@]}" <<'PY'
import os, shlex, statistics, subprocess, sys, time

WORK, ALLOCLENS, LSAN, ROUNDS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PROGRAMS = []
for entry in sys.argv[5:]:
    name, env, command = entry.split("|", 2)
    PROGRAMS.append((name, dict(kv.split("=", 1) for kv in env.split()), shlex.split(command)))
VARIANTS = ("native", "record", "record --leaks", "memcheck", "lsan")
TRACE = os.path.join(WORK, "t.alt")


def command_of(variant, command):
    if variant == "native" or variant == "lsan":
        return command
    if variant == "record":
        return [ALLOCLENS, "record", "-q", "--force", "-o", TRACE, "--"] + command
    if variant == "record --leaks":
        return [ALLOCLENS, "record", "-q", "--leaks", "--force", "-o", TRACE, "--"] + command
    return ["valgrind", "-q", "--leak-check=full", "--error-exitcode=0", "--log-file=" + os.path.join(WORK, "memcheck.log")] + command


def run(name, variant, program_env, command):
    env = dict(os.environ, **program_env)
    env.pop("LD_PRELOAD", None)
    if variant == "lsan":
        # exitcode=0: a leak found is the answer, not a failure of the run.
        env.update(LD_PRELOAD=LSAN, LSAN_OPTIONS="exitcode=0:log_path=" + os.path.join(WORK, "lsan"))
    stderr = open(os.path.join(WORK, "stderr"), "w+")
    start = time.monotonic()
    p = subprocess.run(command_of(variant, command), env=env, cwd=WORK, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=stderr)
    wall = time.monotonic() - start
    if p.returncode != 0:
        stderr.seek(0)
        sys.exit(f"{name} ({variant}) exited with {p.returncode}\n{stderr.read()[-2000:]}")
    return wall


times = {(name, v): [] for name, _, _ in PROGRAMS for v in VARIANTS}
for name, env, command in PROGRAMS:  # once each first: a failure stops here, with its message
    for v in VARIANTS:
        run(name, v, env, command)
for r in range(ROUNDS):
    for name, env, command in PROGRAMS:
        for k in range(len(VARIANTS)):
            v = VARIANTS[(k + r) % len(VARIANTS)]
            times[name, v].append(run(name, v, env, command))
    print(f"  round {r + 1} of {ROUNDS} done", file=sys.stderr)

print()
print(f"{'program':<10} {'variant':<15} {'wall s':>8} {'x native':>9} {'x record':>9}")
for name, _, _ in PROGRAMS:
    native = statistics.median(times[name, "native"])
    record = statistics.median(times[name, "record"])
    for v in VARIANTS:
        m = statistics.median(times[name, v])
        print(f"{name:<10} {v:<15} {m:8.3f} {m / native:9.2f} {m / record:9.2f}")
    leaks = statistics.median(times[name, "record --leaks"]) / record
    print(f"{name:<10} record --leaks / record = {leaks:.2f} (target <= 1.30): {'met' if leaks <= 1.30 else 'NOT met'}")
PY
