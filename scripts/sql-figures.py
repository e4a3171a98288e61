#!/usr/bin/env python3
"""Runs the queries of sql/ (docs/sql.md) on an alloclens dataset with DuckDB or Spark SQL.

    scripts/sql-figures.py DATASET                     # every figure, DuckDB, as tables
    scripts/sql-figures.py --engine spark DATASET      # the same text on a local Spark
    scripts/sql-figures.py --events EVENTS.parquet     # a trace exported by `alloclens export --parquet`
    scripts/sql-figures.py --json DATASET              # rows as JSON (what tests/sql.rs reads)
    scripts/sql-figures.py --figure sizes_16 DATASET   # one figure (repeatable)
    scripts/sql-figures.py --views spark DATASET       # Spark's text of the views (sql/spark/), on DuckDB

The tables (calls, runs, summary, samples) are views over the dataset's Parquet files
(sql/tables.ENGINE.sql, `${dataset}` replaced); then every sql/views/*.sql, in name order, or the
engine's own text of it in sql/ENGINE/ (Spark's link_roots: a loop, see iterate); then the figures,
sql/figures/*.sql, each one SELECT. A figure whose tables the dataset lacks (no trace merged, no run
merged) is skipped and named on stderr. Times are wall seconds per figure (views are lazy: a
figure's time includes the views it reads).
"""
import argparse
import json
import os
import re
import sys
import time

SQL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sql")
TRACE_TABLES = {"calls", "trace_markers"}
RUN_TABLES = {"runs", "summary", "samples"}


def fail(message):
    print(f"sql-figures: error: {message}", file=sys.stderr)
    sys.exit(1)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def code(text):
    """The text without its comment lines."""
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))


def statements(text):
    """The statements of a file: split at `;` ending a line, comment lines dropped."""
    return [s.strip() for s in re.split(r";\s*$", code(text), flags=re.M) if s.strip()]


def needs(text, view, views, seen=()):
    """Whether `text` reads `view`, directly or through other views."""
    words = set(re.findall(r"\b[a-z_]+\b", code(text)))
    if view in words:
        return True
    return any(needs(views[v], view, views, seen + (v,)) for v in views if v in words and v not in seen)


def tables_used(text):
    words = set(re.findall(r"\b[a-z_]+\b", code(text)))
    return (TRACE_TABLES | RUN_TABLES) & words


def default_driver_memory():
    """Half the machine's memory for Spark's heap (local mode: the driver does all the work), at
    least 2g: Spark's own default of 1g, and the 2g this script used to set, ran out of memory on a
    trace of 5 M calls (6g ran)."""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return "2g"
    return f"{max(2, kib // (2 * 1024 * 1024))}g"


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

    def materialize(self, sql):
        self.db.execute(sql.replace("TEMPORARY VIEW", "TEMPORARY TABLE", 1))

    def forget(self, name):
        # a table is a copy: the next step does not need the one it was made of
        self.db.execute(f"DROP TABLE {name}")

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
            .config("spark.ui.showConsoleProgress", "false")
            # one machine: a few shuffle partitions, not the cluster default of 200 (each a task)
            .config("spark.sql.shuffle.partitions", str(max(2, 2 * (os.cpu_count() or 1))))
            .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", default_driver_memory()))
            # sql/views/40-link_roots.sql (--views duckdb) walks realloc chains: one level per link of
            # the longest chain, as many rows as calls that return a block (defaults: 100 levels, 1 M
            # rows). Spark's own text (sql/spark/) loops instead, in log2(depth) steps.
            .config("spark.sql.cteRecursionLevelLimit", "-1")
            .config("spark.sql.cteRecursionRowLimit", "-1")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.version = self.spark.version

    def execute(self, sql):
        self.spark.sql(sql)

    def materialize(self, sql):
        # The view becomes a scan of its rows, computed now and kept (localCheckpoint), not a cached
        # query: a temporary view made by SQL keeps its text, and Spark analyzes every view it reads,
        # each time it is read; each step of link_roots reads the step before it twice, so a cached
        # step k would be analyzed as 2^k copies of the first one.
        self.spark.sql(sql)
        name = view_name(sql)
        self.spark.table(name).localCheckpoint(eager=True).createOrReplaceTempView(name)

    def forget(self, name):
        # the next step holds its own rows
        self.spark.catalog.dropTempView(name)

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


def view_name(sql):
    return re.search(r"VIEW (\w+)", sql).group(1)


def iterate(engine, text):
    """A view computed by a loop (sql/spark/40-link_roots.sql): its statements are the first step,
    the next step, the count of rows not done, and the view over the last step. Each step is a view
    of its own (a step reads the one before it); the loop ends when the count is 0. Returns the
    number of steps after the first."""
    first, next_step, not_done, last = statements(text)
    step = 0
    engine.materialize(first.replace("${step}", "0"))
    while engine.query(not_done.replace("${step}", str(step)))[0]["not_done"]:
        made = next_step.replace("${next}", str(step + 1)).replace("${step}", str(step))
        engine.materialize(made)
        engine.forget(view_name(first.replace("${step}", str(step))))
        step += 1
    engine.materialize(last.replace("${step}", str(step)))
    return step


