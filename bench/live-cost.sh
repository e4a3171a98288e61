#!/usr/bin/env bash
# What the live view costs the program beyond the agent (issue 39), side by side in one run: the
# program (bench/programs/attach-churn.c: THREADS threads replacing blocks of mixed sizes) alone,
# under `alloclens watch --pid PID --profile` (the agent and its sampler, no view), under
# `alloclens live --pid PID` with the view drawing in a tmux pane of 80x24, and under the same
# session's background collector with no viewer (the view quit with `--on-quit keep`). Every figure
# comes from the program's own lines (one per 100 ms, with a CLOCK_MONOTONIC timestamp): its calls
# per second of wall time, and per second of its own CPU time (steadier on a shared machine), over
# WINDOW seconds starting SETTLE after the agent is in the process (its library in /proc/PID/maps);
# the program alone over the same stretch of its run. Interleaved rounds (each round runs every
# variant once, starting with another each time); medians.
# The claim: the refresh, the table reading and the drawing run in alloclens, so `live` and its
# collector cost the program what `watch --pid --profile` costs (ratio to watch 1.00 within the
# rounds' spread). Every run must end with the program's "checksum ok" line and exit status 0.
# Needs: root or CAP_SYS_PTRACE over the program (ptrace), tmux, cc, cargo, python3.
# Usage: bench/live-cost.sh [ROUNDS] [WINDOW_S]   (defaults 5, 4; about 10 s per run, 4 runs a round)
#   THREADS=N   the program's threads (default 1: the other core is alloclens's and the view's)
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
WINDOW=${2:-4}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/alloclens-live-cost.XXXXXX")
trap 'tmux -L "alloclens-live-cost-$$" kill-server 2>/dev/null || true; rm -rf "$WORK"' EXIT
command -v tmux >/dev/null || { echo "tmux is needed (scripts/setup.sh test installs it)" >&2; exit 1; }

cc -O2 -pthread -o "$WORK/attach-churn" bench/programs/attach-churn.c
cargo build --release -q -p alloclens
AL=$PWD/target/release/alloclens

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $ROUNDS, interleaved; window ${WINDOW} s; compare the columns of one run only"
python3 - "$AL" "$WORK" "$ROUNDS" "$WINDOW" "${THREADS:-1}" "alloclens-live-cost-$$" <<'PY'
import os, signal, statistics, subprocess, sys, time

AL, WORK, ROUNDS, WINDOW, THREADS, SOCKET = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
PROGRAM = os.path.join(WORK, "attach-churn")
START = 0.5    # s into the program's run when alloclens is started
SETTLE = 1.0   # s after the agent is in the process before the window (the first samples, the view's start)
VARIANTS = ("native", "watch", "live", "collector")
failures = []


def intervals(path):
    """The program's interval lines: (start, end, calls, cpu s, calls counted with the cpu time)."""
    rows, previous = [], None
    for line in open(path):
        f = line.split()
        if len(f) == 9 and f[0] == "interval":
            end = float(f[1])
            if previous is not None:
                rows.append((previous, end, int(f[2]), int(f[6]) / 1e6, int(f[7])))
            previous = end
    return rows


def rate(rows, lo, hi):
    """Calls per wall second and per CPU second over the intervals wholly within [lo, hi]."""
    inside = [r for r in rows if r[0] >= lo and r[1] <= hi]
    span, cpu = sum(r[1] - r[0] for r in inside), sum(r[3] for r in inside)
    if span < 0.15 or cpu <= 0:
        return float("nan"), float("nan")
    return sum(r[2] for r in inside) / span, sum(r[4] for r in inside) / cpu


def tmux(*args):
    return subprocess.run(["tmux", "-L", SOCKET, "-f", "/dev/null", *args], check=True,
                          capture_output=True, text=True).stdout


def wait(what, done, limit=60):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if done():
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def agent_in(pid):
    try:
        return "/alloclens-attach-" in open(f"/proc/{pid}/maps").read()
    except OSError:
        return False


def screen():
    return tmux("capture-pane", "-p")


