-- Requested sizes in 32 KiB buckets [low, low + 32767] (non-empty ones), per process image and thread.
-- = analyze --json stats.sizes.buckets_32k[] {low, high, count}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       low, low + 32767 AS high, count(*) AS count
FROM (SELECT *, CAST(floor(size / 32768) AS BIGINT) * 32768 AS low
      FROM calls
      WHERE op NOT IN ('free', 'free_sized', 'free_aligned_sized') AND addr <> 0) requests
GROUP BY GROUPING SETS ((trace_id, pid, exec_index, low), (trace_id, pid, exec_index, tid, low))
ORDER BY trace_id, pid, exec_index, scope, tid, low