def run_all(engine, args, figures, progress=False):
    """Runs `figures` on `engine`: ({figure: rows}, {figure: seconds})."""
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
                present.add(view_name(s))
    views = {}
    for v in sorted(os.listdir(os.path.join(SQL, "views"))):
        if v.endswith(".sql"):
            # sql/ENGINE/ holds an engine's own text of a view, under the same file name
            replaced = os.path.join(SQL, args.views or engine.name, v)
            views[v[3:-4]] = read(replaced if os.path.exists(replaced) else os.path.join(SQL, "views", v))
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
        # kept: they join calls to calls, and a walk along chains over lazy views recomputes them per step.
        for v in needed:
            if v not in made:
                if "${step}" in views[v]:
                    steps = iterate(engine, views[v])
                    if progress:
                        print(f"sql-figures: {engine.name}: {v}: {steps} steps", file=sys.stderr, flush=True)
                else:
                    for s in statements(views[v]):
                        engine.materialize(s)
                made.append(v)
        (query,) = statements(text)
        out[f] = engine.query(query)
        times[f] = time.perf_counter() - start
        if progress:
            print(f"sql-figures: {engine.name}: {f}: {times[f]:.2f} s", file=sys.stderr, flush=True)
    return out, times


def canonical(rows):
    """Rows in a comparable form: sorted, floats rounded to 9 significant digits, ints as ints."""
    def value(v):
        if isinstance(v, float):
            return float(f"{v:.9g}")
        if hasattr(v, "as_integer_ratio") and not isinstance(v, int):  # Decimal
            return float(f"{float(v):.9g}")
        return v
    return sorted((tuple(sorted((k, value(v)) for k, v in r.items())) for r in rows), key=repr)


def compare(args, figures):
    """Both engines on the same dataset: per figure, the rows side by side, agreement and times."""
    duck = DuckDB()
    d_out, d_times = run_all(duck, args, figures, progress=True)
    spark = Spark()
    s_out, s_times = run_all(spark, args, figures, progress=True)
    print(f"{'figure':28} {'rows':>7} {'duckdb ' + duck.version:>16} {'spark ' + spark.version:>16}  agree")
    for f in d_out:
        same = f in s_out and canonical(d_out[f]) == canonical(s_out[f])
        s_time = f"{s_times[f]:.2f} s" if f in s_times else "-"
        print(f"{f:28} {len(d_out[f]):>7} {d_times[f]:>14.2f} s {s_time:>16}  {'yes' if same else 'NO'}")
    for f in d_out:
        rows = canonical(d_out[f])[:args.rows]
        other = canonical(s_out.get(f, []))[:args.rows]
        print(f"\n== {f}: first {len(rows)} rows, DuckDB | Spark")
        for a, b in zip(rows, other):
            print("  " + ", ".join(f"{k}={v}" for k, v in a))
            if a != b:
                print("| " + ", ".join(f"{k}={v}" for k, v in b))
    total_d, total_s = sum(d_times.values()), sum(s_times.values())
    print(f"\ntotal: DuckDB {total_d:.2f} s, Spark {total_s:.2f} s")
    return all(f in s_out and canonical(d_out[f]) == canonical(s_out[f]) for f in d_out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset", nargs="?", help="directory written by `alloclens merge -o`")
    ap.add_argument("--events", help="events.parquet of `alloclens export --parquet` instead of a dataset")
    ap.add_argument("--engine", choices=["duckdb", "spark", "both"], default="duckdb",
                    help="both: DuckDB then Spark on the same files, side by side, with times")
    ap.add_argument("--rows", type=int, default=3, help="with --engine both: rows shown per figure")
    ap.add_argument("--figure", action="append", help="only this figure (file name without .sql)")
    ap.add_argument("--views", choices=["duckdb", "spark"],
                    help="use this engine's text of the views (sql/ENGINE/) whatever the engine: "
                         "--views spark checks Spark's text on DuckDB")
    ap.add_argument("--json", action="store_true", help="print {figure: rows, ...} and the times as JSON")
    args = ap.parse_args()
    if (args.dataset is None) == (args.events is None):
        fail("give a DATASET directory or --events FILE")
    source = args.dataset or args.events
    if not os.path.exists(source):
        fail(f"'{source}' does not exist")
    if args.dataset and not os.path.exists(os.path.join(args.dataset, "dataset.json")):
        fail(f"'{args.dataset}' is not an alloclens dataset (no dataset.json; alloclens merge writes one)")

    figures = sorted(f[:-4] for f in os.listdir(os.path.join(SQL, "figures")) if f.endswith(".sql"))
    if args.figure:
        unknown = set(args.figure) - set(figures)
        if unknown:
            fail(f"no figure {', '.join(sorted(unknown))} (figures: {', '.join(figures)})")
        figures = [f for f in figures if f in args.figure]
    if args.engine == "both":
        sys.exit(0 if compare(args, figures) else 1)
    engine = DuckDB() if args.engine == "duckdb" else Spark()
    out, times = run_all(engine, args, figures)
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
