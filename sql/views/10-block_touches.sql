-- Every time a call hands a block back (step 0: free, realloc's old pointer) or receives one (step 1:
-- a returned pointer), with the touch before it at the same address of the same process image.
-- A hand-back whose previous touch is a receive ends that block; a receive whose previous touch is
-- also a receive means the block there was never seen freed (analyze drops it as unmatched).
-- Window function: lag over (image, address) ordered by (seq, step).
CREATE OR REPLACE TEMPORARY VIEW block_touches AS
SELECT trace_id, pid, exec_index, seq, step, block,
       lag(step) OVER w AS prev_step,
       lag(seq) OVER w AS prev_seq
FROM (
  SELECT trace_id, pid, exec_index, seq, 0 AS step, addr AS block
  FROM calls
  WHERE op IN ('free', 'free_sized', 'free_aligned_sized') AND addr <> 0
  UNION ALL
  -- realloc(p, n) releases p when it succeeds, and when it returns NULL for n = 0 (a free);
  -- a failed realloc(p, n > 0) leaves p as it was.
  SELECT trace_id, pid, exec_index, seq, 0 AS step, old_addr AS block
  FROM calls
  WHERE op IN ('realloc', 'reallocarray') AND old_addr <> 0 AND (addr <> 0 OR size = 0)
  UNION ALL
  SELECT trace_id, pid, exec_index, seq, 1 AS step, addr AS block
  FROM calls
  WHERE op NOT IN ('free', 'free_sized', 'free_aligned_sized') AND addr <> 0
) touches
WINDOW w AS (PARTITION BY trace_id, pid, exec_index, block ORDER BY seq, step)
