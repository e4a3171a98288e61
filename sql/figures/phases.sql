-- Per phase of each process image (markers of `record --marker`): its label, the calls it spans, and
-- its calls, requests, requested bytes, allocations started in it, and the process-wide peak of the
-- live requested bytes while it was current (after each of its calls). The phase `start` (the calls
-- before the first marker) is left out when the first marker precedes every call.
-- = analyze --json processes[].phases[] {index, name, start_call, end_call, stats.calls_total,
--   stats.requests, stats.requested_bytes, stats.allocations, stats.peak_live_bytes.value}
WITH images AS (
  SELECT trace_id, pid, exec_index, max(seq) + 1 AS end_call FROM calls GROUP BY trace_id, pid, exec_index
),
phase_list AS (
  SELECT trace_id, pid, exec_index, 0 AS phase, 'start' AS name, 0 AS start_call FROM images
  UNION ALL
  SELECT trace_id, pid, exec_index, marker_index + 1 AS phase, label AS name, seq AS start_call
  FROM trace_markers
),
spans AS (
  SELECT p.trace_id, p.pid, p.exec_index, p.phase, p.name, p.start_call,
         greatest(coalesce(lead(p.start_call) OVER (PARTITION BY p.trace_id, p.pid, p.exec_index
                                                    ORDER BY p.phase),
                           i.end_call), p.start_call) AS end_call
  FROM phase_list p
  JOIN images i ON i.trace_id = p.trace_id AND i.pid = p.pid AND i.exec_index = p.exec_index
),
requests AS (
  SELECT cp.trace_id, cp.pid, cp.exec_index, cp.phase, count(*) AS calls_total,
         sum(CASE WHEN NOT ce.is_free AND ce.addr <> 0 THEN 1 ELSE 0 END) AS requests,
         sum(CASE WHEN NOT ce.is_free AND ce.addr <> 0 THEN ce.size ELSE 0 END) AS requested_bytes
  FROM call_phases cp
  JOIN call_effects ce ON ce.trace_id = cp.trace_id AND ce.pid = cp.pid
                      AND ce.exec_index = cp.exec_index AND ce.seq = cp.seq
  GROUP BY cp.trace_id, cp.pid, cp.exec_index, cp.phase
),
started AS (
  SELECT cp.trace_id, cp.pid, cp.exec_index, cp.phase, count(*) AS allocations
  FROM allocations a
  JOIN call_phases cp ON cp.trace_id = a.trace_id AND cp.pid = a.pid
                     AND cp.exec_index = a.exec_index AND cp.seq = a.start_seq
  GROUP BY cp.trace_id, cp.pid, cp.exec_index, cp.phase
),
-- the live bytes after every call: a running sum of the changes over all calls
live AS (
  SELECT cp.trace_id, cp.pid, cp.exec_index, cp.phase,
         sum(coalesce(m.bytes, 0)) OVER (PARTITION BY cp.trace_id, cp.pid, cp.exec_index
                                         ORDER BY cp.seq ROWS UNBOUNDED PRECEDING) AS live_bytes
  FROM call_phases cp
  LEFT JOIN (SELECT trace_id, pid, exec_index, seq, sum(bytes) AS bytes
             FROM live_changes GROUP BY trace_id, pid, exec_index, seq) m
         ON m.trace_id = cp.trace_id AND m.pid = cp.pid AND m.exec_index = cp.exec_index
        AND m.seq = cp.seq
),
peaks AS (
  SELECT trace_id, pid, exec_index, phase, max(live_bytes) AS peak_live_bytes
  FROM live GROUP BY trace_id, pid, exec_index, phase
)
SELECT s.trace_id, s.pid, s.exec_index, s.phase, s.name, s.start_call, s.end_call,
       coalesce(r.calls_total, 0) AS calls_total, coalesce(r.requests, 0) AS requests,
       coalesce(r.requested_bytes, 0) AS requested_bytes, coalesce(a.allocations, 0) AS allocations,
       coalesce(k.peak_live_bytes, 0) AS peak_live_bytes
FROM spans s
LEFT JOIN requests r ON r.trace_id = s.trace_id AND r.pid = s.pid AND r.exec_index = s.exec_index
                    AND r.phase = s.phase
LEFT JOIN started a ON a.trace_id = s.trace_id AND a.pid = s.pid AND a.exec_index = s.exec_index
                   AND a.phase = s.phase
LEFT JOIN peaks k ON k.trace_id = s.trace_id AND k.pid = s.pid AND k.exec_index = s.exec_index
                 AND k.phase = s.phase
WHERE s.phase > 0 OR r.calls_total > 0
   OR NOT EXISTS (SELECT 1 FROM trace_markers m WHERE m.trace_id = s.trace_id AND m.pid = s.pid
                  AND m.exec_index = s.exec_index)
ORDER BY s.trace_id, s.pid, s.exec_index, s.phase
