-- Per host, results directory (source), parameter point and variant: runs, failed runs, medians over
-- the successful runs (memory: those with samples) of wall time, throughput, peak and mean PSS and RSS,
-- and each median's ratio to the baseline variant's at the same point (lower is better, except
-- throughput). A run's peak RSS is the larger of its samples' and the kernel's (kernel_peak_rss),
-- so runs without samples count when the kernel has a figure.
-- = results.json summary[].variants[] {runs, failed, wall_median, throughput_median, peak_pss_median,
--   mean_pss_median, peak_rss_median, mean_rss_median, wall_ratio, throughput_ratio, peak_pss_ratio,
--   mean_pss_ratio, peak_rss_ratio} (also the dataset's kind=summary rows)
WITH per_variant AS (
  SELECT host, source_id, params, baseline, variant,
         count(*) AS runs,
         sum(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END) AS failed,
         median(CASE WHEN outcome = 'ok' THEN wall_s END) AS wall_median,
         median(CASE WHEN outcome = 'ok' THEN throughput END) AS throughput_median,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN CAST(peak_pss AS DOUBLE) END)
           AS peak_pss_median,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN mean_pss END) AS mean_pss_median,
         median(CASE WHEN outcome = 'ok' THEN CAST(
                  CASE WHEN samples > 0 AND (kernel_peak_rss IS NULL OR peak_rss >= kernel_peak_rss)
                       THEN peak_rss ELSE kernel_peak_rss END AS DOUBLE) END)
           AS peak_rss_median,
         median(CASE WHEN outcome = 'ok' AND samples > 0 THEN mean_rss END) AS mean_rss_median
  FROM runs
  GROUP BY host, source_id, params, baseline, variant
)
SELECT v.host, v.source_id, v.params, v.baseline, v.variant, v.runs, v.failed,
       v.wall_median, v.throughput_median, v.peak_pss_median, v.mean_pss_median, v.peak_rss_median,
       v.mean_rss_median,
       v.wall_median / nullif(b.wall_median, 0) AS wall_ratio,
       v.throughput_median / nullif(b.throughput_median, 0) AS throughput_ratio,
       v.peak_pss_median / nullif(b.peak_pss_median, 0) AS peak_pss_ratio,
       v.mean_pss_median / nullif(b.mean_pss_median, 0) AS mean_pss_ratio,
       v.peak_rss_median / nullif(b.peak_rss_median, 0) AS peak_rss_ratio
FROM per_variant v
LEFT JOIN per_variant b ON b.source_id = v.source_id AND b.params = v.params AND b.variant = v.baseline
ORDER BY v.host, v.source_id, v.params, v.variant
