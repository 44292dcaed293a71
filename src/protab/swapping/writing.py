"""Inputs and outputs of targeted record swapping (docs/swapping.md): the checks of the microdata
before a swap, the writing of the swapped records and the log (permanent, or temporary tables of
the connection), and keeping temporary results under their final names (``persist_swap``) or
dropping them (``discard_swap``). Used by :mod:`protab.swapping`, which re-exports the public names.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb

from protab._sql import FLOAT_TYPES
from protab._sql import quote_ident as q
from protab.errors import InputError, show_values
from protab.swapping.spec import SwapSpec

_TEMP = "temp.main."  # the schema of a connection's temporary tables


def relation_kind(con: duckdb.DuckDBPyConnection, name: str, where: str = "") -> str | None:
    """'table', 'view' or None for ``name``; ``where``: 'temp' (temporary ones only), 'here' (the
    current database and schema only) or '' (any)."""
    cond = {
        "": "",
        "temp": " AND database_name = 'temp'",
        "here": " AND database_name = current_database() AND schema_name = current_schema()",
    }[where]
    rows = con.execute(
        f"SELECT 'table' FROM duckdb_tables() WHERE table_name = ? AND NOT internal{cond} "
        f"UNION ALL SELECT 'view' FROM duckdb_views() WHERE view_name = ? AND NOT internal{cond}",
        [name, name],
    ).fetchall()
    return str(rows[0][0]) if rows else None


# -- checks ---------------------------------------------------------------------------------


def check_names(con: duckdb.DuckDBPyConnection, table: Any, out: Any, log: Any, replace: bool) -> None:
    """The input exists; ``out`` and ``log`` are names, not the input, not each other, and free
    unless ``replace``."""
    if not isinstance(table, str) or relation_kind(con, table) is None:
        raise InputError(f"swap: no table or view named {table!r}; register the microdata first")
    for what, name in (("out", out), ("log", log)):
        if name is None:
            continue
        if not isinstance(name, str) or not name:
            raise InputError(f"swap: {what} must be a table name, not {name!r}")
        if name == table:
            raise InputError(f"swap: {what} {name!r} is the input table; give another name")
        kind = relation_kind(con, name)
        if kind is not None and not replace:
            raise InputError(f"swap: a {kind} named {name!r} exists already; pass replace=True or another {what} name")
    if log is not None and log == out:
        raise InputError(f"swap: out and log are both {out!r}; give two names")


def check_columns(con: duckdb.DuckDBPyConnection, table: str, s: SwapSpec) -> dict[str, str]:
    """The input's columns (name → type), every column the spec names among them."""
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND NOT internal "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    cols = {str(n): str(t) for n, t in rows}
    need = [
        (s.household, "household"),
        *[(g, "geography") for g in s.geography],
        *[(c, "risk variable") for c in s.risk_variables],
        *[(c, "risk") for c in s.risk],
        *[(c, "similarity variable") for c in s.similar_columns()],
        *[(c, "carry-along") for c in s.carry_along],
    ]
    missing = [f"{c!r} ({what})" for c, what in need if c not in cols]
    if missing:
        raise InputError(
            f"swap: table {table!r} has no column {', '.join(missing)}; its columns are {show_values(list(cols), 12)}"
        )
    if s.return_swapped_id and s.household + "_swapped" in cols:
        raise InputError(
            f"swap: table {table!r} has a column {s.household + '_swapped'!r} already; "
            "return_swapped_id=True would add it"
        )
    for c in s.risk:
        if not any(k in cols[c].upper() for k in ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL")):
            raise InputError(f"swap: risk column {c!r} of table {table!r} has type {cols[c]}, not a number")
    return cols


def check_values(con: duckdb.DuckDBPyConnection, table: str, s: SwapSpec, cols: dict[str, str]) -> None:
    """One scan: records; NULL household ids, geography and given risk; risk variables with one
    category; negative or non-finite given risk; NaN or infinite household ids and geography
    codes (floating-point columns; table building refuses such codes too)."""
    nulls = [s.household, *s.geography, *s.risk]
    floats = [c for c in (s.household, *s.geography) if cols[c].upper() in FLOAT_TYPES]
    exprs = ["count(*)"] + [f"count(*) - count({q(c)})" for c in nulls]
    exprs += [f"count(DISTINCT {q(c)}) + max(CASE WHEN {q(c)} IS NULL THEN 1 ELSE 0 END)" for c in s.risk_variables]
    exprs += [f"count(*) FILTER (WHERE NOT isfinite(CAST({q(c)} AS DOUBLE)) OR {q(c)} < 0)" for c in s.risk]
    exprs += [f"count(*) FILTER (WHERE isnan({q(c)})), count(*) FILTER (WHERE isinf({q(c)}))" for c in floats]
    row = list(con.execute(f"SELECT {', '.join(exprs)} FROM {q(table)}").fetchall()[0])
    n = int(row.pop(0))
    if n == 0:
        raise InputError(f"swap: table {table!r} has no records")
    counts = {}
    for key, names in (("null", nulls), ("ncat", s.risk_variables), ("risk", s.risk)):
        counts[key] = dict(zip(names, row[: len(names)]))
        del row[: len(names)]
    bad = {c: v for c, v in counts["null"].items() if v}
    if bad:
        shown = ", ".join(f"{c!r} ({v} records)" for c, v in bad.items())
        raise InputError(
            f"swap: table {table!r} has missing (NULL) values in {shown}; household ids, geography and "
            "risk must be given for every record"
        )
    _one_category(con, table, [c for c, k in counts["ncat"].items() if k <= 1], n)
    badr = [c for c, v in counts["risk"].items() if v]
    if badr:
        raise InputError(
            f"swap: risk columns {show_values(badr)} of table {table!r} hold negative or non-finite values"
        )
    for i, c in enumerate(floats):
        if row[2 * i] or row[2 * i + 1]:
            _not_finite(con, table, c, "household id" if c == s.household else "geography", *row[2 * i : 2 * i + 2])


def _one_category(con: duckdb.DuckDBPyConnection, table: str, single: list[str], n: int) -> None:
    if single:
        c = single[0]
        value = con.execute(f"SELECT {q(c)} FROM {q(table)} LIMIT 1").fetchall()[0][0]
        raise InputError(
            f"swap: risk variable {c!r} of table {table!r} has one category only ({value!r} in all {n} records)"
            + (f"; so have {show_values(single[1:])}" if len(single) > 1 else "")
            + "; it cannot separate records, drop it from risk_variables"
        )


def _not_finite(con: duckdb.DuckDBPyConnection, table: str, column: str, what: str, nan: int, inf: int) -> None:
    values = [r[0] for r in con.execute(
        f"SELECT DISTINCT {q(column)} FROM {q(table)} WHERE NOT isfinite({q(column)}) ORDER BY 1"
    ).fetchall()]
    parts = [f"NaN in {nan} record(s)"] if nan else []
    parts += [f"infinite in {inf} record(s)"] if inf else []
    raise InputError(
        f"swap: {what} column {column!r} of table {table!r} is {' and '.join(parts)} ({show_values(values)}); "
        f"a {what} must be a finite code (as table building requires): correct or drop those records"
    )


def check_seed(seed: Any) -> str:
    if isinstance(seed, bool) or not isinstance(seed, (str, numbers.Integral)) or (isinstance(seed, str) and not seed):
        raise InputError("swap: seed must be a non-empty string or a whole number")
    return str(seed)


# -- writing --------------------------------------------------------------------------------


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection, what: str = "swap") -> Iterator[None]:
    try:
        con.execute("BEGIN TRANSACTION")
    except duckdb.TransactionException:
        raise InputError(f"{what}: the connection has an open transaction; commit or roll it back first") from None
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    else:
        con.execute("COMMIT")


