#!/bin/sh
# Prints docs/cli.md: the --help of every command.
set -eu
cd "$(dirname "$0")/.."
cargo build -q -p alloclens
bin=target/debug/alloclens
echo "# Command-line reference"
echo
echo "Generated from \`alloclens <command> --help\` (regenerate with \`sh scripts/cli-doc.sh > docs/cli.md\`; a test fails when an option is missing here). Formats and metrics are described in the other pages of docs/."
for c in run allocators workload demo record analyze report diff export; do
  echo; echo "## alloclens $c"; echo; echo '```text'; "$bin" "$c" --help; echo '```'
done