def run(variant, i):
    out = os.path.join(WORK, f"{variant}-{i}.out")
    program = subprocess.Popen([PROGRAM, THREADS, "0"], stdout=open(out, "w"), stderr=subprocess.DEVNULL)
    pid = program.pid
    time.sleep(START)
    session = os.path.join(WORK, f"{variant}-{i}")
    live = f"{AL} live --pid {pid} -o {session}"
    watcher = None
    if variant == "watch":
        watcher = subprocess.Popen([AL, "watch", "--pid", str(pid), "--profile", "-o", session],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elif variant in ("live", "collector"):
        on_quit = "stop" if variant == "live" else "keep"
        tmux("new-session", "-d", "-x", "80", "-y", "24", "sh", "-c",
             f"{live} --on-quit {on_quit}; echo live exit status $?; exec sleep 600")
    if variant == "native":
        lo = time.monotonic() + SETTLE
    else:
        wait("the agent in the process", lambda: agent_in(pid))
        lo = time.monotonic() + SETTLE
    if variant == "collector":
        # The view quits at once: the collector samples on with no viewer.
        wait("the view", lambda: "q:quit" in screen())
        tmux("send-keys", "q")
        wait("the viewer's end", lambda: "live exit status" in screen())
    time.sleep(max(0.0, lo + WINDOW - time.monotonic()) + 0.1)
    hi = lo + WINDOW
    if variant == "watch":
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=60)
    elif variant == "live":
        tmux("send-keys", "q")
        wait("the viewer's end", lambda: "live exit status" in screen())
    elif variant == "collector":
        subprocess.run(f"{live} --stop", shell=True, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if variant in ("live", "collector"):
        tmux("kill-server")
    program.send_signal(signal.SIGTERM)
    status = program.wait(timeout=30)
    text = open(out).read().strip().splitlines()
    if status != 0 or not text or not text[-1].startswith("checksum ok"):
        failures.append(f"{variant} round {i + 1}: status {status}, last line {text[-1] if text else '(none)'}")
    rows = intervals(out)
    start = rows[0][0] - 0.1 if rows else lo
    # The program alone: the same stretch of its run as the attached variants' windows.
    if variant == "native":
        lo, hi = start + START + SETTLE, start + START + SETTLE + WINDOW
    return rate(rows, lo, hi)


figures = {v: [] for v in VARIANTS}
for r in range(ROUNDS):
    for k in range(len(VARIANTS)):
        v = VARIANTS[(k + r) % len(VARIANTS)]
        figures[v].append(run(v, r))
    print(f"  round {r + 1} of {ROUNDS} done", file=sys.stderr)

med = lambda xs: statistics.median(xs)
spread = lambda xs: f"{min(xs) / 1e6:.2f}-{max(xs) / 1e6:.2f}"
print(f"{'variant':<30} {'M calls/s':>10} {'/ native':>9} {'/ watch':>8} {'M calls/CPU s':>14} {'min-max':>11} {'/ native':>9} {'/ watch':>8}")
base = {k: med([f[k] for f in figures["native"]]) for k in (0, 1)}
watch = {k: med([f[k] for f in figures["watch"]]) for k in (0, 1)}
names = {"native": "the program alone", "watch": "watch --pid --profile",
         "live": "live --pid, view in tmux", "collector": "live's collector, no viewer"}
for v in VARIANTS:
    wall, cpu = med([f[0] for f in figures[v]]), med([f[1] for f in figures[v]])
    print(f"{names[v]:<30} {wall / 1e6:>10.2f} {wall / base[0]:>8.2f}x {wall / watch[0]:>7.2f}x"
          f" {cpu / 1e6:>14.2f} {spread([f[1] for f in figures[v]]):>11} {cpu / base[1]:>8.2f}x {cpu / watch[1]:>7.2f}x")
print("target: live and its collector / watch = 1.00 within the spread of the rounds (the view costs the program nothing beyond the agent)")
if failures:
    print("runs that did not end whole:", *failures, sep="\n  ")
    sys.exit(1)
PY
