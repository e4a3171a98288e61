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

When the reader of alloclens's stdout goes away (`alloclens allocators --json | head -1`), alloclens
stops writing to it and ends quietly with status 0; `run` still writes its results and ends with the
runs' status. The commands that alloclens runs get the default action of SIGPIPE.
EOF
for c in run allocators workload demo record analyze report diff export; do
  echo; echo "## alloclens $c"; echo; echo '```text'; "$bin" "$c" --help; echo '```'
done
