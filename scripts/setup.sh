#!/usr/bin/env bash
# Installs what alloclens needs on a Debian machine: the allocator libraries it compares, the tools its
# tests and benchmarks use, and a Rust toolchain when none is there. Idempotent: installs only what is
# missing, so a prepared machine pays nothing. Usage: scripts/setup.sh [runtime|test|bench]
set -euo pipefail

level=${1:-runtime}
# libunwind8: what `record --stacks` unwinds with (the shim loads it at run time; no -dev needed).
packages=(libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 libtbbmalloc2 libunwind8 ca-certificates)
case "$level" in
  runtime) ;;
  # tmux: tests/cli/live.rs drives `alloclens live` in a real terminal (send keys, capture the screen);
  # libxml2-utils: xmllint checks `gate --junit` against a JUnit schema (tests/cli/gate.rs);
  # valgrind: tests/cli/leaks.rs runs memcheck beside `record --leaks` on the same programs.
  test) packages+=(gcc g++ libc6-dev make python3 python3-pip smem chromium binutils heaptrack tmux libxml2-utils valgrind) ;;
  bench) packages+=(gcc g++ libc6-dev make python3 smem heaptrack time valgrind sqlite3) ;;
  *) echo "setup.sh: unknown level '$level' (runtime, test or bench)" >&2; exit 2 ;;
esac
command -v cargo >/dev/null 2>&1 || packages+=(cargo rustc)
# tests/cli/pprof.rs reads alloclens's pprof files with `go tool pprof` (the pprof the Go release
# vendors: its version is pinned by Go's); any Go already on PATH will do.
if [ "$level" = test ] && ! command -v go >/dev/null 2>&1; then packages+=(golang-go); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The report tests read Parquet back with DuckDB too (an independent reader), and tests/sql.rs runs the
# queries of sql/ with it (docs/sql.md). Debian's python3 refuses pip outside a venv (PEP 668) unless told.
if [ "$level" != runtime ] && ! python3 -c 'import duckdb' 2>/dev/null; then
  echo "setup: installing the duckdb Python package"
  python3 -m pip install --quiet duckdb 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages duckdb ||
    echo "setup: duckdb not installed; tests/sql.rs fails where CI is set and is skipped elsewhere" >&2
fi
