"""Relations written for the user in a DuckDB database (the swapped records and their log):
tables in one transaction, or temporary tables of the connection, kept under their names or
dropped (docs/swapping.md, *All or nothing*). DuckDB's implementation of the engine methods
``write_relations``, ``keep_relations`` and ``discard_relations`` of :class:`DuckDBEngine`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb

from protab.errors import InputError
from protab.sqltools import quote_ident as q

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


def write_relations(con: duckdb.DuckDBPyConnection, outputs: Sequence[tuple[str, str, Sequence[Any]]], *,
                    temporary: bool) -> None:
    """Create the tables ``(name, select, params)`` in one transaction, replacing relations of
    those names in the current schema (with ``temporary``: temporary tables of the connection,
    replacing temporary ones only; a permanent table of the name stays until ``persist_swap``)."""
    db, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    here = f"{q(db)}.{q(schema)}."  # a temporary table of the name (a pending swap) stays as it is
    with transaction(con):
        for name, _, _ in outputs:
            kind = relation_kind(con, name, "temp" if temporary else "here")
            if kind is not None:
                where = _TEMP if temporary else here
                con.execute(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} {where}{q(name)}")
        create = "CREATE TEMP TABLE" if temporary else "CREATE TABLE"
        for name, select, params in outputs:
            target = q(name) if temporary else f"{here}{q(name)}"
            con.execute(f"{create} {target} AS {select}", list(params) if params else None)


def _literal(text: str) -> str:
    """An SQL string literal (COMMENT ON takes no bound parameters)."""
    return "'" + text.replace("'", "''") + "'"


def keep_relations(con: duckdb.DuckDBPyConnection, names: Sequence[str], *, replace: bool, what: str) -> None:
    """Copy the temporary tables ``names`` under the same names into the connection's database
    (current schema), with their column comments (the record keys), and drop the temporary ones,
    all in one transaction. A table or view of that name there is replaced only with ``replace``."""
    for name in names:
        if relation_kind(con, name, "temp") != "table":
            raise InputError(
                f"{what}: this connection has no temporary table named {name!r}; write it first with "
                "swap(..., temporary=True) on the same connection (temporary tables end with it)"
            )
        kind = relation_kind(con, name, "here")
        if kind is not None and not replace:
            raise InputError(f"{what}: a {kind} named {name!r} exists already; pass replace=True or keep it")
    db, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    with transaction(con, what):
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


def discard_relations(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> None:
    """Drop the temporary tables ``names``, if they exist; permanent tables of those names stay."""
    for name in names:
        if relation_kind(con, name, "temp") == "table":
            con.execute(f"DROP TABLE {_TEMP}{q(name)}")


def row_order(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """``rowid`` for a table (its rows in their stored order), None for a view."""
    return "rowid" if relation_kind(con, name) == "table" else None
