-- The calls that returned a block ("links"). A realloc that resized a live block continues that
-- block's allocation (a realloc chain): `continues` is the link it resized, null for a new allocation
-- (malloc and the like, realloc(NULL, n), a realloc of an unknown pointer).
CREATE OR REPLACE TEMPORARY VIEW links AS
SELECT trace_id, pid, exec_index, seq, t_ns, tid, size,
       CASE WHEN resizes THEN released_link END AS continues
FROM call_effects
WHERE NOT is_free AND addr <> 0
