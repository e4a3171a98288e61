-- Each run's peak and time-weighted mean PSS and RSS from its samples (the tree totals: scope 'total'):
-- the mean is the area under the samples (trapezoids between consecutive ones) over the sampled span,
-- or the plain mean when the span is 0. Window function: each sample with the one before it.
-- = results.json runs[].memory.{pss,rss}.{peak,mean} (the dataset's runs.peak_pss, mean_pss, peak_rss,
--   mean_rss), up to the rounding of t_s in samples.csv
WITH totals AS (
  SELECT host, source_id, run, t_s, pss, rss,
         lag(t_s) OVER w AS prev_t, lag(pss) OVER w AS prev_pss, lag(rss) OVER w AS prev_rss
  FROM samples
  WHERE scope = 'total'
  WINDOW w AS (PARTITION BY source_id, run ORDER BY t_s)
)
SELECT host, source_id, run, count(*) AS samples,
       max(pss) AS peak_pss, max(rss) AS peak_rss,
       CASE WHEN max(t_s) > min(t_s)
            THEN sum((t_s - prev_t) * (pss + prev_pss) / 2.0) / (max(t_s) - min(t_s))
            ELSE avg(CAST(pss AS DOUBLE)) END AS mean_pss,
       CASE WHEN max(t_s) > min(t_s)
            THEN sum((t_s - prev_t) * (rss + prev_rss) / 2.0) / (max(t_s) - min(t_s))
            ELSE avg(CAST(rss AS DOUBLE)) END AS mean_rss
FROM totals
GROUP BY host, source_id, run
ORDER BY host, source_id, run
