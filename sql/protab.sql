-- protab: SQL macros for DuckDB.
--
-- Load into any DuckDB database with the plain CLI:   .read sql/protab.sql
-- The Python package runs this same file at the start of every Session, so the CLI and the
-- Python API compute record keys, row classes and perturbed counts with the same SQL.
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
CREATE OR REPLACE MACRO protab_record_key(seed, id, bits) AS
    CAST(CAST('0x' || substr(sha256(CAST(seed AS VARCHAR) || chr(31) || CAST(id AS VARCHAR)), 1, 8)
              AS UBIGINT)
         % (CAST(1 AS UBIGINT) << CAST(bits AS INTEGER)) AS UBIGINT);

-- Row class of a count n in a p-table with rows imin..imax and period (docs/methods.md §3):
-- n itself up to imax, then the last `period` rows repeat. NULL (no perturbation) below imin,
-- e.g. for zero counts when the p-table has no row 0.
CREATE OR REPLACE MACRO protab_row_class(n, imin, imax, period) AS
    CASE WHEN n < imin THEN NULL
         WHEN n <= imax THEN n
         ELSE imax - period + 1 + ((n - (imax - period + 1)) % period) END;

-- Perturbed count by the cell key method from the installed p-table.
--   SELECT region, sex, ckm(count(*), sum(rkey)) AS n FROM persons GROUP BY ALL;
-- n: the cell's count; ksum: the sum of its records' keys (any integer; reduced modulo M here).
-- The p-table is installed by `protab ptable install` (or Session.install_ptable) as
--   protab_ptable(protab_i, protab_v, protab_klo, protab_khi): for row class i, the noise v of
--       the cell keys klo..khi (an exact partition of 0..M-1 for every i), and
--   protab_ptable_meta(imin, imax, period, modulus): the row rule and the key modulus M.
-- The lookup collects, for the cell key, the noise of every row class (one interval per class
-- holds it) and picks the cell's class; n stays outside the subquery so that count(*) binds to
-- the caller's GROUP BY. Without an installed p-table ckm raises an error rather than return
-- an unprotected count.
CREATE TABLE IF NOT EXISTS protab_ptable (
    protab_i BIGINT, protab_v BIGINT, protab_klo HUGEINT, protab_khi HUGEINT);
CREATE TABLE IF NOT EXISTS protab_ptable_meta (
    imin BIGINT, imax BIGINT, period BIGINT, modulus HUGEINT);

CREATE OR REPLACE MACRO ckm(n, ksum) AS
    CASE WHEN (SELECT count(*) FROM protab_ptable_meta) <> 1
         THEN error('protab: no p-table is installed in this database; run '
                    || '`protab ptable install` (or Session.install_ptable) first')
         ELSE n + coalesce(
             (SELECT list(protab_v ORDER BY protab_i) FROM protab_ptable
               WHERE (ksum) % (SELECT modulus FROM protab_ptable_meta)
                     BETWEEN protab_klo AND protab_khi)
             [protab_row_class(n,
                               (SELECT imin FROM protab_ptable_meta),
                               (SELECT imax FROM protab_ptable_meta),
                               (SELECT period FROM protab_ptable_meta))
              - (SELECT imin FROM protab_ptable_meta) + 1],
             0)
    END;

-- Weighted count published as the perturbed count times the cell's mean weight (the cellKey
-- and tau-ARGUS convention):  ckm_weighted(count(*), sum(rkey), sum(weight)).
CREATE OR REPLACE MACRO ckm_weighted(n, ksum, wsum) AS
    CASE WHEN n = 0 THEN 0.0 ELSE ckm(n, ksum) * ((wsum) / n) END;
