-- One row per allocation (a realloc chain counts once): who started it and when, its last size,
-- and how it ended: `ended` (freed, or realloc(p, 0) returned NULL: end_seq, end_ns are that call's),
-- `dropped` (its address was handed out again without a traced free), or `leaked` (live at the end).
CREATE OR REPLACE TEMPORARY VIEW allocations AS
SELECT a.trace_id, a.pid, a.exec_index, a.root AS start_seq, s.t_ns AS start_ns, s.tid,
       a.last_link, last.size AS last_size,
       CASE WHEN e.seq IS NOT NULL THEN 'ended' WHEN d.seq IS NOT NULL THEN 'dropped' ELSE 'leaked' END
         AS outcome,
       e.seq AS end_seq, e.t_ns AS end_ns, d.seq AS drop_seq, d.t_ns AS drop_ns
FROM (
  SELECT trace_id, pid, exec_index, root, max(seq) AS last_link
  FROM link_roots GROUP BY trace_id, pid, exec_index, root
) a
JOIN links s ON s.trace_id = a.trace_id AND s.pid = a.pid AND s.exec_index = a.exec_index
            AND s.seq = a.root
JOIN links last ON last.trace_id = a.trace_id AND last.pid = a.pid
               AND last.exec_index = a.exec_index AND last.seq = a.last_link
LEFT JOIN call_effects e ON e.trace_id = a.trace_id AND e.pid = a.pid
                        AND e.exec_index = a.exec_index AND e.released_link = a.last_link
LEFT JOIN call_effects d ON d.trace_id = a.trace_id AND d.pid = a.pid
                        AND d.exec_index = a.exec_index AND d.dropped_link = a.last_link
