-- Allocations (a realloc chain counts once), the cumulated bytes' lower bound (each chain's last size)
-- and the leaks (allocations live at the end of the stream), per process image and per thread that
-- started them.
-- = analyze --json stats.{allocations, cumulated_lower_bytes, leaks.count, leaks.bytes}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       count(*) AS allocations,
       sum(last_size) AS cumulated_lower_bytes,
       sum(CASE WHEN outcome = 'leaked' THEN 1 ELSE 0 END) AS leaked_allocations,
       sum(CASE WHEN outcome = 'leaked' THEN last_size ELSE 0 END) AS leaked_bytes
FROM allocations
GROUP BY GROUPING SETS ((trace_id, pid, exec_index), (trace_id, pid, exec_index, tid))
ORDER BY trace_id, pid, exec_index, scope, tid
