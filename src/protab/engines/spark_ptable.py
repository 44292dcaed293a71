"""Install a count p-table in a SparkSession for the SQL function ``ckm(count(*), sum(rkey))``,
the twin of DuckDB's macro (sql/protab.sql, :mod:`protab.engines.duckdb_ptable`) and of
PostgreSQL's function (:mod:`protab.engines.postgres.postgres_ptable`): an analyst's
``SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY sex`` in Spark SQL gives the counts
of ``Session.cell_key`` with the same records and p-table.

:func:`install_ptable` makes, in the SparkSession (classic or Connect), replacing what was
installed before:

- the temporary views ``protab_ptable(protab_i, protab_v, protab_klo, protab_khi)`` and
  ``protab_ptable_meta(imin, imax, period, modulus)``: the published mechanism, as DuckDB and
  PostgreSQL write it;
- the temporary SQL functions (Spark 4's ``CREATE TEMPORARY FUNCTION … RETURN``) ``ckm(n
  BIGINT, ksum DECIMAL(38, 0)) RETURNS BIGINT`` and ``ckm_weighted(n, ksum, wsum DOUBLE)
  RETURNS DOUBLE``, for the SQL of this SparkSession (temporary functions end with it).

``ckm``'s body holds DuckDB's lookup as constants (:func:`~protab.engines.duckdb_ptable.lookup_layout`:
the noise of every segment of the key range and row class); the segment of key k is the
number of segment starts at or below k (a ``filter`` over the starts, a few dozen for the usual
p-tables). It computes what the macro computes: k = ksum mod M (Spark's ``%`` has the sign of
the dividend, as DuckDB's), the row class of n (n up to imax, then the last ``period`` rows
repeat; none below imin), n plus the noise of that class and segment; a count below imin, a
NULL key sum or a negative one keeps its count. Before any install ``ckm`` does not exist
(Spark's UNRESOLVED_ROUTINE), never an unprotected count. No message of this module shows the
p-table's rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from protab.engines.duckdb_ptable import check_install_arguments, lookup_layout
from protab.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

#: most entries (segments × row classes) of the noise constant of ckm()'s body (SQL text)
MAX_ENTRIES = 2**20

_CKM = """n + coalesce(CASE WHEN ksum % {modulus} >= 0 THEN element_at(array({noise}),
    CAST((size(filter(array({starts}), s -> s <= ksum % {modulus})) - 1) * {classes}
    + CASE WHEN n < {imin} THEN NULL WHEN n <= {imax} THEN n
           ELSE {imax} - {period} + 1 + pmod(n - ({imax} - {period} + 1), {period}) END
    - {imin} + 1 AS INT)) END, 0)"""

_CKM_WEIGHTED = "CASE WHEN n = 0 THEN 0.0D ELSE ckm(n, ksum) * (wsum / n) END"


def ckm_body(ptable: PTable, modulus: int) -> str:
    """The body of ``ckm`` for ``ptable`` and key modulus ``modulus`` (protab's own numbers only)."""
    row = lookup_layout(ptable, modulus)
    noise = np.asarray(row["noise"], dtype=np.int64)
    if noise.size > MAX_ENTRIES:
        raise InputError("install_ptable: the p-table has too many distinct key intervals for the ckm() function "
                         "on Spark with this key modulus (use Session.cell_key, or fewer key bits)")
    ends = np.asarray(row["ends"], dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return _CKM.format(modulus=int(modulus), classes=int(row["classes"]), imin=int(row["imin"]),
                       imax=int(row["imax"]), period=int(row["period"]),
                       noise=_list(noise, "INT"), starts=_list(starts, "BIGINT"))


def _list(values: np.ndarray, kind: str) -> str:
    """Integers as the elements of a Spark ``array(…)`` of ``kind``."""
    return ", ".join(f"CAST({v} AS {kind})" if k == 0 else str(v) for k, v in enumerate(values.tolist()))


def install_ptable(spark: Any, ptable: PTable, modulus: int) -> None:
    """Install ``ptable`` for ``ckm()``/``ckm_weighted()`` in ``spark`` (a SparkSession, classic
    or Connect) for record keys below ``modulus``, replacing what was installed before."""
    check_install_arguments(ptable, modulus)
    m = int(modulus)
    body = ckm_body(ptable, m)
    ks = ptable.keyspace(m).sort(["i", "klo"])
    intervals = ks.select(protab_i="i", protab_v="v", protab_klo="klo", protab_khi="khi").to_pandas()
    meta = [(int(ks["i"].min()), int(ptable.imax), int(ptable.period), m)]  # type: ignore[arg-type]
    spark.createDataFrame(intervals).createOrReplaceTempView("protab_ptable")
    spark.createDataFrame(meta, "imin BIGINT, imax BIGINT, period BIGINT, modulus BIGINT") \
        .createOrReplaceTempView("protab_ptable_meta")
    spark.sql("CREATE OR REPLACE TEMPORARY FUNCTION ckm(n BIGINT, ksum DECIMAL(38, 0)) RETURNS BIGINT "
              f"RETURN {body}")
    spark.sql("CREATE OR REPLACE TEMPORARY FUNCTION ckm_weighted(n BIGINT, ksum DECIMAL(38, 0), wsum DOUBLE) "
              f"RETURNS DOUBLE RETURN {_CKM_WEIGHTED}")
