-- Lifetimes in allocator calls of the allocations that ended: the calls made (by any thread) strictly
-- between the call that started the allocation and the free that ended it, a realloc chain being one
-- allocation (a free is joined to its allocation by block: see views/). Per process image and per
-- thread that started them.
-- = analyze --json stats.lifetimes.{count, share_zero, mean_calls, max_calls}
SELECT trace_id, pid, exec_index,
       CASE WHEN grouping(tid) = 1 THEN 'process' ELSE 'thread' END AS scope, tid,
       count(*) AS count,
       sum(CASE WHEN lifetime_calls = 0 THEN 1 ELSE 0 END) / CAST(count(*) AS DOUBLE) AS share_zero,
       avg(CAST(lifetime_calls AS DOUBLE)) AS mean_calls,
       max(lifetime_calls) AS max_calls
FROM (SELECT *, end_seq - start_seq - 1 AS lifetime_calls FROM allocations WHERE outcome = 'ended') ended
GROUP BY GROUPING SETS ((trace_id, pid, exec_index), (trace_id, pid, exec_index, tid))
ORDER BY trace_id, pid, exec_index, scope, tid
