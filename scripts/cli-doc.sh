#!/bin/sh
# Prints docs/cli.md: the --help of every command.
set -eu
cd "$(dirname "$0")/.."
cargo build -q -p alloclens
bin=target/debug/alloclens
echo "# Command-line reference"
echo
echo "Generated from \`alloclens <command> --help\` (regenerate with \`sh scripts/cli-doc.sh > docs/cli.md\`; a test fails when an option is missing here). Formats and metrics are described in the other pages of docs/."
cat <<'EOF'

## Exit status

| status | when |
| --- | --- |
| 0 | success |
| 1 | a failure: one `alloclens: error:` line says what and how to fix it. This includes values that clap accepts but alloclens refuses after reading them (an unknown allocator, `--param a=1 --param a=2`, a `--timeout` over 365 days), a file that cannot be read or written, a results file left incomplete by a full disk (`run`), a run whose command failed, timed out or could not start (`run`, `demo`) and a replay that crashed or timed out (`replay`). A damaged or unfinished trace (or a results directory with damaged CSV lines) is not a failure: every command that reads one (`analyze`, `report`, `diff`, `export`, `replay`, `merge`) uses what comes before the damage, says what was lost in `alloclens: warning:` lines and ends with 0 |
| 2 | a usage error found by the command-line parser (an unknown option or command, a missing or malformed argument): clap's message with the usage line |
| 17-31 | `gate`: limits failed, 16 plus one bit per class (1 memory, 2 leaks, 4 allocations, 8 a call site's limit; [docs/gate.md](gate.md)) |
| 130 | `run`, `demo`, `replay` or `tune` interrupted by Ctrl-C (the results gathered so far are kept; `tune` still prints its answer from them) |
| the command's | `record` ends with the recorded command's own status, or 128 + N when signal N killed it, so it can stand in for the command in a script; a failure of `record` itself is 1 with its error line. `watch` (and `live`) does the same when the command exits during the watch (or within 2 s of an interrupt); it ends with 0 when `--duration` ends the watch (the program runs on) and 130 after Ctrl-C or SIGTERM if the program still runs |

When the reader of alloclens's stdout goes away (`alloclens allocators --json | head -1`), alloclens
stops writing to it and ends quietly with status 0; `run` still writes its results and ends with the
runs' status. The commands that alloclens runs get the default action of SIGPIPE. Any other failure
to write stdout (`alloclens ... > /dev/full`), `--help` and `--version` included, is status 1 with
`alloclens: error: cannot write to standard output: ...`; `run` and `watch` have written their
results directory by then (`run` still says where, after its warnings).

## Files written

Every option that writes a file follows symbolic links as `open` does and never replaces anything
but a regular file: a file is written beside its name (the link's target) and renamed over it once
whole, so a full disk leaves the earlier version; a device or a pipe (`-o /dev/stdout`) is written
into directly (`record -o` refuses one); a directory given where a file is expected is refused in
one line. A name alloclens chooses itself (`snapshot`'s `alloclens.COMM.PID.snapshot.pb.gz`) is
numbered (`.1.pb.gz`, ...) rather than written over an existing file. A results or watch directory
is locked while a session writes into it: a second session into it stops with
`alloclens: error: another alloclens (pid N) is writing into 'DIR'`. Details in
[reliability.md](reliability.md#nothing-left-behind).

## Units

Sizes are in binary units everywhere alloclens prints them (1 KiB = 1024 B, 1 MiB = 1024 KiB), e.g.
`record`'s summary line `... into t.alt (8.2 MiB, 1.44 B/event)`; counts of events use decimal
prefixes (`6.0 M events`). The JSON and CSV files give plain bytes.

## Quick start (Debian, as root)

```sh
make demo   # installs the allocator packages, builds, runs every built-in workload under every allocator
make test   # installs what the tests need, then fmt check, clippy -D warnings, and the whole test suite
```

`make demo` writes `demo-results/<workload>/{results.json,samples.csv,markers.csv}` and prints one table per
workload and parameter point. Each target installs only what is missing (`scripts/setup.sh`): the Debian
packages `libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 libtbbmalloc2` (glibc is always there), and the
Rust crates through cargo.

## Install

```sh
make install PREFIX=~/.local   # release build; binary, man pages, bash/zsh/fish completions under PREFIX
cargo install --locked --path crates/alloclens   # the binary alone, into ~/.cargo/bin
make deb                       # target/alloclens_VERSION_ARCH.deb of the same files under /usr
```

Building needs Rust (cargo) and a C compiler (`cc`, for the preload shim; its warnings stop the
build only in CI, where `CI` is set). `make install` puts
`bin/alloclens`, a manual page per command (`man alloclens-run`) in `share/man/man1`, and the
completions where bash-completion, zsh (`site-functions`, in `$fpath`) and fish look under PREFIX
(default `/usr/local`; `DESTDIR=` stages the tree for a package; `make uninstall` removes it);
`make deb` packages that tree (the allocator packages are its Recommends; needs `dpkg-deb`). After
`cargo install`, generate them yourself: `alloclens completions bash|zsh|fish > FILE`, `alloclens man -o
DIR`. Both come from the command-line definition itself, so they always match the binary.
`alloclens --version` names the commit it was built from (when built from a git checkout). The
allocators are optional at run time: `alloclens allocators` says which are installed and what to
install for the others.

## Commands at a glance

```sh
alloclens allocators [--json]                      # what is installed, where, which version, what to install
alloclens run [options] -- CMD ARGS...             # compare allocators on any command
alloclens tune [--objective memory|peak|time|throughput] [--budget D] [-a LIST] [-o DIR] [TRACE] -- CMD  # which allocator and settings serve CMD best, how sure, how to deploy it
alloclens watch [-a SPEC] [--duration D] -o DIR -- CMD  # why RSS grows: leak, fragmentation, retention, outside-heap, stable (or undetermined)
alloclens live [-a SPEC] [--output-pane] -- CMD | --pid PID  # the same watch on one screen as it runs: memory, call sites, verdict so far (docs/live.md)
alloclens workload NAME [options]                  # built-in workloads: twowave events xthread forkworkers churn realloc tree leak cache
alloclens demo [-o DIR]                            # the workloads under every installed allocator
alloclens record [-a SPEC] [--marker RE] [--addresses] [--stacks] [--force] [-o F.alt] -- CMD  # every malloc/free of CMD and its children
alloclens analyze F.alt [--json] [-o DIR] [--phase P] [--process PID] [--top N | --all]  # the field study's statistics
alloclens analyze F.alt --sites [--functions N] [--sort calls|bytes|peak|leaked]  # where: call sites (record --stacks)
alloclens report PATH [-o page.html] [--compare OTHER] [--png DIR] [--svg DIR] [--parquet DIR]
alloclens diff A B [--json] [--sites]              # two runs or two traces, every headline figure (or by call site)
alloclens snapshot PID|DIR|F.prof [-o F.pb.gz]     # in-use bytes by call site now, of a program watched with --profile (docs/profile.md)
alloclens diff A.pb.gz B.pb.gz [-o F.pb.gz]        # growth by call site between two snapshots
alloclens replay F.alt [-a SPEC,...] [-r N] [--process PID] [--phase P] [-o DIR]  # the trace's calls under every allocator
alloclens export F.alt --parquet DIR               # one row per allocator call, for DuckDB/pandas/polars
alloclens export F.alt --pprof F.pb.gz             # call sites as a pprof heap profile (record --stacks; docs/profile.md)
alloclens gate --limits L.toml [--baseline B.json] RESULTS|F.alt...  # fail a CI job on memory (docs/gate.md)
alloclens merge PATH... -o DATASET                 # many hosts' results and traces as one Parquet dataset (DuckDB, Spark; docs/dataset.md)
alloclens completions bash|zsh|fish                # the shell's completion script
alloclens man [-o DIR]                             # the manual page (roff), or one per command into DIR
```

Every command exits with 0 on success, 1 on a failure (one `alloclens: error:` line) and 2 on a usage error
found by the command-line parser; `record` ends with its command's status
([docs/cli.md](cli.md#exit-status)). `| head` ends any command quietly.


## Comparing allocators: run in more words

Examples:

```sh
# glibc against jemalloc and a jemalloc that returns memory at once, memory per event (CMS study):
alloclens run -a glibc,jemalloc,jemalloc:dirty_decay_ms=0 --marker 'event (\d+)' -- ./reco events.root

# a thread sweep, throughput read from the program's output (ATLAS study):
alloclens run --param threads=1,2,4,8 --throughput 'rate: ([0-9.]+)' -- ./athena --threads {threads}

# fork-based workers: total PSS of the whole tree (GaudiMP, CMS multi-process studies):
alloclens run -a glibc,jemalloc --param workers=2,4,8 -- ./framework --workers {workers}

# hyperfine's habits: 10 runs after 2 unmeasured warmups, caches dropped before each run, the
# summary also as Markdown; a fixed-time benchmark ranked by its own throughput, in its unit:
alloclens run --runs 10 -w 2 --prepare 'sync; echo 3 > /proc/sys/vm/drop_caches' --export-markdown summary.md -- ./load-data
alloclens run -a glibc,jemalloc,mimalloc --throughput 'ops: ([0-9.]+)' --throughput-unit ops/s -- ./larson 5

# the same with kernel samepage merging off and on, the MB (%) it saves per worker count, ksmd's CPU
# (GaudiMP KSM study; root; the unchanged program is made mergeable, ksmd's settings are given back):
sudo alloclens run --ksm --exact-pss --ksm-set pages_to_scan=1640 --ksm-set sleep_millisecs=20 \
    --param workers=1,2,4,8 -- ./framework --workers {workers}
```

Options: `-a/--allocators LIST` (`--allocator` too, as in `record`; default: glibc and every installed known allocator; syntax and every setting in
[docs/allocators.md](allocators.md)), `--param NAME=V1,V2` (substitutes `{NAME}` in the command and in
`--env NAME=VALUE` values), `-r/--repeat N` (`--runs` too, as in hyperfine; 3, interleaved across
variants), `-w/--warmup N` (unmeasured runs first), `-p/--prepare CMD` (before every run, warmups
included; a failure skips the run) and `-c/--cleanup CMD` (after the last run of each variant at each
point), `--export-markdown/--export-json/--export-csv FILE` (the summary table, beside the results
directory), `--interval 100ms`,
`--marker REGEX`, `--throughput REGEX` (then `--throughput-unit UNIT`), `--timeout DURATION` (at most 365 days; `--interval` at most 1h),
`--baseline VARIANT` (`--reference` too, as in hyperfine; one of the variants; default glibc, or the first variant without glibc),
`-o/--output DIR`, `--force` (replaces an earlier session's files, refuses a directory holding anything else),
`--ksm`, `--ksm-set KNOB=VALUE` and `--ksm-mechanism auto|prctl|madvise` (KSM off and on per point;
the prctl from Linux 6.6, a preloaded library before; [docs/ksm.md](ksm.md)),
`--program-output pass|save|discard` (byte for byte, a last line without a newline included), `--pty` (a
pseudo-terminal stdout, output passed through untranslated, for programs that buffer their output into pipes
so their marker lines arrive late), `--exact-pss` (re-read PSS at every sample instead of when something
changed), `--json`. With a single run (one variant, one parameter point, `-r 1`) the command reads
alloclens's stdin when it is a pipe or a file; with several runs each reads `/dev/null` (give the input inside
the command: `sh -c 'prog < input'`). Ctrl-C stops the whole child tree and keeps every result gathered so
far; if alloclens itself is killed, even with SIGKILL, a small watchdog process (`lens-watchdog`) kills the
command's tree. A full disk loses no measurement: the table is printed, `results.json` is written first, the
CSV files keep whole runs and each file that misses something is named on one line
([docs/results-format.md](results-format.md)). After start, alloclens checks in `/proc/PID/maps` that the
requested allocator is really mapped in the command and says so loudly when it is not.

The terminal table shows, per parameter point and variant, best first (by median wall time, or by
throughput with `--throughput`), the wall time's mean ± σ and median (min…max), user and system CPU, the
throughput's median (min…max), peak and time-weighted mean of the tree's total PSS and RSS, and ratios to
the baseline ± one standard deviation (propagated as hyperfine does), with a note when a difference is
within the noise of the repeats; outliers (hyperfine's modified Z-score rule) are warned about. The files are described in [docs/results-format.md](results-format.md), the memory metrics in
[docs/memory-metrics.md](memory-metrics.md), every option of every command in this page, the workloads in [docs/workloads.md](workloads.md).


## Recording: record, analyze and report in more words

`record` preloads a small C shim that appends a fixed record per call to a per-thread ring in shared
memory; the recorder process merges, encodes and compresses them ([docs/trace-format.md](trace-format.md),
[docs/recording.md](recording.md)). It follows fork, exec and posix_spawn, keeps what was
recorded when the program dies (when the recorder dies, the program runs on untraced and `record` still
ends with its exit status), and combines with any allocator variant (`-a jemalloc`; C++ `new` and
`delete` are seen even when the allocator defines them). Blocks are stored by the seq of their
allocation, not their address: the same reports from a trace several times smaller when blocks live
long (a python3 script: 0.09 B/event, 1.56 with `--addresses`). A program can
mark phases without linking anything: see `alloclens_mark` in [docs/environment.md](environment.md).
Without `-o` the trace is `alloclens.PROGRAM.PID.alt` in the current directory (heaptrack's naming, PID
alloclens's own; the name is printed). `-o F.alt` must be a new regular file (an existing one is kept: pass `--force` to replace it once
the new recording ends); the trace is written as the recording goes, so a crash leaves a readable
trace, and a full disk stops the writing with one warning line saying how many events the file
holds ([docs/recording.md](recording.md#the-output-file)).
Long work shows progress on stderr when it is a terminal, and nothing when it is a pipe or a file:
`analyze`, `report` and `export` of a trace the records done of the total (from the chunk index), their
rate and an ETA; `record` the events and bytes written so far and their rate (no total: `-q` hides it;
the command's own output on the same terminal can break its line); `run` the runs done, with an ETA.
`analyze` computes calls per kind, live and cumulated bytes (upper and lower bound) over allocator calls
and time, size histograms (16 B, 32 KiB, powers of two), lifetimes in allocator calls and leaks, per
process, thread and phase ([docs/metrics.md](metrics.md)). `report` makes one self-contained HTML page
(charts inlined, works offline) of a run or a trace ([docs/reports.md](reports.md)).
EOF
for c in run tune watch live allocators workload demo record analyze report diff replay snapshot export gate merge completions man; do
  echo; echo "## alloclens $c"; echo; echo '```text'; "$bin" "$c" --help; echo '```'
done
