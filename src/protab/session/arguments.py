"""Checks of the Session's arguments and the names it uses (no engine, no SQL)."""

from __future__ import annotations

import decimal
import math
import numbers
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from protab.engines.duckdb_engine import DEFAULT_DATABASE as _DUCKDB_DEFAULT
from protab.errors import InputError, show_values

#: The database file a Session opens when none is named (in the working directory): the DuckDB engine's
DEFAULT_DATABASE = _DUCKDB_DEFAULT

#: A Session refuses table requests estimated to publish more cells than this
#: (``Session(max_cells=...)`` raises or lifts it).
DEFAULT_MAX_CELLS = 100_000_000

#: DuckDB's names of numeric and integer types (Spark's are given in DuckDB's names)
NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|REAL|DECIMAL.*)$"
)
INTEGER = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$")


def missing_columns(table: str, cols: dict[str, str], columns: Sequence[str], what: str) -> None:
    """InputError naming the ``columns`` that table ``table`` (columns ``cols``) lacks."""
    missing = [c for c in columns if c not in cols]
    if missing:
        raise InputError(
            f"table {table!r} has no {what} {show_values(missing)}; its columns are "
            f"{show_values(list(cols), 12)}"
        )


def check_seed(table: str, seed: object) -> str:
    """The seed as the text that is hashed; InputError (never showing the seed) unless it
    is a string with non-whitespace content or non-empty bytes."""
    if isinstance(seed, (bytes, bytearray)):
        if not seed:
            raise InputError(
                f"add_record_keys (table {table!r}): the seed is empty bytes; give a non-empty "
                "secret seed"
            )
        return bytes(seed).hex()
    if not isinstance(seed, str):
        raise InputError(
            f"add_record_keys (table {table!r}): the seed must be a string (or bytes), not "
            f"{type(seed).__name__}; pass the secret as text, e.g. seed=str(...) — the command "
            "line reads it as text too"
        )
    if not seed.strip():
        raise InputError(
            f"add_record_keys (table {table!r}): the seed is empty or only whitespace; give a "
            "secret seed with at least one visible character"
        )
    return seed


def check_threshold(table: str, threshold: object) -> int | None:
    """The smallest integer count that is published under ``threshold`` (None: no rule).

    A perturbed count is blanked when ``n_pert < threshold``; counts are integers, so for a
    real threshold t that is ``n_pert < ceil(t)``: exact for any real t (2.7 blanks 0, 1, 2).
    """
    if threshold is None:
        return None
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (numbers.Real, decimal.Decimal)):
        raise InputError(
            f"cell_key (table {table!r}): threshold must be a number (counts below it are "
            f"published as null) or None, not {threshold!r} ({type(threshold).__name__})"
        )
    t: Any = threshold  # numbers.Real: typeshed gives it no comparison with int
    try:
        finite = math.isfinite(t)
    except OverflowError:  # an integer beyond any float: no count reaches it
        finite = t > 0
        if finite:
            return 2**62
    if not finite or t < 0:
        raise InputError(
            f"cell_key (table {table!r}): threshold must be a finite number of 0 or more, not "
            f"{threshold!r}"
        )
    return min(int(math.ceil(t)), 2**62)  # no count reaches 2^62: the same rule


def check_max_cells(value: object) -> int | None:
    if value is None:
        return None
    real = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    n: Any = value  # numbers.Real: typeshed gives it no comparison with int
    if not real or not (math.isfinite(n) and n >= 1):
        raise InputError(
            f"Session: max_cells must be a number of cells (1 or more) or None for no limit, "
            f"not {value!r}"
        )
    return int(n)


def check_bits(bits: int) -> int:
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 32:
        raise InputError("bits must be an integer from 1 to 32 (record keys are below 2^bits)")
    return bits


def file_kind(path: str) -> str | None:
    p = path.lower()
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".tsv.gz")):
        return "csv"
    return None


def as_paths(source: Any) -> list[str] | None:
    """The file paths of ``source`` if it names files (path, glob or list), else None."""
    if isinstance(source, os.PathLike):
        return [os.fspath(source)]
    if isinstance(source, str):
        if os.path.exists(source) or any(ch in source for ch in "*?[") or file_kind(source):
            return [source]
        return None
    if isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
        return [os.fspath(s) for s in source]
    return None
