-- Requested sizes in 16-byte buckets [low, low + 15] (non-empty ones), per process image and thread.
-- = analyze --json stats.sizes.buckets_16[] {low, high, count}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       low, low + 15 AS high, count(*) AS count
FROM (SELECT *, CAST(floor(size / 16) AS BIGINT) * 16 AS low
      FROM calls
      WHERE op NOT IN ('free', 'free_sized', 'free_aligned_sized') AND addr <> 0) requests
GROUP BY GROUPING SETS ((trace_id, pid, exec_index, low), (trace_id, pid, exec_index, tid, low))
ORDER BY trace_id, pid, exec_index, scope, tid, low
