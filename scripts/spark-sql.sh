#!/usr/bin/env bash
# The queries of sql/ (docs/sql.md) on a local Spark SQL beside DuckDB, on the same dataset: per figure,
# the rows of both, whether they agree, and each engine's time.
#   scripts/spark-sql.sh setup                       install a JRE (Debian) and pyspark + duckdb (PyPI, in a venv)
#   scripts/spark-sql.sh DATASET [--figure NAME]...  run (a dataset of `alloclens merge`)
# Not part of `make test`. The venv is $XDG_CACHE_HOME/alloclens/spark-venv (~/.cache/...); SPARK_VENV
# overrides it. Spark's heap: SPARK_DRIVER_MEMORY (default: half the machine's memory, at least 2g; a trace of 5 M calls needed 6g).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${SPARK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/alloclens/spark-venv}
# Spark 4 needs Java 17 or 21; Debian 12 has 17 (21 from Debian 13 on).
jres=(openjdk-21-jre-headless openjdk-17-jre-headless)

java_home() {
  local java
  java=$(command -v java) || return 1
  dirname "$(dirname "$(readlink -f "$java")")"
}

if [ "${1:-}" = setup ]; then
  if ! command -v java >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "spark-sql: no java; run as root, or: sudo apt-get install ${jres[1]}" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    for jre in "${jres[@]}"; do
      if apt-cache policy "$jre" | grep -q 'Candidate: [0-9]'; then
        apt-get install -y -qq --no-install-recommends "$jre" >/dev/null
        break
      fi
    done
    command -v java >/dev/null 2>&1 || { echo "spark-sql: no JRE 17 or 21 in this Debian's packages" >&2; exit 1; }
  fi
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || { echo "spark-sql: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  fi
  "$venv/bin/pip" install --quiet pyspark duckdb
  echo "spark-sql: ready ($("$venv/bin/python" -c 'import pyspark, duckdb; print("pyspark", pyspark.__version__, "duckdb", duckdb.__version__)'), java $(java -version 2>&1 | head -1))"
  exit 0
fi

if [ $# -lt 1 ]; then
  echo "usage: scripts/spark-sql.sh setup | scripts/spark-sql.sh DATASET [--figure NAME]..." >&2
  exit 2
fi
if [ ! -x "$venv/bin/python" ] || ! command -v java >/dev/null 2>&1; then
  echo "spark-sql: not set up (scripts/spark-sql.sh setup installs a JRE and pyspark)" >&2
  exit 1
fi
JAVA_HOME=${JAVA_HOME:-$(java_home)}
export JAVA_HOME
exec "$venv/bin/python" "$here/sql-figures.py" --engine both "$@"
