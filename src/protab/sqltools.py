"""SQL helpers at the ground floor: identifier quoting, DuckDB's type names, code columns, and
the text of protab's SQL files (``sql/``). No user string ever becomes SQL text except through
:func:`quote_ident`; every value is a bound parameter."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: DuckDB's floating-point types (NaN, -0.0: codes and decimals need care)
FLOAT_TYPES = ("FLOAT", "DOUBLE", "REAL")


def quote_ident(name: str) -> str:
    """Quote an SQL identifier (double quotes, inner quotes doubled)."""
    return '"' + str(name).replace('"', '""') + '"'


def code_sql(column: str, dtype: str) -> str:
    """A code column in SQL as every reader of codes sees it: NaN of a floating-point column
    is NULL (missing), and adding a zero of the same type makes −0.0 the code 0.0 (one value,
    not two codes), leaving every other value as it is."""
    q = quote_ident(column)
    kind = dtype.upper()
    if kind in FLOAT_TYPES:
        return f"CASE WHEN isnan({q}) THEN NULL ELSE {q} + CAST(0 AS {kind}) END"
    return q


def sql_text(name: str = "protab.sql") -> str:
    """The text of a file of protab's ``sql/`` folder (inside the wheel, or the source tree)."""
    try:
        res = resources.files("protab").joinpath("sql").joinpath(name)
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError):  # pragma: no cover
        pass
    here = Path(__file__).resolve().parents[2] / "sql" / name
    return here.read_text(encoding="utf-8")
