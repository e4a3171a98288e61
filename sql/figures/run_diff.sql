-- Two results directories side by side (every ordered pair of sources in the dataset: filter on
-- a_host/b_host or a_source/b_source): per parameter point, variant and figure, A's and B's medians,
-- the change B - A and the change in % of A, as `alloclens diff A B` puts them.
-- = alloclens diff --json A B: rows[] {a, b, change, change_percent} of the metrics "wall (median)",
--   "peak PSS (median)", "mean PSS (median)", "peak RSS (median)", "mean RSS (median)", "failed runs"
--   (scope: the variant, after the point's NAME=VALUE pairs when there are parameters)
WITH per_variant AS (
  SELECT host, source_id, params, variant,
         sum(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS failed,
         median(CASE WHEN outcome = 'ok' THEN wall_s END) AS wall,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN CAST(peak_pss AS DOUBLE) END) AS peak_pss,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN mean_pss END) AS mean_pss,
         -- A run's peak RSS: the larger of its samples' and the kernel's (as run_summary.sql).
         median(CASE WHEN outcome = 'ok' THEN CAST(
                  CASE WHEN samples > 0 AND (kernel_peak_rss IS NULL OR peak_rss >= kernel_peak_rss)
                       THEN peak_rss ELSE kernel_peak_rss END AS DOUBLE) END) AS peak_rss,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN mean_rss END) AS mean_rss
  FROM runs
  GROUP BY host, source_id, params, variant
),
figures AS (
  SELECT host, source_id, params, variant, 'wall (median)' AS metric, wall AS value FROM per_variant
  UNION ALL
  SELECT host, source_id, params, variant, 'peak PSS (median)', peak_pss FROM per_variant
  UNION ALL
  SELECT host, source_id, params, variant, 'mean PSS (median)', mean_pss FROM per_variant
  UNION ALL
  SELECT host, source_id, params, variant, 'peak RSS (median)', peak_rss FROM per_variant
  UNION ALL
  SELECT host, source_id, params, variant, 'mean RSS (median)', mean_rss FROM per_variant
  UNION ALL
  SELECT host, source_id, params, variant, 'failed runs', CAST(failed AS DOUBLE) FROM per_variant
)
SELECT a.host AS a_host, a.source_id AS a_source, b.host AS b_host, b.source_id AS b_source,
       a.params, a.variant, a.metric, a.value AS a, b.value AS b, b.value - a.value AS change,
       (b.value - a.value) / nullif(a.value, 0) * 100 AS change_percent
FROM figures a
JOIN figures b ON b.source_id <> a.source_id AND b.params = a.params AND b.variant = a.variant
              AND b.metric = a.metric
ORDER BY a_host, a_source, b_host, b_source, a.params, a.variant, a.metric
