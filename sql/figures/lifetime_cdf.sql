-- The distribution of lifetimes in calls: the fraction strictly below 1, 2, 3, 4, 6, 8, 12, ... (two
-- points per power of two) up to the first power of two above the longest lifetime, per process image
-- and per thread that started the allocations. share_of_life = below_calls / the image's calls.
-- = analyze --json stats.lifetimes.cdf[] {below_calls, share_of_life, fraction}
WITH ended AS (
  SELECT trace_id, pid, exec_index, -1 AS tid, end_seq - start_seq - 1 AS calls
  FROM allocations WHERE outcome = 'ended'
  UNION ALL
  SELECT trace_id, pid, exec_index, tid, end_seq - start_seq - 1 AS calls
  FROM allocations WHERE outcome = 'ended'
),
by_value AS (
  SELECT trace_id, pid, exec_index, tid, calls, count(*) AS n FROM ended
  GROUP BY trace_id, pid, exec_index, tid, calls
),
scopes AS (
  SELECT trace_id, pid, exec_index, tid, sum(n) AS total, max(calls) AS longest FROM by_value
  GROUP BY trace_id, pid, exec_index, tid
),
octaves AS (
  SELECT CAST(k AS BIGINT) AS k FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10),
    (11), (12), (13), (14), (15), (16), (17), (18), (19), (20), (21), (22), (23), (24), (25), (26),
    (27), (28), (29), (30), (31), (32), (33), (34), (35), (36), (37), (38), (39), (40), (41), (42),
    (43), (44), (45), (46), (47), (48), (49), (50), (51), (52), (53), (54), (55), (56), (57), (58),
    (59), (60), (61), (62)) AS ks (k)
),
points AS (
  SELECT DISTINCT trace_id, pid, exec_index, tid, total, below_calls
  FROM (
    -- 2^k and 3 * 2^(k - 1), for every k up to the first with 2^k above the longest lifetime
    SELECT s.trace_id, s.pid, s.exec_index, s.tid, s.total,
           CAST(floor(power(2, o.k) * f.factor / 2) AS BIGINT) AS below_calls
    FROM scopes s
    CROSS JOIN octaves o
    CROSS JOIN (VALUES (2), (3)) AS f (factor)
    WHERE o.k = 0 OR power(2, o.k - 1) <= s.longest
  ) candidates
),
life AS (SELECT trace_id, pid, exec_index, count(*) AS life_calls FROM calls
         GROUP BY trace_id, pid, exec_index)
SELECT p.trace_id, p.pid, p.exec_index,
       CASE WHEN p.tid = -1 THEN 'process' ELSE 'thread' END AS scope,
       CASE WHEN p.tid = -1 THEN NULL ELSE p.tid END AS tid,
       p.below_calls, p.below_calls / CAST(l.life_calls AS DOUBLE) AS share_of_life,
       coalesce(sum(CASE WHEN v.calls < p.below_calls THEN v.n END), 0) / CAST(p.total AS DOUBLE)
         AS fraction
FROM points p
JOIN life l ON l.trace_id = p.trace_id AND l.pid = p.pid AND l.exec_index = p.exec_index
JOIN by_value v ON v.trace_id = p.trace_id AND v.pid = p.pid AND v.exec_index = p.exec_index
               AND v.tid = p.tid
GROUP BY p.trace_id, p.pid, p.exec_index, p.tid, p.total, p.below_calls, l.life_calls
ORDER BY trace_id, pid, exec_index, scope, tid, below_calls
