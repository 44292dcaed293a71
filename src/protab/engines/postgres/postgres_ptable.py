"""Install a count p-table in a PostgreSQL database for the SQL function ``ckm(count(*), sum(rkey))``,
the twin of DuckDB's macro (sql/protab.sql, :mod:`protab.engines.duckdb_ptable`): the analyst's
``SELECT sex, ckm(count(*), sum(rkey)) FROM persons GROUP BY sex`` in psql gives the counts of
``Session.cell_key`` with the same records and p-table.

:func:`install_ptable` writes, in the schema of the session (``current_schema()``, e.g.
``public``), in one transaction that replaces what was installed before:

- ``protab_ptable(protab_i, protab_v, protab_klo, protab_khi)`` and ``protab_ptable_meta(imin,
  imax, period, modulus)`` (BIGINT): for row class i the noise v of the cell keys klo..khi, an
  exact partition of 0..M-1 for every class, and the row rule and key modulus M — the
  interval relations DuckDB writes too, for readers of the published mechanism;
- the functions ``ckm(n bigint, ksum numeric) RETURNS bigint`` and ``ckm_weighted(n, ksum,
  wsum double precision) RETURNS double precision`` (LANGUAGE sql, persistent: every session of
  the database sees them).

``ckm``'s body holds the lookup of DuckDB's macro as constants (:func:`lookup_layout`: the
noise of every segment of the key range and row class, ``noise[segment * classes + class -
imin + 1]``), and finds the segment of key k by ``width_bucket`` over the segment starts (a
binary search). A body of one expression without a subquery is inlined into the analyst's
query by PostgreSQL's planner: the constants are read once per query, not per cell (a function
reading the tables ran a query per cell, ten times slower than the GROUP BY). It computes what
the macro does, in exact integers: ``k = round(ksum) mod M`` (``mod`` of a NUMERIC has the sign
of the dividend, as DuckDB's ``%``; a DECIMAL cast to BIGINT rounds half away from zero, as
``round``), the row class of n (n up to imax, then the last ``period`` rows repeat; none below
imin), and n plus the noise of that class and segment; a count below imin, a NULL key sum or a
negative key keeps its count. Before any install ``ckm`` does not exist (PostgreSQL's "function
ckm(bigint, numeric) does not exist"), never an unprotected count. The functions are STABLE: a
re-install changes their results (PostgreSQL invalidates the plans that inlined them).

The p-table's rows are written as the published mechanism (as on DuckDB, where the lookup is a
table too); no message of this module shows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from protab.engines.duckdb_ptable import check_install_arguments, lookup_layout
from protab.engines.postgres.postgres_support import csv_batches, require_psycopg
from protab.errors import InputError
from protab.sqltools import quote_ident

if TYPE_CHECKING:  # pragma: no cover
    from protab.ptable import PTable

#: the error of ckm() without a p-table, as DuckDB's macro words it
NO_PTABLE = ("no p-table is installed in this database; run `protab ptable install` "
             "(or Session.install_ptable) first")

#: the functions install_ptable makes (a call of one before any install: PostgreSQL's
#: "function ckm(bigint, numeric) does not exist")
FUNCTIONS = ("ckm", "ckm_weighted")

#: most entries (segments × row classes) of the noise constant of ckm()'s body, which the
#: planner reads once per query that calls it (DuckDB's lookup allows 2^26)
MAX_ENTRIES = 2**22

_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.protab_ptable (
    protab_i bigint NOT NULL, protab_v bigint NOT NULL, protab_klo bigint NOT NULL,
    protab_khi bigint NOT NULL, PRIMARY KEY (protab_i, protab_klo));
CREATE TABLE IF NOT EXISTS {s}.protab_ptable_meta (
    imin bigint NOT NULL, imax bigint NOT NULL, period bigint NOT NULL, modulus bigint NOT NULL);
"""

#: the body of ckm(n, ksum): one expression (inlined by the planner), the p-table in constants
_CKM = """SELECT n + coalesce(CASE WHEN mod(round(ksum), {modulus}) >= 0 THEN ('{noise}'::integer[])[
    (width_bucket(CAST(mod(round(ksum), {modulus}) AS bigint), '{starts}'::bigint[]) - 1) * {classes}
    + CASE WHEN n < {imin} THEN NULL WHEN n <= {imax} THEN n
           ELSE {imax} - {period} + 1 + ((n - ({imax} - {period} + 1)) % {period}) END
    - {imin} + 1] END, 0)"""

