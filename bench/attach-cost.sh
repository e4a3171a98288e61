#!/usr/bin/env bash
# What attaching to a running program costs it, against the two other ways of seeing its heap calls:
# starting it under `alloclens record -- CMD`, and bpftrace uprobes on the C library's malloc and free.
# The program (bench/programs/attach-churn.c: 4 threads replacing blocks of mixed sizes) prints every
# 100 ms, with a CLOCK_MONOTONIC timestamp, its calls, the longest stall of a thread's own code and
# the time its threads were stopped (neither running nor waiting for a core); every figure below
# comes from those lines, placed against what the bench did and when. Each configuration runs
# REPEATS times, interleaved; medians with min-max:
#   baseline        the program alone (3 s)
#   record -- CMD   started under `alloclens record` (3 s)
#   bpftrace        uprobes on malloc and free with `-p PID`, counting calls, attached 1.5 s into the
#                   run for 2.5 s from the first probe hit: calls/s before, while attached, after
#   attach          `alloclens record --pid PID --duration 3` 2 s into the run: calls/s before the
#                   attach, while attached, after the detach (after/before is the cost left once the
#                   GOT is restored: 1.0 when nothing of alloclens stays on the program's path; and
#                   the program checks its own GOT slots of malloc and free every 100 ms); the
#                   attach latency: the program's stalls and stops around the attach (it ends when
#                   the process gains the library's thread, polled every 5 ms) and around the
#                   detach, against its 100 ms intervals before and while attached, and against
#                   `record -- CMD`'s, beside alloclens's own figures.
# Every run must end with the program's "checksum ok" line and exit status 0 (it was left whole);
# a run that does not is listed and fails the bench.
# Needs: root or CAP_SYS_PTRACE over the program (ptrace), cc, cargo, python3; bpftrace for its row
# (not installed by this script: Debian `apt-get install bpftrace`; without it the row says so).
# Usage: bench/attach-cost.sh [REPEATS]   (default 3; about 30 s per round, 40 s on a loaded machine)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
WORK=$(mktemp -d /tmp/alloclens-attach-bench.XXXXXX)
# KEEP=1 keeps the programs' interval lines (WORK/*.out) and alloclens's output for a closer look.
if [ -n "${KEEP:-}" ]; then echo "keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi

cc -O2 -pthread -o "$WORK/attach-churn" bench/programs/attach-churn.c
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$AL" "$WORK" "$REPEATS" <<'PY'
import os, re, shutil, signal, statistics, subprocess, sys, threading, time

AL, WORK, REPEATS = sys.argv[1], sys.argv[2], int(sys.argv[3])
PROGRAM, THREADS = os.path.join(WORK, "attach-churn"), "4"
WARMUP = 0.5  # seconds of each run left out of its rates (threads starting, caches)
SETTLE = 0.3  # seconds left out around each attach and detach when measuring the phase between
DURATION = 3  # seconds alloclens stays attached
failures = []


class Interval:
    def __init__(self, start, end, calls, gap_us, stopped_max_us, stopped_sum_us, cpu_us, cpu_calls, patched):
        self.start, self.end, self.calls, self.gap_ms = start, end, calls, gap_us / 1e3
        self.stopped_max_ms, self.stopped_sum_ms = stopped_max_us / 1e3, stopped_sum_us / 1e3
        self.cpu_s, self.cpu_calls, self.patched = cpu_us / 1e6, cpu_calls, patched


def intervals(path):
    """The program's interval lines (bench/programs/attach-churn.c says what each field is)."""
    rows, previous = [], None
    for line in open(path):
        f = line.split()
        if len(f) == 9 and f[0] == "interval":
            end = float(f[1])
            if previous is not None:  # the first line has no start
                rows.append(Interval(previous, end, *map(int, f[2:])))
            previous = end
    return rows


def started(rows):
    """When the program started, by its own first line (a command in front of it starts first)."""
    return rows[0].start - 0.1 if rows else float("inf")


def rate(rows, lo, hi):
    """Calls per second of wall time, and per second of the program's CPU time, over the intervals
    lying wholly within [lo, hi]."""
    inside = [r for r in rows if r.start >= lo and r.end <= hi]
    span, cpu = sum(r.end - r.start for r in inside), sum(r.cpu_s for r in inside)
    if span < 0.15 or cpu <= 0:
        return {"wall": float("nan"), "cpu": float("nan"), "cores": float("nan")}
    return {"wall": sum(r.calls for r in inside) / span, "cpu": sum(r.cpu_calls for r in inside) / cpu,
            "cores": cpu / span}


