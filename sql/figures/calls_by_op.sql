-- Calls per entry point, per process image and per calling thread.
-- = analyze --json: processes[].stats.calls and processes[].threads[].stats.calls
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       op, count(*) AS calls
FROM calls
GROUP BY GROUPING SETS ((trace_id, pid, exec_index, op), (trace_id, pid, exec_index, tid, op))
ORDER BY trace_id, pid, exec_index, scope, tid, op
