-- The dataset's tables as views, for Spark SQL. ${dataset} is the directory `alloclens merge -o` wrote;
-- Spark finds the host and command partitions itself (run with
-- spark.sql.sources.partitionColumnTypeInference.enabled=false so host names stay strings).
CREATE OR REPLACE TEMPORARY VIEW calls USING parquet OPTIONS (path '${dataset}/kind=calls', mergeSchema 'true');
CREATE OR REPLACE TEMPORARY VIEW runs USING parquet OPTIONS (path '${dataset}/kind=runs', mergeSchema 'true');
CREATE OR REPLACE TEMPORARY VIEW summary USING parquet OPTIONS (path '${dataset}/kind=summary', mergeSchema 'true');
CREATE OR REPLACE TEMPORARY VIEW samples USING parquet OPTIONS (path '${dataset}/kind=samples', mergeSchema 'true');
CREATE OR REPLACE TEMPORARY VIEW trace_markers USING parquet OPTIONS (path '${dataset}/kind=trace_markers', mergeSchema 'true');
