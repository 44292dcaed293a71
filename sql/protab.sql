-- protab: SQL macros for DuckDB.
--
-- Load into any DuckDB database with the plain CLI:   .read sql/protab.sql
-- (`protab macros --read` prints that line with this installation's path). The macros are
-- temporary (they belong to the session that reads the file) and need no write access: a
-- database opened read-only (duckdb -readonly protab.duckdb) takes them too, and ckm() reads
-- the p-table installed in the file. The Python package runs this same file at the start of
-- every Session (a read-write Session keeps the macros in the database, protab's p-table
-- tables too), so the CLI and the Python API compute record keys, row classes and perturbed
-- counts with the same SQL.
--
-- Cell keys are exact integers (docs/design.md, idea 4): a record key is an unsigned integer below
-- a modulus M (2^bits, or 10^d for decimal keys with d digits); a cell key is the sum of its
-- records' keys modulo M. Integer sums do not depend on summation order, so every engine and
-- thread count gives the same cell key.

-- Record key: a keyed hash of (secret seed, record id). The first 32 bits of
-- SHA-256(seed || U+001F || id), reduced modulo 2^bits (1 <= bits <= 32).
-- The same value in Spark SQL:
--   pmod(CAST(conv(substr(sha2(concat(seed, '\u001F', CAST(id AS STRING)), 256), 1, 8), 16, 10)
--        AS BIGINT), CAST(pow(2, bits) AS BIGINT))
CREATE OR REPLACE TEMP MACRO protab_record_key(seed, id, bits) AS
    CAST(CAST('0x' || substr(sha256(CAST(seed AS VARCHAR) || chr(31) || CAST(id AS VARCHAR)), 1, 8)
              AS UBIGINT)
         % (CAST(1 AS UBIGINT) << CAST(bits AS INTEGER)) AS UBIGINT);

-- Row class of a count n in a p-table with rows imin..imax and period (docs/methods.md §3):
-- n itself up to imax, then the last `period` rows repeat. NULL (no perturbation) below imin,
-- e.g. for zero counts when the p-table has no row 0.
CREATE OR REPLACE TEMP MACRO protab_row_class(n, imin, imax, period) AS
    CASE WHEN n < imin THEN NULL
         WHEN n <= imax THEN n
         ELSE imax - period + 1 + ((n - (imax - period + 1)) % period) END;

-- Perturbed count by the cell key method from the installed p-table.
--   SELECT region, sex, ckm(count(*), sum(rkey)) AS n FROM persons GROUP BY ALL;
-- n: the cell's count; ksum: the sum of its records' keys (any integer; reduced modulo M here).
-- The p-table is installed by `protab ptable install` (or Session.install_ptable) as three
-- tables, which that install and every read-write Session create (src/protab/engines/
-- duckdb_ptable.py; this file creates none, so that it runs in a read-only database):
--   protab_ptable(protab_i BIGINT, protab_v BIGINT, protab_klo HUGEINT, protab_khi HUGEINT):
--       for row class i, the noise v of the cell keys klo..khi (an exact partition of 0..M-1
--       for every i),
--   protab_ptable_meta(imin BIGINT, imax BIGINT, period BIGINT, modulus HUGEINT): the row rule
--       and the key modulus M, and
--   protab_ptable_lookup(imin, imax, period, modulus, width, classes BIGINT, lo INTEGER[],
--       hi INTEGER[], ends BIGINT[], noise INTEGER[]): the same in one row of lists that the
--       macro indexes directly
--       (src/protab/ptable/_install.py): the key range cut into segments at every interval
--       start of every row class, noise[segment * classes + class - imin + 1]; the segment of
--       a key from its bucket of `width` keys: lo[b] - 1 plus the segment starts inside the
--       bucket up to the key (none for most buckets).
-- A key below 0 or a count below imin (e.g. zero counts when the p-table has no row 0) keeps
-- its count. No subquery depends on the cell (no join per cell, no search over intervals), so
-- n stays outside any subquery and count(*) binds to the caller's GROUP BY. Without an
-- installed p-table ckm raises an error rather than return an unprotected count: protab's
-- own when the tables are empty, DuckDB's "Table with name protab_ptable_lookup does not
-- exist" in a database that never had them.

-- a key sum modulo m (a BIGINT): in BIGINT arithmetic when the sum fits (HUGEINT division is slow)
CREATE OR REPLACE TEMP MACRO protab_key_mod(ksum, m) AS
    CASE WHEN (ksum) BETWEEN -9223372036854775808 AND 9223372036854775807
         THEN CAST(ksum AS BIGINT) % m ELSE CAST((ksum) % m AS BIGINT) END;

-- the 0-based segment of key k (0 <= k < M) in the lists of protab_ptable_lookup: lo[b] - 1
-- plus the segments that start inside k's bucket b at or before k, i.e. whose previous segment
-- ends (ends[j]: the last key of segment j) before k: none in most buckets, else usually one
CREATE OR REPLACE TEMP MACRO protab_ptable_segment(k, width, lo, hi, ends) AS
    lo[k // width + 1] - 1
    + CASE WHEN hi[k // width + 1] = lo[k // width + 1] THEN 0
           WHEN hi[k // width + 1] = lo[k // width + 1] + 1 THEN CAST(ends[lo[k // width + 1]] < k AS INTEGER)
           ELSE list_position(list_sort(list_append(ends[lo[k // width + 1]:hi[k // width + 1] - 1], k)), k) - 1
      END;

-- the noise of row class c (0-based, NULL for none) and key k (NULL outside 0..M-1)
CREATE OR REPLACE TEMP MACRO protab_ptable_noise(c, k, width, classes, lo, hi, ends, noise) AS
    CASE WHEN k >= 0 THEN noise[protab_ptable_segment(k, width, lo, hi, ends) * classes + c + 1] END;

-- `ptable` names the lookup table; it is a parameter (with its default) so that DuckDB binds
-- the table when ckm is called, not when the macro is made: the file then runs in a database
-- without the tables, a read-only one included.
CREATE OR REPLACE TEMP MACRO ckm(n, ksum, ptable := 'protab_ptable_lookup') AS
    CASE WHEN (SELECT count(*) FROM query_table(ptable)) <> 1
         THEN error('protab: no p-table is installed in this database; run '
                    || '`protab ptable install` (or Session.install_ptable) first')
         ELSE n + coalesce(
             protab_ptable_noise(
                 protab_row_class(n,
                                  (SELECT imin FROM query_table(ptable)),
                                  (SELECT imax FROM query_table(ptable)),
                                  (SELECT period FROM query_table(ptable)))
                 - (SELECT imin FROM query_table(ptable)),
                 protab_key_mod(ksum, (SELECT modulus FROM query_table(ptable))),
                 (SELECT width FROM query_table(ptable)),
                 (SELECT classes FROM query_table(ptable)),
                 (SELECT lo FROM query_table(ptable)),
                 (SELECT hi FROM query_table(ptable)),
                 (SELECT ends FROM query_table(ptable)),
                 (SELECT noise FROM query_table(ptable))),
             0)
    END;

-- Weighted count published as the perturbed count times the cell's mean weight (the cellKey
-- and tau-ARGUS convention):  ckm_weighted(count(*), sum(rkey), sum(weight)).
CREATE OR REPLACE TEMP MACRO ckm_weighted(n, ksum, wsum, ptable := 'protab_ptable_lookup') AS
    CASE WHEN n = 0 THEN 0.0 ELSE ckm(n, ksum, ptable := ptable) * ((wsum) / n) END;

-- Magnitude tables (docs/methods.md §1.8 and §6.2): the largest contributions of a group and
-- the primary sensitivity rules over them, e.g.
--   SELECT nace, sum(turnover) AS total, protab_top(turnover, 2) AS top,
--          protab_p_rule(protab_top(turnover, 2), sum(turnover), 10) AS sensitive
--   FROM enterprises GROUP BY ALL;
-- protab_top(x, k): the k values of largest |x| in the group, largest first (an aggregate).
CREATE OR REPLACE TEMP MACRO protab_top(x, k) AS
    list_transform(max({'a': abs(CAST(x AS DOUBLE)), 'x': CAST(x AS DOUBLE)}, k), lambda e: e.x);
-- the sum of the n first values of a top list (0 for an empty list)
CREATE OR REPLACE TEMP MACRO protab_largest(top, n) AS
    coalesce(list_sum(list_slice(top, 1, n)), 0);
-- the share of the n largest contributions in the total (0 when the total is 0)
CREATE OR REPLACE TEMP MACRO protab_dominance_ratio(top, total, n) AS
    CASE WHEN total = 0 THEN 0.0 ELSE protab_largest(top, n) / total END;
-- tau-ARGUS's weighted contributions (Hundepool et al. 2012): of the n largest records, each
-- counts with its weight until the weights add up to n, the last one with the remainder
CREATE OR REPLACE TEMP MACRO protab_weighted_largest(xs, ws, n) AS
    coalesce(list_sum(list_transform(list_slice(xs, 1, n), lambda x, i:
        x * greatest(0, least(ws[i], n - coalesce(list_sum(list_slice(ws, 1, i - 1)), 0))))), 0);
-- minimum frequency: fewer than n contributors (and at least one)
CREATE OR REPLACE TEMP MACRO protab_frequency_rule(contributors, n) AS
    contributors > 0 AND contributors < n;
-- (n, k)-dominance: the n largest contributions are k % of the total or more
--   (tau-ARGUS: more than k %: protab_dominance_ratio(top, total, n) > k / 100)
CREATE OR REPLACE TEMP MACRO protab_dominance_rule(top, total, n, k) AS
    protab_dominance_ratio(top, total, n) >= CAST(k AS DOUBLE) / 100;
-- p% rule: total - x1 - x2 < p/100 * x1, written with the shares d1, d2 of the largest one and
-- two contributions as |1 - d2| < |p/100 * d1| (GaussSuppression); never for a zero total
CREATE OR REPLACE TEMP MACRO protab_p_rule(top, total, p) AS
    abs(1 - protab_dominance_ratio(top, total, 2))
        < abs(CAST(p AS DOUBLE) / 100 * protab_dominance_ratio(top, total, 1));
-- the prior/posterior (p, q) form: p/q in place of p/100
CREATE OR REPLACE TEMP MACRO protab_pq_rule(top, total, p, q) AS
    abs(1 - protab_dominance_ratio(top, total, 2))
        < abs(CAST(p AS DOUBLE) / q * protab_dominance_ratio(top, total, 1));
