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
| 130 | `run`, `demo`, `replay` or `tune` interrupted by Ctrl-C (the results gathered so far are kept; `tune` still prints its answer from them) |
| the command's | `record` ends with the recorded command's own status, or 128 + N when signal N killed it, so it can stand in for the command in a script; a failure of `record` itself is 1 with its error line. `watch` does the same when the command exits during the watch (or within 2 s of an interrupt); it ends with 0 when `--duration` ends the watch (the program runs on) and 130 after Ctrl-C or SIGTERM if the program still runs |

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
one line. A results or watch directory is locked while a session writes into it: a second session
into it stops with `alloclens: error: another alloclens (pid N) is writing into 'DIR'`. Details in
[reliability.md](reliability.md#nothing-left-behind).

## Units

Sizes are in binary units everywhere alloclens prints them (1 KiB = 1024 B, 1 MiB = 1024 KiB), e.g.
`record`'s summary line `... into t.alt (8.2 MiB, 1.44 B/event)`; counts of events use decimal
prefixes (`6.0 M events`). The JSON and CSV files give plain bytes.
EOF
for c in run tune watch allocators workload demo record analyze report diff replay export merge completions man; do
  echo; echo "## alloclens $c"; echo; echo '```text'; "$bin" "$c" --help; echo '```'
done
