#!/usr/bin/env bash
# Compares every output of two builds of alloclens on the same fixed inputs, byte for byte: the
# terminal tables and --export-* summaries (through report's example `print_outputs`), HTML reports,
# PNG/SVG figures, Parquet tables, `analyze` (text, JSON, CSV), `diff` and `export`.
#
# Usage: scripts/compare-outputs.sh OLD NEW INPUTS OUT
#   OLD, NEW  directories, each holding an `alloclens` binary and report's `print_outputs` example of
#             one build (cargo build -p alloclens && cargo build -p report --example print_outputs;
#             then copy target/debug/alloclens and target/debug/examples/print_outputs)
#   INPUTS    fixed inputs: results directories of `run`, `replay` and `tune` (any directory with a
#             results.json), watch directories (watch.json) and traces (*.alt)
#   OUT       where OUT/old and OUT/new are written (OUT/new replaced; OUT/old kept once complete:
#             delete it after changing OLD or INPUTS)
# Exits 0 when every output is identical, 1 otherwise (listing the files that differ).
set -euo pipefail

if [ $# -ne 4 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
inputs=$(realpath "$3")
out=$(realpath -m "$4")

# Every command of one build, writing under $2; stdout, stderr and the status of each command kept.
outputs() {
    local bin=$1 dest=$2
    rm -rf "$dest"
    mkdir -p "$dest"
    # `cmd NAME ARGS...`: runs `alloclens ARGS...` into dest/NAME.{stdout,stderr,status}.
    cmd() {
        local name=$1
        shift
        local status=0
        "$bin/alloclens" "$@" >"$dest/$name.stdout" 2>"$dest/$name.stderr" || status=$?
        echo "$status" >"$dest/$name.status"
    }
    local results=() traces=()
    for dir in "$inputs"/*/; do
        dir=${dir%/}
        local name
        name=$(basename "$dir")
        if [ -f "$dir/results.json" ] || [ -f "$dir/watch.json" ]; then
            results+=("$dir")
            "$bin/print_outputs" "$dir" "$dest/$name" 2>"$dest/$name.print_outputs.stderr" ||
                echo "print_outputs failed: $?" >>"$dest/$name.print_outputs.stderr"
            mkdir -p "$dest/$name"
            cmd "$name/report" report "$dir" -o "$dest/$name/report.html" \
                --png "$dest/$name/png" --svg "$dest/$name/svg" --parquet "$dest/$name/parquet"
        fi
    done
    for trace in "$inputs"/*.alt; do
        [ -f "$trace" ] || continue
        traces+=("$trace")
        local name
        name=$(basename "$trace" .alt)
        mkdir -p "$dest/$name"
        cmd "$name/report" report "$trace" -o "$dest/$name/report.html" \
            --png "$dest/$name/png" --svg "$dest/$name/svg" --parquet "$dest/$name/parquet"
        cmd "$name/analyze" analyze "$trace" -o "$dest/$name/analyze-csv"
        cmd "$name/analyze-json" analyze --json "$trace"
        cmd "$name/export" export --parquet "$dest/$name/export" "$trace"
    done
    # Pairs: the first two results directories and the first two traces, compared and diffed.
    local pair
    for pair in "results:${results[*]:0:2}" "traces:${traces[*]:0:2}"; do
        local kind=${pair%%:*} a b
        read -r a b <<<"${pair#*:}"
        [ -n "${b:-}" ] || continue
        mkdir -p "$dest/compare-$kind"
        cmd "compare-$kind/report" report "$a" --compare "$b" -o "$dest/compare-$kind/report.html" \
            --png "$dest/compare-$kind/png" --svg "$dest/compare-$kind/svg"
        cmd "compare-$kind/diff" diff "$a" "$b"
        cmd "compare-$kind/diff-json" diff --json "$a" "$b"
    done
    # The paths of this build's outputs appear in some messages: write them as OUT. A note that
    # KSM settings left by another, killed alloclens were given back is the machine's, not the build's.
    grep -rlF "$dest" "$dest" --include='*.stdout' --include='*.stderr' |
        xargs -r sed -i "s|$dest|OUT|g"
    find "$dest" -name '*.stderr' -exec sed -i '/left by a killed alloclens$/d' {} +
}

# The old build's outputs are kept between calls (OUT/old/.complete): comparing several new builds
# against one old one needs them once.
if [ ! -f "$out/old/.complete" ]; then
    outputs "$old" "$out/old"
    touch "$out/old/.complete"
fi
outputs "$new" "$out/new"
touch "$out/new/.complete"
files=$(find "$out/old" -type f | wc -l)
if diff -rq "$out/old" "$out/new"; then
    echo "identical: $files files"
else
    echo "differences above ($files files in $out/old)"
    exit 1
fi
