-- Spark's text of sql/views/40-link_roots.sql (a recursive CTE: one step per realloc of the longest
-- chain, and Spark runs a job per step). Each link with the link that started its allocation (root),
-- by pointer jumping: each link first points at the link it continues (a start at itself: `done`);
-- each step replaces a pointer not done by the pointer of the link it points at, which doubles how far
-- up the chain it reaches, so a chain of n reallocs takes about log2(n) steps.
-- SQL has no loop both engines run, so scripts/sql-figures.py loops: the first statement with
-- ${step} = 0; then, while the third counts a row not done, the second with ${next} = ${step} + 1
-- (each step a view of its own: it reads the one before it); the last with the final ${step}.
CREATE OR REPLACE TEMPORARY VIEW link_roots_${step} AS
SELECT trace_id, pid, exec_index, seq, coalesce(continues, seq) AS root, continues IS NULL AS done
FROM links;

CREATE OR REPLACE TEMPORARY VIEW link_roots_${next} AS
SELECT trace_id, pid, exec_index, seq, root, done FROM link_roots_${step} WHERE done
UNION ALL
SELECT r.trace_id, r.pid, r.exec_index, r.seq, p.root, p.done
FROM link_roots_${step} r
JOIN link_roots_${step} p ON p.trace_id = r.trace_id AND p.pid = r.pid AND p.exec_index = r.exec_index
                         AND p.seq = r.root
WHERE NOT r.done;

SELECT count(*) AS not_done FROM link_roots_${step} WHERE NOT done;

CREATE OR REPLACE TEMPORARY VIEW link_roots AS
SELECT trace_id, pid, exec_index, seq, root FROM link_roots_${step}