def write_results(
    con: duckdb.DuckDBPyConnection,
    outputs: Sequence[tuple[str, str, Sequence[Any]]],
    *,
    temporary: bool,
) -> None:
    """Create the tables ``(name, select, params)`` in one transaction, replacing relations of
    those names (with ``temporary``: temporary tables of the connection, replacing temporary ones
    only; a permanent table of the name stays until ``persist_swap``)."""
    with transaction(con):
        for name, _, _ in outputs:
            kind = relation_kind(con, name, "temp" if temporary else "")
            if kind is not None:
                where = _TEMP if temporary else ""
                con.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {where}{q(name)}")
        create = "CREATE TEMP TABLE" if temporary else "CREATE TABLE"
        for name, select, params in outputs:
            con.execute(f"{create} {q(name)} AS {select}", list(params) if params else None)


def _literal(text: str) -> str:
    """An SQL string literal (COMMENT ON takes no bound parameters)."""
    return "'" + text.replace("'", "''") + "'"


def _check_table_names(con: duckdb.DuckDBPyConnection, names: Sequence[Any], what: str) -> None:
    for name in names:
        if not isinstance(name, str) or not name:
            raise InputError(f"{what}: table names must be non-empty strings, not {name!r}")
    if len(set(names)) < len(names):
        raise InputError(f"{what}: out and log are both {names[0]!r}; give two names")