def around(rows, lo, hi):
    """What the program saw of an event between lo and hi (ms): the longest stall of a thread's own
    code, the longest time one thread was stopped, and the time all threads were stopped, over the
    intervals it overlaps. A thread counts a stall or a stop once it runs again (its stopped time
    every 10 ms of its running), so the intervals up to 0.1 s after hi are included: after an
    attach they hold some recording too (compare with the attached intervals)."""
    near = [r for r in rows if r.end >= lo and r.start <= hi + 0.1]
    if not near:
        return {"stall": float("nan"), "stopped": float("nan"), "stopped_all": float("nan")}
    return {"stall": max(r.gap_ms for r in near), "stopped": max(r.stopped_max_ms for r in near),
            "stopped_all": sum(r.stopped_sum_ms for r in near)}


def per_interval(rows, lo, hi, pick):
    """The same per 100 ms interval over [lo, hi]: pick (statistics.median, max) of its intervals."""
    inside = [r for r in rows if r.start >= lo and r.end <= hi]
    if not inside:
        return {"stall": float("nan"), "stopped": float("nan"), "stopped_all": float("nan")}
    return {"stall": pick([r.gap_ms for r in inside]),
            "stopped": pick([r.stopped_max_ms for r in inside]),
            "stopped_all": pick([r.stopped_sum_ms for r in inside])}


def phases(rows, before, attached):
    """The median and the worst 100 ms interval before and while attached: (lo, hi) each."""
    return {f"{name}_{how}": per_interval(rows, *span, pick)
            for name, span in (("before", before), ("attached", attached))
            for how, pick in (("median", statistics.median), ("worst", max))}


def check_whole(name, path, returncode):
    """The program must end with its checksum line and exit 0: the run left its heap whole."""
    text = open(path).read()
    last = text.strip().splitlines()[-1] if text.strip() else "(no output)"
    if returncode != 0 or not last.startswith("checksum ok"):
        failures.append(f"{name}: exit status {returncode}, last line: {last}")


class Lines:
    """A child's output lines with the monotonic time each arrived (a reader thread)."""
    def __init__(self, stream):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in iter(stream.readline, ""):
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def first(self, pattern):
        return next((t for t, l in self.lines if re.search(pattern, l)), None)


def start_program(tag, seconds=0, prefix=()):
    out = os.path.join(WORK, f"{tag}.out")
    p = subprocess.Popen([*prefix, PROGRAM, THREADS, str(seconds)], stdout=open(out, "w"),
                         stderr=subprocess.DEVNULL)
    return p, out


def stop_program(p):
    p.send_signal(signal.SIGTERM)
    return p.wait(timeout=30)


def libc_of(pid):
    """The C library the process mapped, as its path reads from outside (bpftrace's probe path)."""
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and re.search(r"/libc\.so\.6$|/libc-[0-9.]+\.so$", f[5]):
            return f"/proc/{pid}/root{f[5]}"
    raise SystemExit(f"no libc.so.6 in /proc/{pid}/maps")


def baseline(i):
    p, out = start_program(f"base{i}", seconds=3)
    check_whole("baseline", out, p.wait(timeout=60))
    rows = intervals(out)
    return {"rate": rate(rows, started(rows) + WARMUP, float("inf"))}


def recorded(i):
    trace = os.path.join(WORK, f"record{i}.alt")
    p, out = start_program(f"record{i}", seconds=3, prefix=(AL, "record", "-q", "-o", trace, "--"))
    check_whole("record -- CMD", out, p.wait(timeout=120))
    os.remove(trace)
    rows = intervals(out)
    return {"rate": rate(rows, started(rows) + WARMUP, float("inf")),
            **phases(rows, (0, 0), (started(rows) + WARMUP, float("inf")))}


