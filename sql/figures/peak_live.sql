-- Peak live requested bytes and live allocations, with the call that first reached them and its time;
-- for the process image (all its allocations) and for each thread (the allocations it started).
-- Window functions: the live figures after each call are running sums of the changes over calls.
-- = analyze --json stats.peak_live_bytes {value, call, t_ns}, stats.peak_live_allocations {...}
WITH live AS (
  SELECT trace_id, pid, exec_index, -1 AS tid, seq, t_ns,
         sum(sum(bytes)) OVER (PARTITION BY trace_id, pid, exec_index ORDER BY seq
                               ROWS UNBOUNDED PRECEDING) AS live_bytes,
         sum(sum(allocations)) OVER (PARTITION BY trace_id, pid, exec_index ORDER BY seq
                                     ROWS UNBOUNDED PRECEDING) AS live_allocations
  FROM live_changes
  GROUP BY trace_id, pid, exec_index, seq, t_ns
  UNION ALL
  SELECT trace_id, pid, exec_index, owner AS tid, seq, t_ns,
         sum(bytes) OVER (PARTITION BY trace_id, pid, exec_index, owner ORDER BY seq
                          ROWS UNBOUNDED PRECEDING) AS live_bytes,
         sum(allocations) OVER (PARTITION BY trace_id, pid, exec_index, owner ORDER BY seq
                                ROWS UNBOUNDED PRECEDING) AS live_allocations
  FROM live_changes
),
marked AS (
  SELECT *,
         max(live_bytes) OVER (PARTITION BY trace_id, pid, exec_index, tid) AS peak_bytes,
         max(live_allocations) OVER (PARTITION BY trace_id, pid, exec_index, tid) AS peak_allocations
  FROM live
),
-- the first call at the peak; a peak of 0 is never "reached": analyze then says call 0, time 0
peaks AS (
  SELECT trace_id, pid, exec_index, tid, max(peak_bytes) AS peak_bytes,
         min(CASE WHEN live_bytes = peak_bytes AND peak_bytes > 0 THEN seq END) AS bytes_call,
         max(peak_allocations) AS peak_allocations,
         min(CASE WHEN live_allocations = peak_allocations AND peak_allocations > 0 THEN seq END)
           AS allocations_call
  FROM marked GROUP BY trace_id, pid, exec_index, tid
),
scopes AS (
  SELECT DISTINCT trace_id, pid, exec_index, -1 AS tid FROM calls
  UNION ALL
  SELECT DISTINCT trace_id, pid, exec_index, tid FROM calls
)
SELECT s.trace_id, s.pid, s.exec_index,
       CASE WHEN s.tid = -1 THEN 'process' ELSE 'thread' END AS scope,
       CASE WHEN s.tid = -1 THEN NULL ELSE s.tid END AS tid,
       coalesce(p.peak_bytes, 0) AS peak_live_bytes,
       coalesce(p.bytes_call, 0) AS peak_live_bytes_call,
       coalesce(b.t_ns, 0) AS peak_live_bytes_ns,
       coalesce(p.peak_allocations, 0) AS peak_live_allocations,
       coalesce(p.allocations_call, 0) AS peak_live_allocations_call,
       coalesce(a.t_ns, 0) AS peak_live_allocations_ns
FROM scopes s
LEFT JOIN peaks p ON p.trace_id = s.trace_id AND p.pid = s.pid AND p.exec_index = s.exec_index
                 AND p.tid = s.tid
LEFT JOIN calls b ON b.trace_id = s.trace_id AND b.pid = s.pid AND b.exec_index = s.exec_index
                 AND b.seq = p.bytes_call
LEFT JOIN calls a ON a.trace_id = s.trace_id AND a.pid = s.pid AND a.exec_index = s.exec_index
                 AND a.seq = p.allocations_call
ORDER BY trace_id, pid, exec_index, scope, tid
