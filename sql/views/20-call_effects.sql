-- One row per call: what it did to the live blocks, as analyze's pass decides it (docs/metrics.md,
-- "Edge cases"). released_link: the seq of the call that returned the block this call handed back
-- (null: nothing handed back, or a pointer not live: unmatched). dropped_link: the seq of the call
-- whose block was at the address this call received, never seen freed.
CREATE OR REPLACE TEMPORARY VIEW call_effects AS
SELECT c.trace_id, c.pid, c.exec_index, c.tid, c.seq, c.t_ns, c.op, c.size, c.addr, c.old_addr,
       c.op IN ('free', 'free_sized', 'free_aligned_sized') AS is_free,
       c.op IN ('realloc', 'reallocarray') AND c.old_addr <> 0 AS resizes,
       r.released_link,
       r.step IS NOT NULL AND r.released_link IS NULL AS release_unmatched,
       d.dropped_link
FROM calls c
LEFT JOIN (
  SELECT trace_id, pid, exec_index, seq, step,
         CASE WHEN prev_step = 1 THEN prev_seq END AS released_link
  FROM block_touches WHERE step = 0
) r ON r.trace_id = c.trace_id AND r.pid = c.pid AND r.exec_index = c.exec_index AND r.seq = c.seq
LEFT JOIN (
  SELECT trace_id, pid, exec_index, seq, prev_seq AS dropped_link
  FROM block_touches WHERE step = 1 AND prev_step = 1
) d ON d.trace_id = c.trace_id AND d.pid = c.pid AND d.exec_index = c.exec_index AND d.seq = c.seq
