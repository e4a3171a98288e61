#!/usr/bin/env bash
# What the always-on heap profile costs (issue 37), side by side in one run: each program native,
# under the watch agent alone (liballoclens_agent.so preloaded, ALLOCLENS_AGENT_DIR set, its
# default 1 s interval: what `watch` runs), and under the agent with its sampler on
# (ALLOCLENS_PROFILE_BYTES=524288, the default interval: what `watch --profile` runs). Programs:
# python3 (bench/programs/service.py, PYTHONMALLOC=malloc so every object is a heap call),
# sqlite3 (bench/programs/work.sql in memory), gcc's cc1 at -O2 on a generated C file, and
# bench/alloc-micro.c (1 thread, allocation-bound). Interleaved rounds (each round runs every
# variant of every program once, starting with another variant each time); medians.
# Prints per program: wall seconds and ratios to native, the same for CPU seconds (the process's
# user + system: steadier on a shared machine); then, from one more run with the sampler, its table files (PID-N.prof): apparent size and disk blocks (what
# `du --apparent-size` and `du` say: the file is sparse, made at its full size), and the
# largest RSS of the table's mapping in the program (/proc/PID/smaps, polled every 50 ms).
# Targets (issue 37): agent+sampler <= 1.03x native on python3, sqlite3 and cc1, <= 1.10x on
# alloc-micro; each table file no larger than AG_PROF_FILE_BYTES (shim/agent/profile_table.h:
# 6.25 MiB and its 4 KiB header) whatever the program.
# On a shared machine the rounds of one variant differ by more than the sampler costs; so the
# rounds also run the sampler at 16 KiB (32 times the samples), and its cost is split into what
# every call pays (the countdown, the free's filter byte) and what each sample pays (the stack,
# the table), fitted on the two intervals.
# Last, snapshots taken 100 times a second (the profiles crate's snapshot_storm example: the table
# read and its estimates made, as `alloclens snapshot` does before it writes pprof) all through a
# run of alloc-micro with the sampler (8 times its iterations: about 10 s here): the program pinned to one core, the reader to
# the other, interleaved with runs without the reader. Target: no measurable slowdown.
# Usage: bench/profile-cost.sh [ROUNDS] [MICRO_ITERATIONS]   (defaults 5, 40000000; ~7 min)
#   ONLY="python3 cc1"   only these programs
#   ALLOCLENS_AGENT=PATH another agent build (as alloclens itself takes it); default: the one cargo
#                        built into the release alloclens
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
ITER=${2:-40000000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-profile-cost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cargo build --release -q -p alloclens
cargo build --release -q -p profiles --example snapshot_storm
STORM=$PWD/target/release/examples/snapshot_storm
# The agent alloclens embeds, as crates/embedded's build script made it (alloclens writes the
# same bytes to its cache before a watch).
AGENT=${ALLOCLENS_AGENT:-$(ls -t "$PWD"/target/release/build/embedded-*/out/liballoclens_agent.so | head -1)}
[ -f "$AGENT" ] || { echo "no agent library at $AGENT" >&2; exit 1; }
cc -O2 -pthread -o "$WORK/alloc-micro" bench/alloc-micro.c
python3 bench/programs/big_c.py 300 "$WORK/big.c"
# The table's fixed size and where its header keeps the counts of samples and of allocation
# calls, from the agent's header file.
cat > "$WORK/table_layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "profile_table.h"
int main(void)
{
    printf("%u %zu %zu\n", AG_PROF_FILE_BYTES, offsetof(struct ag_prof_header, samples),
           offsetof(struct ag_prof_header, allocs));
}
C
cc -Ishim/agent -o "$WORK/table_layout" "$WORK/table_layout.c"
TABLE_LAYOUT=$("$WORK/table_layout")
# The interpreter itself, not a wrapper script (pyenv's python3 is one).
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
CC1=$(gcc -print-prog-name=cc1)

# name|environment|command
PROGRAMS=(
  "python3|PYTHONMALLOC=malloc|$PY $PWD/bench/programs/service.py 20000 3"
  "sqlite3||$(command -v sqlite3 || echo sqlite3) :memory: -init $PWD/bench/programs/work.sql .quit"
  "cc1-O2||$CC1 -quiet -imultiarch $(gcc -print-multiarch) -O2 $WORK/big.c -o $WORK/big.s"
  "alloc-micro||$WORK/alloc-micro 1 $ITER"
)
SELECTED=()
for entry in "${PROGRAMS[@]}"; do
  case " ${ONLY:-${entry%%|*}} " in *" ${entry%%|*} "*) SELECTED+=("$entry") ;; esac
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "agent: $AGENT; rounds: $ROUNDS, interleaved; compare the columns of one run only"
python3 - "$WORK" "$AGENT" "$ROUNDS" "$TABLE_LAYOUT" "$STORM" "$ITER" "${SELECTED[@]}" <<'PY'
import glob, os, shlex, statistics, struct, subprocess, sys, time

