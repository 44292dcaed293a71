-- protab: the same record keys and row rule in Spark SQL (Spark 4), for data platforms that
-- run protab's tables past one machine. Run each statement with spark.sql(...).
--
-- Record key: the first 32 bits of SHA-256(seed || U+001F || id), modulo 2^bits — bit for bit
-- the DuckDB macro protab_record_key of sql/protab.sql.
CREATE OR REPLACE TEMPORARY FUNCTION protab_record_key(seed STRING, id STRING, bits INT)
    RETURNS BIGINT
    RETURN pmod(CAST(conv(substr(sha2(concat(seed, '\u001F', id), 256), 1, 8), 16, 10) AS BIGINT),
                shiftleft(CAST(1 AS BIGINT), bits));

-- Row class of a count n in a p-table with rows imin..imax and period (docs/methods.md §3).
CREATE OR REPLACE TEMPORARY FUNCTION protab_row_class(n BIGINT, imin BIGINT, imax BIGINT, period BIGINT)
    RETURNS BIGINT
    RETURN CASE WHEN n < imin THEN NULL
                WHEN n <= imax THEN n
                ELSE imax - period + 1 + pmod(n - (imax - period + 1), period) END;

-- A protected table is then a join of its cells (count n, key sum ksum) with the p-table's
-- integer key ranges protab_ptable(protab_i, protab_v, protab_klo, protab_khi), as written by
-- protab (PTable.keyspace), e.g. for region x sex with all margins:
--
--   WITH cells AS (
--       SELECT coalesce(region, 'Total') AS region, coalesce(sex, 'Total') AS sex,
--              count(*) AS n, pmod(sum(rkey), 4294967296) AS ck
--       FROM persons GROUP BY GROUPING SETS ((region, sex), (region), (sex), ()))
--   SELECT c.region, c.sex, c.n + coalesce(p.protab_v, 0) AS n_pert
--   FROM cells c LEFT JOIN protab_ptable p
--     ON p.protab_i = protab_row_class(c.n, 0, 8, 1) AND c.ck BETWEEN p.protab_klo AND p.protab_khi