def uprobes(i):
    """bpftrace counting malloc and free calls of the program, attached 1.5 s into its run for 2.5 s
    from its first probe's first hit (its "Attaching" line comes before the probes are in place)."""
    p, out = start_program(f"bpftrace{i}")
    time.sleep(1.5)
    libc = libc_of(p.pid)
    script = (f"uprobe:{libc}:malloc {{ @malloc = count(); if (@hit == 0) {{ @hit = 1; printf(\"hit\\n\"); }} }} "
              f"uprobe:{libc}:free {{ @free = count(); }}")
    launched = time.monotonic()
    bt = subprocess.Popen(["bpftrace", "-p", str(p.pid), "-e", script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    lines = Lines(bt.stdout)
    deadline = time.monotonic() + 30
    while lines.first(r"^hit$") is None and bt.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    attaching = lines.first(r"^hit$")
    if attaching is None:
        bt.kill()
        stop_program(p)
        # Not alloclens's failure: its row says n/a, and why.
        print("note: bpftrace did not attach: " + " | ".join(l for _, l in lines.lines[-3:]))
        return None
    time.sleep(2.5)
    detaching = time.monotonic()
    bt.send_signal(signal.SIGINT)
    bt.wait(timeout=60)
    lines.thread.join(5)
    done = time.monotonic()
    time.sleep(1.5)
    check_whole("bpftrace", out, stop_program(p))
    rows = intervals(out)
    counted = sum(int(m.group(1)) for _, l in lines.lines for m in [re.match(r"@(?:malloc|free): (\d+)", l)] if m)
    return {"before": rate(rows, started(rows) + WARMUP, launched),
            "during": rate(rows, attaching + SETTLE, detaching),
            "after": rate(rows, done + SETTLE, float("inf")),
            "attach": around(rows, launched, attaching + SETTLE),
            "detach": around(rows, detaching, done),
            **phases(rows, (started(rows) + WARMUP, launched), (attaching + SETTLE, detaching)),
            "counted": counted}


def own_figures(lines):
    """alloclens's account of the attach, from its line "attached to pid ... in TOTAL ms (seize to
    detach; ...), that thread ran alloclens's calls BORROWED ms" (seize to last detach; the borrowed
    thread's time); NaN if it says it otherwise."""
    text = "\n".join(l for _, l in lines)
    m = re.search(r" in ([0-9.]+) ms \(seize to detach.*?ran alloclens's calls ([0-9.]+) ms", text)
    nan = float("nan")
    return {"total_ms": float(m.group(1)), "borrowed_ms": float(m.group(2))} if m else {"total_ms": nan, "borrowed_ms": nan}


def injection_seen(pid, al):
    """When, seen from outside (polled every 5 ms), alloclens's library appeared in the process's
    maps (its dlopen done) and the process gained a thread (the library's own, which the entry
    starts last): the end of the attach."""
    mapped, threads = None, len(os.listdir(f"/proc/{pid}/task"))
    while al.poll() is None:
        try:
            if mapped is None and "/alloclens-attach-" in open(f"/proc/{pid}/maps").read():
                mapped = time.monotonic()
            if mapped is not None and len(os.listdir(f"/proc/{pid}/task")) > threads:
                return mapped, time.monotonic()
        except OSError:
            break
        time.sleep(0.005)
    return mapped, None


def attached(i):
    """alloclens attached 2 s into the program's run for DURATION s; the program runs on 2 s after."""
    p, out = start_program(f"attach{i}")
    time.sleep(2.0)
    command = [AL, "record", "--pid", str(p.pid), "--duration", str(DURATION), "-o",
               os.path.join(WORK, f"attach{i}.alt")]
    launched = time.monotonic()
    al = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = Lines(al.stdout)
    mapped, injected = injection_seen(p.pid, al)
    status = al.wait(timeout=60)
    lines.thread.join(5)
    done = time.monotonic()
    time.sleep(2.0)
    check_whole("attach", out, stop_program(p))
    with open(os.path.join(WORK, f"attach{i}.events"), "w") as f:  # for KEEP=1
        for t, l in [(launched, "launched"), (mapped or 0, "library mapped"), (injected or 0, "its thread started"),
                     (done, "alloclens exited"), *lines.lines]:
            f.write(f"{t:.6f} {l}\n")
    if status != 0 or injected is None:
        failures.append(f"record --pid exited {status}"
                        f"{'' if injected else ', its library or thread never seen'}: "
                        + " | ".join(l for _, l in lines.lines[-3:]))
        return None
    rows = intervals(out)
    # alloclens detaches DURATION after the attach, then finishes the trace (seconds, on a busy
    # machine): the detach is looked for around its due time, and the rate after it once alloclens
    # has exited (its CPU is not the program's cost).
    detach_due = injected + DURATION
    return {"before": rate(rows, started(rows) + WARMUP, launched),
            "during": rate(rows, injected + SETTLE, detach_due - 0.2),
            "after": rate(rows, done + SETTLE, float("inf")),
            # The program's GOT slots of malloc and free: patched while attached, put back after.
            "patched": [sum(r.patched for r in rows if lo <= r.start and r.end <= hi)
                        / max(1, sum(1 for r in rows if lo <= r.start and r.end <= hi))
                        for lo, hi in ((0, launched), (injected + SETTLE, detach_due - 0.2), (done, float("inf")))],
            "attach": around(rows, launched, injected),
            "mapped_ms": (mapped - launched) * 1e3, "entry_ms": (injected - mapped) * 1e3,
            "detach": around(rows, detach_due - 0.2, min(detach_due + 0.5, done)),
            **phases(rows, (started(rows) + WARMUP, launched), (injected + SETTLE, detach_due - 0.2)),
            **own_figures(lines.lines)}


ATTACH = "record --pid"
BPFTRACE = shutil.which("bpftrace")
if not BPFTRACE:
    print("note: bpftrace is not installed: its row is skipped (Debian: apt-get install bpftrace)")

runs = {"baseline": [], "record": [], "bpftrace": [], "attach": []}
for i in range(REPEATS):  # interleaved: the machine's load drifts
    runs["baseline"].append(baseline(i))
    runs["record"].append(recorded(i))
    if BPFTRACE:
        runs["bpftrace"].append(uprobes(i))
    runs["attach"].append(attached(i))
    print(f"  round {i + 1} of {REPEATS} done", file=sys.stderr)


def spread(values, fmt):
    values = [v for v in values if v == v]  # NaN: a phase with no whole interval
    if not values:
        return "n/a"
    m = statistics.median(values)
    return f"{fmt(m)} ({fmt(min(values))}-{fmt(max(values))})" if len(values) > 1 else fmt(m)


mcalls = lambda v: f"{v / 1e6:.2f}"
ratio = lambda v: f"{v:.3f}" if v >= 0.01 else f"1/{1 / v:.0f}"
times = lambda v: f"{v:.2f}x"
ms = lambda v: f"{v:.1f}"
W = 42  # label column
# Ratios per round, to that round's baseline or to the same run's rate before the attach: the
# machine's load drifts between rounds more than within one run.
bases = [r["rate"] for r in runs["baseline"]]
kept = lambda key: [(r, b) for r, b in zip(runs[key], bases) if r]
rows = [("bpftrace", "bpftrace uprobes"), ("attach", ATTACH)] if BPFTRACE else [("attach", ATTACH)]
print(f"program: attach-churn, 4 threads, mixed sizes 16 B-64 KiB; {REPEATS} rounds, median (min-max)")
for m, title in (("wall", "M calls per second (wall time)"),
                 ("cpu", "M calls per second of the program's own CPU time (what the machine's load does not change;"
                         " a recorder's CPU is not in it)")):
    print(title)
    print(f"{'':<{W}} {'M calls/s':>22} {'/ baseline':>22} {'/ before, same run':>22}")
    print(f"{'baseline: the program alone':<{W}} {spread([b[m] for b in bases], mcalls):>22}")
    print(f"{'record -- CMD':<{W}} {spread([r['rate'][m] for r, _ in kept('record')], mcalls):>22}"
          f" {spread([r['rate'][m] / b[m] for r, b in kept('record')], ratio):>22}")
    for key, label in rows:
        for phase, what in (("before", "before"), ("during", "while attached"), ("after", "after detach")):
            same = spread([r[phase][m] / r["before"][m] for r, _ in kept(key)], ratio) if phase != "before" else ""
            print(f"{label + ': ' + what:<{W}} {spread([r[phase][m] for r, _ in kept(key)], mcalls):>22}"
                  f" {spread([r[phase][m] / b[m] for r, b in kept(key)], ratio):>22} {same:>22}")
    if not BPFTRACE:
        print(f"{'bpftrace uprobes':<{W}} skipped: bpftrace is not installed (Debian: apt-get install bpftrace)")
print()
for m, how in (("wall", "wall time"), ("cpu", "the program's CPU time")):
    slowdown = lambda key: spread([r["before"][m] / r["during"][m] for r, _ in kept(key)], times)
    print(f"by {how}: slowdown while attached: {ATTACH} {slowdown('attach')}, record -- CMD "
          f"{spread([b[m] / r['rate'][m] for r, b in kept('record')], times)}"
          + (f", bpftrace uprobes {slowdown('bpftrace')}" if BPFTRACE else "")
          + f"; after the detach against before: {spread([r['after'][m] / r['before'][m] for r, _ in kept('attach')], ratio)}")
print("(after/before 1.000: nothing of alloclens left on the program's path once the GOT is restored)")
cores = lambda key, phase: spread([r[phase]["cores"] for r, _ in kept(key)], lambda v: f"{v:.2f}")
for key, label in rows:  # what the machine gave the program: a wall-time ratio moves with it
    print(f"cores the program's threads got, {label}: before {cores(key, 'before')}, while attached"
          f" {cores(key, 'during')}, after {cores(key, 'after')}")

print()
print("attach latency, ms, as the program saw it. Longest stall: the longest time a thread's own code stood")
print("still (for whatever reason: on a loaded machine the scheduler's too); stopped: neither running nor")
print("waiting for a core (a ptrace stop, a sleep, a lock's wait), the longest of one thread and the sum of all.")
print("Per 100 ms interval before the attach and while attached (the median and the worst interval), around")
print("the attach (from the launch until the library's thread runs, or bpftrace's first probe hit) and the detach.")
print(f"{'':<{W}} {'longest stall':>20} {'one thread stopped':>20} {'all threads stopped':>20}")
latency_rows = [(key, label, (("before_median", "100 ms before, median"), ("before_worst", "100 ms before, worst"),
                               ("attach", "attach"), ("attached_median", "100 ms attached, median"),
                               ("attached_worst", "100 ms attached, worst"), ("detach", "detach")))
                for key, label in rows]
# Under `record -- CMD` the whole run is recorded: its intervals are the "attached" ones.
latency_rows.insert(0, ("record", "record -- CMD", (("attached_median", "100 ms, median"),
                                                   ("attached_worst", "100 ms, worst"))))
for key, label, events in latency_rows:
    for event, what in events:
        figures = [r[event] for r, _ in kept(key)]
        print(f"{label + ': ' + what:<{W}} {spread([f['stall'] for f in figures], ms):>20}"
              f" {spread([f['stopped'] for f in figures], ms):>20} {spread([f['stopped_all'] for f in figures], ms):>20}")
own = [r for r, _ in kept("attach")]
print(f"{ATTACH}, alloclens's own account: thread borrowed {spread([r['borrowed_ms'] for r in own], ms)} ms,"
      f" seize to last detach {spread([r['total_ms'] for r in own], ms)} ms; seen from outside: library mapped"
      f" {spread([r['mapped_ms'] for r in own], ms)} ms after the launch, its thread started"
      f" {spread([r['entry_ms'] for r in own], ms)} ms after that")
patched = [r["patched"] for r, _ in kept("attach")]
print(f"the program's GOT slots of malloc and free (its calls go through them) held a hook in"
      f" {spread([100 * p[0] for p in patched], lambda v: f'{v:.0f}')} % of its 100 ms intervals before the attach,"
      f" {spread([100 * p[1] for p in patched], lambda v: f'{v:.0f}')} % while attached,"
      f" {spread([100 * p[2] for p in patched], lambda v: f'{v:.0f}')} % after alloclens exited")
if any(p[2] > 0 for p in patched):
    failures.append("the GOT still held a hook after the detach")
if BPFTRACE:
    print(f"bpftrace counted {spread([r['counted'] for r, _ in kept('bpftrace')], lambda v: f'{v:,.0f}')}"
          " calls while attached (its maps)")
if failures:
    print("FAILED:")
    for f in failures:
        print("  " + f)
    sys.exit(1)
print(f"every run ended with the program's checksum line and exit status 0 ({REPEATS * (4 if BPFTRACE else 3)} runs)")
PY