WORK, AGENT, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
TABLE_BYTES, SAMPLES_AT, ALLOCS_AT = map(int, sys.argv[4].split())
STORM, ITER = sys.argv[5], int(sys.argv[6])
PROGRAMS = []
for entry in sys.argv[7:]:
    name, env, command = entry.split("|", 2)
    PROGRAMS.append((name, dict(kv.split("=", 1) for kv in env.split()), shlex.split(command)))
VARIANTS = ("native", "agent", "sampler", "dense")
SAMPLE_BYTES = "524288"
# The amplified measurement's interval: 32 times the samples, so that their cost stands out of the
# run-to-run noise of a shared machine (which is larger than the sampler's cost at the default).
DENSE_BYTES = "16384"
TARGETS = {"alloc-micro": 1.10}  # the others: 1.03


def environment(variant, program_env, agent_dir):
    env = dict(os.environ, **program_env)
    for k in ("LD_PRELOAD", "ALLOCLENS_AGENT_DIR", "ALLOCLENS_PROFILE_BYTES", "ALLOCLENS_AGENT_INTERVAL_MS"):
        env.pop(k, None)
    if variant != "native":
        env.update(LD_PRELOAD=AGENT, ALLOCLENS_AGENT_DIR=agent_dir)
    if variant == "sampler":
        env["ALLOCLENS_PROFILE_BYTES"] = SAMPLE_BYTES
    if variant == "dense":
        env["ALLOCLENS_PROFILE_BYTES"] = DENSE_BYTES
    return env


