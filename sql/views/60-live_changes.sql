-- How each call moved the live requested bytes and live allocations, per owning thread (the thread
-- that started the allocation): + a new allocation, new - old size for a realloc that continued one,
-- - an ended or dropped one. A call may move two threads (it drops one's block and starts another).
CREATE OR REPLACE TEMPORARY VIEW live_changes AS
SELECT trace_id, pid, exec_index, seq, t_ns, owner, sum(bytes) AS bytes, sum(allocations) AS allocations
FROM (
  -- a link: a new allocation, or the new size of a continued one
  SELECT l.trace_id, l.pid, l.exec_index, l.seq, l.t_ns, a.tid AS owner,
         l.size - coalesce(p.size, 0) AS bytes,
         CASE WHEN l.continues IS NULL THEN 1 ELSE 0 END AS allocations
  FROM links l
  JOIN link_roots r ON r.trace_id = l.trace_id AND r.pid = l.pid AND r.exec_index = l.exec_index
                   AND r.seq = l.seq
  JOIN links a ON a.trace_id = l.trace_id AND a.pid = l.pid AND a.exec_index = l.exec_index
              AND a.seq = r.root
  LEFT JOIN links p ON p.trace_id = l.trace_id AND p.pid = l.pid AND p.exec_index = l.exec_index
                   AND p.seq = l.continues
  UNION ALL
  -- an allocation's end (free, realloc(p, 0) returning NULL) or its drop
  SELECT trace_id, pid, exec_index,
         coalesce(end_seq, drop_seq) AS seq, coalesce(end_ns, drop_ns) AS t_ns, tid AS owner,
         -last_size AS bytes, -1 AS allocations
  FROM allocations
  WHERE outcome <> 'leaked'
) moves
GROUP BY trace_id, pid, exec_index, seq, t_ns, owner
