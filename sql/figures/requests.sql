-- Calls, requests and the requested bytes (cumulated bytes, upper bound), failures, frees of NULL and of
-- unknown pointers, reallocs of unknown pointers, and the share of requests below 512 bytes; per process
-- image and per calling thread.
-- = analyze --json stats.{calls_total, requests, requested_bytes, failed_allocations, failed_bytes,
--   null_frees, unmatched_frees, unmatched_reallocs, sizes.count, sizes.share_below_512}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       count(*) AS calls_total,
       sum(CASE WHEN request THEN 1 ELSE 0 END) AS requests,
       sum(CASE WHEN request THEN size ELSE 0 END) AS requested_bytes,
       sum(CASE WHEN failed THEN 1 ELSE 0 END) AS failed_allocations,
       sum(CASE WHEN failed THEN size ELSE 0 END) AS failed_bytes,
       sum(CASE WHEN is_free AND addr = 0 THEN 1 ELSE 0 END) AS null_frees,
       sum(CASE WHEN release_unmatched AND (is_free OR addr = 0) THEN 1 ELSE 0 END)
         + sum(CASE WHEN dropped_link IS NOT NULL THEN 1 ELSE 0 END) AS unmatched_frees,
       sum(CASE WHEN release_unmatched AND NOT is_free AND addr <> 0 THEN 1 ELSE 0 END)
         AS unmatched_reallocs,
       coalesce(sum(CASE WHEN request AND size < 512 THEN 1 ELSE 0 END)
                / CAST(nullif(sum(CASE WHEN request THEN 1 ELSE 0 END), 0) AS DOUBLE), 0)
         AS share_below_512
FROM (
  SELECT *,
         NOT is_free AND addr <> 0 AS request,
         -- realloc(p, 0) returning NULL is a free, not a failure
         NOT is_free AND addr = 0 AND NOT (resizes AND size = 0) AS failed
  FROM call_effects
) c
GROUP BY GROUPING SETS ((trace_id, pid, exec_index), (trace_id, pid, exec_index, tid))
ORDER BY trace_id, pid, exec_index, scope, tid
