-- Each call's phase in its process image: the number of markers at or before it (0: `start`, the calls
-- before the first marker; k: the phase the k-th marker opens). A marker's seq is that of the first
-- call after it, so at equal seq the marker sorts first. Window function: a running count over the
-- calls and markers of an image in seq order.
CREATE OR REPLACE TEMPORARY VIEW call_phases AS
SELECT trace_id, pid, exec_index, seq, phase
FROM (
  SELECT trace_id, pid, exec_index, seq, is_call,
         sum(1 - is_call) OVER (PARTITION BY trace_id, pid, exec_index ORDER BY seq, is_call
                                ROWS UNBOUNDED PRECEDING) AS phase
  FROM (SELECT trace_id, pid, exec_index, seq, 1 AS is_call FROM calls
        UNION ALL
        SELECT trace_id, pid, exec_index, seq, 0 AS is_call FROM trace_markers) e
) numbered
WHERE is_call = 1
