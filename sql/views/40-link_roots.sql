-- Each link with the link that started its allocation (root): a recursive walk along realloc chains,
-- one step per realloc of the longest chain.
CREATE OR REPLACE TEMPORARY VIEW link_roots AS
WITH RECURSIVE chain (trace_id, pid, exec_index, seq, root) AS (
  SELECT trace_id, pid, exec_index, seq, seq AS root FROM links WHERE continues IS NULL
  UNION ALL
  SELECT l.trace_id, l.pid, l.exec_index, l.seq, chain.root
  FROM links l
  JOIN chain ON l.trace_id = chain.trace_id AND l.pid = chain.pid
            AND l.exec_index = chain.exec_index AND l.continues = chain.seq
)
SELECT trace_id, pid, exec_index, seq, root FROM chain
