-- Requested sizes by power of two: size 0 alone, then [2^k, 2^(k+1) - 1], per process image and thread.
-- = analyze --json stats.sizes.buckets_pow2[] {low, high, count}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       low, CASE WHEN low = 0 THEN 0 ELSE 2 * low - 1 END AS high, count(*) AS count
FROM (SELECT *,
             CASE WHEN size = 0 THEN 0 ELSE CAST(power(2, floor(log2(size))) AS BIGINT) END AS low
      FROM calls
      WHERE op NOT IN ('free', 'free_sized', 'free_aligned_sized') AND addr <> 0) requests
GROUP BY GROUPING SETS ((trace_id, pid, exec_index, low), (trace_id, pid, exec_index, tid, low))
ORDER BY trace_id, pid, exec_index, scope, tid, low