#: ckm_weighted: the perturbed count times the cell's mean weight (DuckDB's macro, in doubles)
_CKM_WEIGHTED = "SELECT CASE WHEN n = 0 THEN 0.0 ELSE {s}.ckm(n, ksum) * (wsum / n) END"


def ckm_body(ptable: PTable, modulus: int) -> str:
    """The body of ``ckm`` for ``ptable`` and key modulus ``modulus`` (protab's own numbers only)."""
    row = lookup_layout(ptable, modulus)
    noise = np.asarray(row["noise"])
    if noise.size > MAX_ENTRIES:
        raise InputError("install_ptable: the p-table has too many distinct key intervals for the ckm() function "
                         "on PostgreSQL with this key modulus (use Session.cell_key, or fewer key bits)")
    ends = np.asarray(row["ends"], dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return _CKM.format(modulus=int(modulus), classes=int(row["classes"]), imin=int(row["imin"]),
                       imax=int(row["imax"]), period=int(row["period"]),
                       noise=_array(noise), starts=_array(starts))


def _array(values: np.ndarray) -> str:
    """Integers as the text of a PostgreSQL array (inside a string literal of the body)."""
    return "{" + ",".join(map(str, values.astype(np.int64).tolist())) + "}"


def _statements(s: str, body: str) -> list[tuple[str, list[Any]]]:
    """The functions' definitions in schema ``s`` (a quoted name), each body a bound value."""
    return [
        (f"CREATE OR REPLACE FUNCTION {s}.ckm(n bigint, ksum numeric) RETURNS bigint LANGUAGE sql "
         "STABLE PARALLEL SAFE AS %s", [body]),
        (f"CREATE OR REPLACE FUNCTION {s}.ckm_weighted(n bigint, ksum numeric, wsum double precision) "
         "RETURNS double precision LANGUAGE sql STABLE PARALLEL SAFE AS %s", [_CKM_WEIGHTED.format(s=s)]),
    ]


def install_ptable(con: Any, where: str, ptable: PTable, modulus: int) -> None:
    """Install ``ptable`` for ``ckm()``/``ckm_weighted()`` in the database of the psycopg
    connection ``con`` (at ``where``, for messages) for record keys below ``modulus``, in the
    session's current schema, replacing what was installed before in one transaction (a
    failure leaves it as it was)."""
    check_install_arguments(ptable, modulus)
    m = int(modulus)
    body = ckm_body(ptable, m)
    ks = ptable.keyspace(m).sort(["i", "klo"])
    imin, imax, period = int(ks["i"].min()), int(ptable.imax), int(ptable.period)  # type: ignore[arg-type]
    intervals = ks.select("i", "v", "klo", "khi").to_arrow().cast(
        pa.schema([(c, pa.int64()) for c in ("i", "v", "klo", "khi")]))
    psycopg = require_psycopg()
    schema = None
    try:
        schema = con.execute("SELECT current_schema()").fetchone()[0]
        if schema is None:
            raise InputError("install_ptable: PostgreSQL has no schema to install the p-table in (no schema of the "
                             "search_path exists); create one or set search_path")
        s = quote_ident(schema)
        with con.transaction():
            con.execute(_TABLES.format(s=s))
            con.execute(f"DELETE FROM {s}.protab_ptable")
            con.execute(f"DELETE FROM {s}.protab_ptable_meta")
            with con.cursor().copy(f"COPY {s}.protab_ptable (protab_i, protab_v, protab_klo, protab_khi) "
                                   "FROM STDIN (FORMAT csv)") as copy:
                for chunk in csv_batches(intervals):
                    copy.write(chunk)
            con.execute(f"INSERT INTO {s}.protab_ptable_meta VALUES (%s, %s, %s, %s)", [imin, imax, period, m])
            for sql, params in _statements(s, body):
                con.execute(sql, params)
    except psycopg.Error as exc:  # the first line only: PostgreSQL's CONTEXT of a COPY may quote rows
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"install_ptable: PostgreSQL at {where} refused to install the p-table in schema "
                         f"{schema!r} ({first}); the user needs the CREATE privilege on the schema, and the tables "
                         "protab_ptable and protab_ptable_meta there must be protab's") from None


def ckm_refusal(exc: BaseException) -> str | None:
    """The protab message of a PostgreSQL error of a call of ckm()/ckm_weighted() where none is
    installed (PostgreSQL: no such function); None for any other error."""
    from psycopg import errors

    text = str(exc).strip()
    if isinstance(exc, errors.UndefinedFunction) and any(text.startswith(f"function {f}(") for f in FUNCTIONS):
        return NO_PTABLE
    return None