def persist_swap(con: duckdb.DuckDBPyConnection, out: str, log: str | None = None, *, replace: bool = False) -> None:
    """Keep the temporary tables ``out`` (and ``log``) that ``swap(..., temporary=True)`` wrote on
    this connection: copy them under the same names into the connection's database (current
    schema), with their column comments (the record keys), and drop the temporary ones, all in one
    transaction. A table or view of that name there is replaced only with ``replace=True``."""
    names = [n for n in (out, log) if n is not None]
    _check_table_names(con, names, "persist_swap")
    if not isinstance(replace, bool):
        raise InputError(f"persist_swap: replace must be True or False, not {replace!r}")
    for name in names:
        if relation_kind(con, name, "temp") != "table":
            raise InputError(
                f"persist_swap: this connection has no temporary table named {name!r}; write it first with "
                "swap(..., temporary=True) on the same connection (temporary tables end with it)"
            )
        kind = relation_kind(con, name, "here")
        if kind is not None and not replace:
            raise InputError(f"persist_swap: a {kind} named {name!r} exists already; pass replace=True or keep it")
    db, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    with transaction(con, "persist_swap"):
        for name in names:
            target = f"{q(db)}.{q(schema)}.{q(name)}"
            kind = relation_kind(con, name, "here")
            if kind is not None:
                con.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {target}")
            cols = con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = 'temp' AND table_name = ? "
                "ORDER BY column_index",
                [name],
            ).fetchall()
            order = "" if any(c == "rowid" for c, _ in cols) else " ORDER BY rowid"  # the written order
            con.execute(f"CREATE TABLE {target} AS SELECT * FROM {_TEMP}{q(name)}{order}")
            for col, comment in cols:
                if comment is not None:
                    con.execute(f"COMMENT ON COLUMN {target}.{q(col)} IS {_literal(str(comment))}")
            con.execute(f"DROP TABLE {_TEMP}{q(name)}")


def discard_swap(con: duckdb.DuckDBPyConnection, out: str, log: str | None = None) -> None:
    """Drop the temporary tables ``out`` (and ``log``) of ``swap(..., temporary=True)``, if they
    exist; permanent tables of those names are left alone."""
    names = [n for n in (out, log) if n is not None]
    _check_table_names(con, names, "discard_swap")
    for name in names:
        if relation_kind(con, name, "temp") == "table":
            con.execute(f"DROP TABLE {_TEMP}{q(name)}")
