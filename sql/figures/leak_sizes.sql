-- The 20 sizes with the most bytes never freed, per process image and per thread that allocated them
-- (ties: more blocks first, then the smaller size).
-- = analyze --json stats.leaks.top_sizes[] {size, count, bytes}
SELECT trace_id, pid, exec_index, scope, tid, size, count, bytes
FROM (
  SELECT *, row_number() OVER (PARTITION BY trace_id, pid, exec_index, scope, tid
                               ORDER BY bytes DESC, count DESC, size) AS place
  FROM (
    SELECT trace_id, pid, exec_index,
           CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
           last_size AS size, count(*) AS count, sum(last_size) AS bytes
    FROM allocations
    WHERE outcome = 'leaked'
    GROUP BY GROUPING SETS ((trace_id, pid, exec_index, last_size),
                            (trace_id, pid, exec_index, tid, last_size))
  ) by_size
) ranked
WHERE place <= 20
ORDER BY trace_id, pid, exec_index, scope, tid, bytes DESC, count DESC, size
