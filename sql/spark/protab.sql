-- protab: the same record keys, row rule and sensitivity-rule functions in Spark SQL (Spark 4), for data platforms that
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

-- Sensitivity rules over top-k lists (docs/methods.md §6), the twins of sql/protab.sql's macros:
-- NULL elements are skipped and a NULL list sums to 0, as DuckDB's list_sum does.
-- the sum of the n first values of a top list (0 for an empty list)
CREATE OR REPLACE TEMPORARY FUNCTION protab_largest(top ARRAY<DOUBLE>, n BIGINT)
    RETURNS DOUBLE
    RETURN coalesce(aggregate(filter(slice(top, 1, CAST(least(n, 2147483647) AS INT)), x -> x IS NOT NULL),
                              0D, (acc, x) -> acc + x), 0D);

-- the share of the n largest contributions in the total (0 when the total is 0)
CREATE OR REPLACE TEMPORARY FUNCTION protab_dominance_ratio(top ARRAY<DOUBLE>, total DOUBLE, n BIGINT)
    RETURNS DOUBLE
    RETURN CASE WHEN total = 0 THEN 0D ELSE protab_largest(top, n) / total END;

-- tau-ARGUS's weighted contributions: of the n largest records, each counts with its weight
-- until the weights add up to n, the last one with the remainder (i counts from 0 here)
CREATE OR REPLACE TEMPORARY FUNCTION protab_weighted_largest(xs ARRAY<DOUBLE>, ws ARRAY<DOUBLE>, n BIGINT)
    RETURNS DOUBLE
    RETURN coalesce(aggregate(filter(transform(slice(xs, 1, CAST(least(n, 2147483647) AS INT)), (x, i) ->
        x * greatest(0D, least(try_element_at(ws, i + 1),
                               n - aggregate(filter(slice(ws, 1, i), y -> y IS NOT NULL), 0D, (acc, y) -> acc + y)))),
        v -> v IS NOT NULL), 0D, (acc, v) -> acc + v), 0D);

-- minimum frequency: fewer than n contributors (and at least one)
CREATE OR REPLACE TEMPORARY FUNCTION protab_frequency_rule(contributors BIGINT, n BIGINT)
    RETURNS BOOLEAN
    RETURN contributors > 0 AND contributors < n;
