-- sqlite3 :memory: -init work.sql .quit: an in-memory database filled, indexed, joined, sorted and
-- aggregated, then half deleted and vacuumed.
PRAGMA cache_size = -65536;
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, price REAL, note TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO item SELECT i, 'item-' || i, i % 97, (i * 7919) % 1000 / 10.0, hex(randomblob(24)) FROM n;
CREATE INDEX item_grp ON item(grp, price);
CREATE TABLE grp AS SELECT grp, count(*) AS n, avg(price) AS mean FROM item GROUP BY grp;
SELECT count(*), sum(length(note)) FROM item JOIN grp USING (grp) WHERE price > mean;
SELECT grp, group_concat(name, ',') FROM (SELECT * FROM item ORDER BY note LIMIT 5000) GROUP BY grp LIMIT 3;
DELETE FROM item WHERE id % 3 = 0;
VACUUM;