def run(name, variant, program_env, command, watch=None):
    """One run: (wall s, CPU s, its agent directory), the CPU time from wait4 (the program's own
    and its waited-for children's). `watch(pid)` is called every 50 ms while it runs."""
    agent_dir = os.path.join(WORK, f"agent-{name}-{variant}")
    subprocess.run(["rm", "-rf", agent_dir], check=True)
    os.makedirs(agent_dir)
    stderr = open(os.path.join(WORK, "stderr"), "w+")
    start = time.monotonic()
    p = subprocess.Popen(command, env=environment(variant, program_env, agent_dir), cwd=WORK,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    while watch is not None:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        watch(p.pid)
        time.sleep(0.05)
    else:
        pid, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        stderr.seek(0)
        sys.exit(f"{name} ({variant}) exited with {p.returncode}: {shlex.join(command)}\n{stderr.read()[-2000:]}")
    stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, agent_dir


def samples_of(agent_dir):
    """The allocations sampled in a run (every table's header)."""
    total = 0
    for f in glob.glob(os.path.join(agent_dir, "*.prof")):
        with open(f, "rb") as t:
            total += struct.unpack_from("<Q", t.read(4096), SAMPLES_AT)[0]
    return total


times = {(name, v): [] for name, _, _ in PROGRAMS for v in VARIANTS}
for name, env, command in PROGRAMS:  # once each first: a failure stops here, with its message
    for v in VARIANTS:
        run(name, v, env, command)
for r in range(ROUNDS):
    for name, env, command in PROGRAMS:
        for k in range(len(VARIANTS)):
            v = VARIANTS[(k + r) % len(VARIANTS)]
            wall, cpu, agent_dir = run(name, v, env, command)
            times[name, v].append((wall, cpu, samples_of(agent_dir)))
    print(f"  round {r + 1} of {ROUNDS} done", file=sys.stderr)


def table(name, env, command):
    """One more run with the sampler: its table files (how many, apparent size, disk blocks,
    samples and allocation calls at the program's exit) and the RSS and PSS of their mappings."""
    peak = {"rss": 0, "pss": 0}

    def watch(pid):
        try:
            rss = pss = 0
            mapping = None
            for line in open(f"/proc/{pid}/smaps"):
                f = line.split()
                if "-" in f[0] and len(f) >= 5:
                    mapping = f[5] if len(f) >= 6 else ""
                elif mapping and mapping.endswith(".prof"):
                    if f[0] == "Rss:":
                        rss += int(f[1])
                    elif f[0] == "Pss:":
                        pss += int(f[1])
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
        except (OSError, IndexError, ValueError):
            pass

    *_, agent_dir = run(name, "sampler", env, command, watch=watch)
    files = sorted(glob.glob(os.path.join(agent_dir, "*.prof")))
    du = lambda *o: sum(int(subprocess.run(["du", "-B1", *o, f], capture_output=True, text=True,
                                           check=True).stdout.split()[0]) for f in files)
    def counts(f):
        with open(f, "rb") as t:
            header = t.read(4096)
        return struct.unpack_from("<Q", header, SAMPLES_AT)[0], struct.unpack_from("<Q", header, ALLOCS_AT)[0]
    samples = sum(counts(f)[0] for f in files)
    allocs = sum(counts(f)[1] for f in files)
    return len(files), du("--apparent-size"), du(), peak["rss"], peak["pss"], samples, allocs


med = lambda xs: statistics.median(xs)
print(f"{'':<12} {'wall s':>26} {'wall / native':>15} {'CPU s':>26} {'CPU / native':>15}")
print(f"{'program':<12} {'native':>8} {'agent':>8} {'sampler':>8} {'agent':>7} {'sampler':>7} {'native':>8} {'agent':>8}"
      f" {'sampler':>8} {'agent':>7} {'sampler':>7} {'target':>7}")
verdicts = []
for name, env, command in PROGRAMS:
    wall = {v: med([t[0] for t in times[name, v]]) for v in VARIANTS}
    cpu = {v: med([t[1] for t in times[name, v]]) for v in VARIANTS}
    target = TARGETS.get(name, 1.03)
    print(f"{name:<12} {wall['native']:8.3f} {wall['agent']:8.3f} {wall['sampler']:8.3f}"
          f" {wall['agent'] / wall['native']:7.3f} {wall['sampler'] / wall['native']:7.3f}"
          f" {cpu['native']:8.3f} {cpu['agent']:8.3f} {cpu['sampler']:8.3f}"
          f" {cpu['agent'] / cpu['native']:7.3f} {cpu['sampler'] / cpu['native']:7.3f} {target:6.2f}x")
    verdicts.append((name, wall["sampler"] / wall["native"], cpu["sampler"] / cpu["native"], target))
print("(medians of the rounds) the same ratios per round, a variant against the native run of its round:"
      " median (min-max)")
for name, env, command in PROGRAMS:
    def spread(i, v):
        r = [t[i] / n[i] for t, n in zip(times[name, v], times[name, "native"])]
        return f"{med(r):.3f} ({min(r):.3f}-{max(r):.3f})"
    print(f"{name:<12} wall: agent {spread(0, 'agent')}, sampler {spread(0, 'sampler')};"
          f" CPU: agent {spread(1, 'agent')}, sampler {spread(1, 'sampler')}")


print()
print(f"the sampler's cost split, from the same rounds: cost = per call + samples x per sample, fitted on the"
      f" sampler at {SAMPLE_BYTES} and at {DENSE_BYTES} bytes ({int(SAMPLE_BYTES) // int(DENSE_BYTES)} times the samples);"
      " medians of the rounds' CPU seconds; each round's noise is in both")
print(f"{'program':<12} {'agent CPU s':>11} {'sampler':>8} {'dense':>8} {'samples':>8} {'dense samples':>13}"
      f" {'us/sample':>10} {'per-call share':>15} {'sample share':>13}")
for name, env, command in PROGRAMS:
    cpu = {v: med([t[1] for t in times[name, v]]) for v in VARIANTS}
    n = {v: med([t[2] for t in times[name, v]]) for v in ("sampler", "dense")}
    per_sample = (cpu["dense"] - cpu["sampler"]) / max(n["dense"] - n["sampler"], 1)
    per_call = cpu["sampler"] - cpu["agent"] - per_sample * n["sampler"]
    print(f"{name:<12} {cpu['agent']:11.3f} {cpu['sampler']:8.3f} {cpu['dense']:8.3f} {n['sampler']:8.0f}"
          f" {n['dense']:13.0f} {per_sample * 1e6:10.2f} {per_call / cpu['native'] * 100:14.2f}%"
          f" {per_sample * n['sampler'] / cpu['native'] * 100:12.2f}%")
print()
print(f"the sampler's table files (PID-N.prof, at most {TABLE_BYTES:,} bytes each), one more run with the sampler:")
print("their apparent size and disk blocks (du --apparent-size, du), the largest RSS and PSS of their mappings;")
print("the allocations sampled and the allocation calls made (the agent's exact count), and the CPU time the")
print("sampler added per sample (the medians' difference, sampler - agent, over that run's samples)")
print(f"{'program':<12} {'files':>5} {'apparent MiB':>13} {'du MiB':>8} {'mapped RSS MiB':>15} {'PSS MiB':>8}"
      f" {'samples':>9} {'calls':>12} {'us/sample':>10}")
no_table = []
for name, env, command in PROGRAMS:
    n, apparent, blocks, peak_rss, peak_pss, samples, allocs = table(name, env, command)
    if n == 0:
        no_table.append(name)
    added = med([t[1] for t in times[name, "sampler"]]) - med([t[1] for t in times[name, "agent"]])
    per_sample = f"{added / samples * 1e6:10.1f}" if samples else f"{'n/a':>10}"
    print(f"{name:<12} {n:5d} {apparent / 2**20:13.2f} {blocks / 2**20:8.2f} {peak_rss / 1024:15.2f}"
          f" {peak_pss / 1024:8.2f} {samples:9d} {allocs:12d} {per_sample}")
    if n and apparent / n > TABLE_BYTES:
        print(f"  {name}: a table file is over its bound of {TABLE_BYTES:,} bytes")
print()
if no_table:
    print(f"note: no table file (*.prof) for {', '.join(no_table)}: this agent has no sampler"
          " (ALLOCLENS_PROFILE_BYTES ignored), so the sampler column ran the agent alone")
for name, w, c, target in verdicts:
    met = "met" if w <= target else "NOT met"
    print(f"{name}: agent+sampler {w:.3f}x native by wall time, {c:.3f}x by CPU time; target <= {target:.2f}x: {met} (wall)")


def storm_run(with_reader):
    """alloc-micro with the sampler on CPU 0, about 10 s; with_reader: snapshot_storm at 100 Hz on
    CPU 1 for as long as it runs. Returns (program wall s, the reader's report or None)."""
    agent_dir = os.path.join(WORK, "agent-storm")
    subprocess.run(["rm", "-rf", agent_dir], check=True)
    os.makedirs(agent_dir)
    env = environment("sampler", {}, agent_dir)
    start = time.monotonic()
    p = subprocess.Popen([os.path.join(WORK, "alloc-micro"), "1", str(ITER * 8)], env=env,
                         stdout=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    reader = None
    if with_reader:
        # The table exists once the agent set up: the reader starts when it can find it.
        while not glob.glob(os.path.join(agent_dir, "*.prof")) and p.poll() is None:
            time.sleep(0.005)
        reader = subprocess.Popen([STORM, str(p.pid), "100", "3600"], stdout=subprocess.PIPE,
                                  text=True, preexec_fn=lambda: os.sched_setaffinity(0, {1}))
    p.wait()
    wall = time.monotonic() - start
    report = None
    if reader is not None:
        out, _ = reader.communicate()  # it ends when the program has
        report = out.strip() or None
    return wall, report


print()
if os.cpu_count() < 2:
    print("snapshots at 100 Hz: skipped (one core: the reader would take the program's)")
else:
    walls = {False: [], True: []}
    reports = []
    for r in range(ROUNDS):
        for with_reader in ((False, True) if r % 2 == 0 else (True, False)):
            wall, report = storm_run(with_reader)
            walls[with_reader].append(wall)
            if report:
                reports.append(report)
    quiet, stormed = med(walls[False]), med(walls[True])
    print(f"snapshots at 100 Hz through alloc-micro 1 {ITER * 8} with the sampler (program on CPU 0,"
          f" reader on CPU 1, {ROUNDS} interleaved rounds):")
    print(f"  program wall: {quiet:.3f} s without snapshots, {stormed:.3f} s with them:"
          f" {stormed / quiet:.3f}x (rounds: {', '.join(f'{w:.2f}' for w in walls[True])} with,"
          f" {', '.join(f'{w:.2f}' for w in walls[False])} without)")
    for rep in reports[:1]:
        print(f"  the reader, one run: {rep}")
PY
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
