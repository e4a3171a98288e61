-- The dataset's tables as views, for DuckDB. ${dataset} is the directory `alloclens merge -o` wrote;
-- host and command come from the paths (hive partitions). A table the dataset has no file of is left
-- out (scripts/sql-figures.py skips its statement).
CREATE OR REPLACE TEMPORARY VIEW calls AS SELECT * FROM read_parquet('${dataset}/kind=calls/*/*/*.parquet', hive_partitioning = true, union_by_name = true);
CREATE OR REPLACE TEMPORARY VIEW runs AS SELECT * FROM read_parquet('${dataset}/kind=runs/*/*/*.parquet', hive_partitioning = true, union_by_name = true);
CREATE OR REPLACE TEMPORARY VIEW summary AS SELECT * FROM read_parquet('${dataset}/kind=summary/*/*/*.parquet', hive_partitioning = true, union_by_name = true);
CREATE OR REPLACE TEMPORARY VIEW samples AS SELECT * FROM read_parquet('${dataset}/kind=samples/*/*/*.parquet', hive_partitioning = true, union_by_name = true);
CREATE OR REPLACE TEMPORARY VIEW trace_markers AS SELECT * FROM read_parquet('${dataset}/kind=trace_markers/*/*/*.parquet', hive_partitioning = true, union_by_name = true);
