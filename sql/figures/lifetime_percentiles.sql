-- Percentiles of the lifetimes in calls and in ns, nearest-rank (the smallest value such that at least
-- a fraction q of the lifetimes are at or below it), as analyze reports them: a lifetime of 256 or more
-- is rounded down to its log-linear bucket (128 per power of two, a relative error below 0.8 %).
-- share_of_life = calls / the calls of the process image.
-- = analyze --json stats.lifetimes.percentiles[] {q, calls, share_of_life, ns} (median_calls, median_ns:
--   q = 0.5)
WITH ended AS (
  SELECT trace_id, pid, exec_index, tid,
         end_seq - start_seq - 1 AS calls,
         CASE WHEN end_ns > start_ns THEN end_ns - start_ns ELSE 0 END AS ns
  FROM allocations WHERE outcome = 'ended'
),
scoped AS (
  SELECT trace_id, pid, exec_index, -1 AS tid, calls, ns FROM ended
  UNION ALL
  SELECT trace_id, pid, exec_index, tid, calls, ns FROM ended
),
-- the lower edge of the log-linear bucket of each value (exact below 256)
bucketed AS (
  SELECT trace_id, pid, exec_index, tid,
         CASE WHEN calls < 256 THEN calls ELSE CAST(floor(calls / power(2, floor(log2(calls)) - 7))
              * power(2, floor(log2(calls)) - 7) AS BIGINT) END AS calls,
         CASE WHEN ns < 256 THEN ns ELSE CAST(floor(ns / power(2, floor(log2(ns)) - 7))
              * power(2, floor(log2(ns)) - 7) AS BIGINT) END AS ns,
         count(*) OVER (PARTITION BY trace_id, pid, exec_index, tid) AS total
  FROM scoped
),
quantiles AS (
  SELECT CAST(q AS DOUBLE) AS q FROM (VALUES (0.10), (0.25), (0.50), (0.75), (0.80), (0.90), (0.95),
                                             (0.99), (0.999), (1.0)) AS qs (q)
),
-- the rank of each value in its scope, by calls and by ns (ties: the highest rank of the tie)
ranked AS (
  SELECT trace_id, pid, exec_index, tid, total, calls, ns,
         count(*) OVER (PARTITION BY trace_id, pid, exec_index, tid ORDER BY calls
                        RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS calls_rank,
         count(*) OVER (PARTITION BY trace_id, pid, exec_index, tid ORDER BY ns
                        RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS ns_rank
  FROM bucketed
),
life AS (SELECT trace_id, pid, exec_index, count(*) AS life_calls FROM calls
         GROUP BY trace_id, pid, exec_index),
answers AS (
  SELECT r.trace_id, r.pid, r.exec_index, r.tid, qs.q,
         min(CASE WHEN r.calls_rank >= greatest(ceil(qs.q * r.total), 1) THEN r.calls END) AS calls,
         min(CASE WHEN r.ns_rank >= greatest(ceil(qs.q * r.total), 1) THEN r.ns END) AS ns
  FROM ranked r CROSS JOIN quantiles qs
  GROUP BY r.trace_id, r.pid, r.exec_index, r.tid, qs.q
)
SELECT a.trace_id, a.pid, a.exec_index,
       CASE WHEN a.tid = -1 THEN 'process' ELSE 'thread' END AS scope,
       CASE WHEN a.tid = -1 THEN NULL ELSE a.tid END AS tid,
       a.q, a.calls, a.calls / CAST(l.life_calls AS DOUBLE) AS share_of_life, a.ns
FROM answers a
JOIN life l ON l.trace_id = a.trace_id AND l.pid = a.pid AND l.exec_index = a.exec_index
ORDER BY trace_id, pid, exec_index, scope, tid, q
