"""Inputs and outputs of targeted record swapping (docs/swapping.md): the checks of the microdata
before a swap, run through the engine, and keeping the temporary results of
``swap(..., temporary=True)`` under their names (``persist_swap``) or dropping them
(``discard_swap``). Used by :mod:`protab.swapping`, which re-exports the public names.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from protab.engines import DuckDBEngine, Engine
from protab.errors import InputError, show_values
from protab.sqltools import FLOAT_TYPES
from protab.sqltools import quote_ident as q
from protab.swapping.spec import SwapSpec

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


def as_engine(con: duckdb.DuckDBPyConnection | Engine) -> Engine:
    """The engine the swap's statements run on: an engine as it is, a DuckDB connection in a
    :class:`DuckDBEngine`."""
    return con if isinstance(con, Engine) else DuckDBEngine(con)


# -- checks ---------------------------------------------------------------------------------


def check_names(eng: Engine, table: Any, out: Any, log: Any, replace: bool) -> None:
    """The input exists; ``out`` and ``log`` are names, not the input, not each other, and free
    unless ``replace``."""
    if not isinstance(table, str) or eng.kind(table) is None:
        raise InputError(f"swap: no table or view named {table!r}; register the microdata first")
    for what, name in (("out", out), ("log", log)):
        if name is None:
            continue
        if not isinstance(name, str) or not name:
            raise InputError(f"swap: {what} must be a table name, not {name!r}")
        if name == table:
            raise InputError(f"swap: {what} {name!r} is the input table; give another name")
        kind = eng.kind(name)
        if kind is not None and not replace:
            raise InputError(f"swap: a {kind} named {name!r} exists already; pass replace=True or another {what} name")
    if log is not None and log == out:
        raise InputError(f"swap: out and log are both {out!r}; give two names")


def check_columns(eng: Engine, table: str, s: SwapSpec) -> dict[str, str]:
    """The input's columns (name → type), every column the spec names among them."""
    cols = eng.columns(table)
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


def check_values(eng: Engine, table: str, s: SwapSpec, cols: dict[str, str]) -> None:
    """One scan: records; NULL household ids, geography and given risk; risk variables with one
    category; negative or non-finite given risk; NaN or infinite household ids and geography
    codes (floating-point columns; table building refuses such codes too)."""
    nulls = [s.household, *s.geography, *s.risk]
    floats = [c for c in (s.household, *s.geography) if cols[c].upper() in FLOAT_TYPES]
    exprs = ["count(*)"] + [f"count(*) - count({q(c)})" for c in nulls]
    exprs += [f"count(DISTINCT {q(c)}) + max(CASE WHEN {q(c)} IS NULL THEN 1 ELSE 0 END)" for c in s.risk_variables]
    exprs += [f"count(*) FILTER (WHERE NOT isfinite(CAST({q(c)} AS DOUBLE)) OR {q(c)} < 0)" for c in s.risk]
    exprs += [f"count(*) FILTER (WHERE isnan({q(c)})), count(*) FILTER (WHERE isinf({q(c)}))" for c in floats]
    row = list(eng.rows(f"SELECT {', '.join(exprs)} FROM {q(table)}")[0])
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
    _one_category(eng, table, [c for c, k in counts["ncat"].items() if k <= 1], n)
    badr = [c for c, v in counts["risk"].items() if v]
    if badr:
        raise InputError(
            f"swap: risk columns {show_values(badr)} of table {table!r} hold negative or non-finite values"
        )
    for i, c in enumerate(floats):
        if row[2 * i] or row[2 * i + 1]:
            _not_finite(eng, table, c, "household id" if c == s.household else "geography", *row[2 * i : 2 * i + 2])


def _one_category(eng: Engine, table: str, single: list[str], n: int) -> None:
    if single:
        c = single[0]
        value = eng.rows(f"SELECT {q(c)} FROM {q(table)} LIMIT 1")[0][0]
        raise InputError(
            f"swap: risk variable {c!r} of table {table!r} has one category only ({value!r} in all {n} records)"
            + (f"; so have {show_values(single[1:])}" if len(single) > 1 else "")
            + "; it cannot separate records, drop it from risk_variables"
        )


def _not_finite(eng: Engine, table: str, column: str, what: str, nan: int, inf: int) -> None:
    values = [r[0] for r in eng.rows(
        f"SELECT DISTINCT {q(column)} FROM {q(table)} WHERE NOT isfinite({q(column)}) ORDER BY 1"
    )]
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


# -- keeping or dropping temporary results ----------------------------------------------------


def _check_table_names(names: Sequence[Any], what: str) -> None:
    for name in names:
        if not isinstance(name, str) or not name:
            raise InputError(f"{what}: table names must be non-empty strings, not {name!r}")
    if len(set(names)) < len(names):
        raise InputError(f"{what}: out and log are both {names[0]!r}; give two names")


def persist_swap(con: Any, out: str, log: str | None = None, *, replace: bool = False) -> None:
    """Keep the temporary tables ``out`` (and ``log``) that ``swap(..., temporary=True)`` wrote on
    this connection (a DuckDB connection or an engine): copy them under the same names into the
    connection's database (current schema), with their column comments (the record keys), and
    drop the temporary ones, all in one transaction (on Spark the views stay as they are). A
    table or view of that name there is replaced only with ``replace=True``."""
    names = [n for n in (out, log) if n is not None]
    _check_table_names(names, "persist_swap")
    if not isinstance(replace, bool):
        raise InputError(f"persist_swap: replace must be True or False, not {replace!r}")
    as_engine(con).keep_relations(names, replace=replace, what="persist_swap")


def discard_swap(con: Any, out: str, log: str | None = None) -> None:
    """Drop the temporary tables ``out`` (and ``log``) of ``swap(..., temporary=True)``, if they
    exist; permanent tables of those names are left alone (on Spark the views they replaced come
    back)."""
    names = [n for n in (out, log) if n is not None]
    _check_table_names(names, "discard_swap")
    as_engine(con).discard_relations(names)
