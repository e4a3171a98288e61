#!/usr/bin/env python3
"""Runs the queries of sql/ (docs/sql.md) on an alloclens dataset with DuckDB or Spark SQL.

    scripts/sql-figures.py DATASET                     # every figure, DuckDB, as tables
    scripts/sql-figures.py --engine spark DATASET      # the same text on a local Spark
    scripts/sql-figures.py --events EVENTS.parquet     # a trace exported by `alloclens export --parquet`
    scripts/sql-figures.py --json DATASET              # rows as JSON (what tests/sql.rs reads)
    scripts/sql-figures.py --figure sizes_16 DATASET   # one figure (repeatable)

The tables (calls, runs, summary, samples) are views over the dataset's Parquet files
(sql/tables.ENGINE.sql, `${dataset}` replaced); then every sql/views/*.sql, in name order; then the
figures, sql/figures/*.sql, each one SELECT. A figure whose tables the dataset lacks (no trace merged,
no run merged) is skipped and named on stderr. Times are wall seconds per figure (views are lazy: a
figure's time includes the views it reads).
"""
import argparse
import json
import os
import re
import sys
import time

SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sql")
TRACE_TABLES = {"calls"}
RUN_TABLES = {"runs", "summary", "samples"}


def fail(message):
    print(f"sql-figures: error: {message}", file=sys.stderr)
    sys.exit(1)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def statements(text):
    """The statements of a file: split at `;` ending a line, comment lines dropped."""
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("--")]
    return [s.strip() for s in re.split(r";\s*$", "\n".join(lines), flags=re.M) if s.strip()]


def needs(text, view, views, seen=()):
    """Whether `text` reads `view`, directly or through other views."""
    words = set(re.findall(r"\b[a-z_]+\b", text))
    if view in words:
        return True
    return any(needs(views[v], view, views, seen + (v,)) for v in views if v in words and v not in seen)


def tables_used(text):
    words = set(re.findall(r"\b[a-z_]+\b", text))
    return (TRACE_TABLES | RUN_TABLES) & words


class DuckDB:
    name = "duckdb"

    def __init__(self):
        try:
            import duckdb
        except ImportError:
            fail("the Python package duckdb is missing (scripts/setup.sh test installs it)")
        self.db = duckdb.connect()
        self.version = duckdb.__version__

    def execute(self, sql):
        self.db.execute(sql)

    def materialize(self, name, sql):
        self.db.execute(sql.replace("TEMPORARY VIEW", "TEMPORARY TABLE", 1))

    def query(self, sql):
        cur = self.db.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def events_view(self, path):
        return (
            "CREATE OR REPLACE TEMPORARY VIEW calls AS SELECT 'export' AS trace_id, * "
            f"FROM read_parquet('{path}')"
        )


class Spark:
    name = "spark"

    def __init__(self):
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            fail("pyspark is missing (scripts/spark-sql.sh setup installs it)")
        self.spark = (
            SparkSession.builder.master("local[*]")
            .appName("alloclens-sql")
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.version = self.spark.version

    def execute(self, sql):
        self.spark.sql(sql)

    def materialize(self, name, sql):
        self.spark.sql(sql)
        self.spark.sql(f"CACHE TABLE {name}")

    def query(self, sql):
        return [r.asDict() for r in self.spark.sql(sql).collect()]

    def events_view(self, path):
        return (
            "CREATE OR REPLACE TEMPORARY VIEW calls AS SELECT 'export' AS trace_id, * "
            f"FROM parquet.`{path}`"
        )


def kind_present(dataset, statement):
    m = re.search(r"kind=([a-z_]+)", statement)
    if not m:
        return True
    d = os.path.join(dataset, "kind=" + m.group(1))
    for _, _, files in os.walk(d):
        if any(f.endswith(".parquet") and not f.startswith(".") for f in files):
            return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", nargs="?", help="directory written by `alloclens merge -o`")
    ap.add_argument("--events", help="events.parquet of `alloclens export --parquet` instead of a dataset")
    ap.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    ap.add_argument("--figure", action="append", help="only this figure (file name without .sql)")
    ap.add_argument("--json", action="store_true", help="print {figure: rows, ...} and the times as JSON")
    args = ap.parse_args()
    if (args.dataset is None) == (args.events is None):
        fail("give a DATASET directory or --events FILE")
    source = args.dataset or args.events
    if not os.path.exists(source):
        fail(f"'{source}' does not exist")
    if args.dataset and not os.path.exists(os.path.join(args.dataset, "dataset.json")):
        fail(f"'{args.dataset}' is not an alloclens dataset (no dataset.json; alloclens merge writes one)")

    engine = DuckDB() if args.engine == "duckdb" else Spark()
    present = set()
    if args.events:
        engine.execute(engine.events_view(os.path.abspath(args.events)))
        present.add("calls")
    else:
        text = read(os.path.join(SQL, f"tables.{engine.name}.sql"))
        dataset = os.path.abspath(args.dataset).replace("'", "''")
        for s in statements(text):
            if kind_present(args.dataset, s):
                engine.execute(s.replace("${dataset}", dataset))
                present.add(re.search(r"VIEW (\w+)", s).group(1))
    figures = sorted(f[:-4] for f in os.listdir(os.path.join(SQL, "figures")) if f.endswith(".sql"))
    if args.figure:
        unknown = set(args.figure) - set(figures)
        if unknown:
            fail(f"no figure {', '.join(sorted(unknown))} (figures: {', '.join(figures)})")
        figures = [f for f in figures if f in args.figure]
    views = {v[3:-4]: read(os.path.join(SQL, "views", v))
             for v in sorted(os.listdir(os.path.join(SQL, "views"))) if v.endswith(".sql")}
    out, times, made = {}, {}, []
    for f in figures:
        text = read(os.path.join(SQL, "figures", f + ".sql"))
        needed = [v for v in views if needs(text, v, views)]
        used = tables_used(text) | set().union(*(tables_used(views[v]) for v in needed))
        missing = used - present
        if missing:
            print(f"sql-figures: {f}: skipped, the dataset has no {', '.join(sorted(missing))}", file=sys.stderr)
            continue
        start = time.perf_counter()
        # The views a figure reads are computed once (in name order, which is dependency order) and
        # kept: they join calls to calls, and a recursive walk over a lazy view recomputes it per step.
        for v in needed:
            if v not in made:
                for s in statements(views[v]):
                    engine.materialize(v, s)
                made.append(v)
        (query,) = statements(text)
        out[f] = engine.query(query)
        times[f] = time.perf_counter() - start
    if args.json:
        json.dump({"engine": engine.name, "version": engine.version, "figures": out, "seconds": times},
                  sys.stdout, default=str)
        print()
        return
    for f, rows in out.items():
        print(f"== {f} ({len(rows)} rows, {times[f]:.2f} s, {engine.name} {engine.version})")
        if rows:
            names = list(rows[0])
            print("\t".join(names))
            for r in rows[:50]:
                print("\t".join("" if r[n] is None else str(r[n]) for n in names))
            if len(rows) > 50:
                print(f"... {len(rows) - 50} more rows")


if __name__ == "__main__":
    main()
