"""The R package's side of the bridge (r/protab): frames moved column by column as plain
Python lists, which reticulate 1.28 converts without pandas or numpy, and Python warnings
handed back for R to raise."""

from __future__ import annotations

import warnings
from typing import Any

import polars as pl

INT32 = 2**31 - 1


def to_polars(columns: dict[str, Any], kinds: dict[str, str], missing: dict[str, Any]) -> pl.DataFrame:
    """A polars frame from R's columns: values (NA filled), their kind and the NA positions (1-based)."""
    dtypes = {"integer": pl.Int64, "double": pl.Float64, "logical": pl.Boolean, "character": pl.String}
    out = {}
    for name, values in columns.items():
        s = pl.Series(name, values if isinstance(values, list) else [values], dtype=dtypes[kinds[name]])
        na = missing.get(name)
        if na:
            s = s.scatter(pl.Series(na if isinstance(na, list) else [na], dtype=pl.Int64) - 1, None)
        out[name] = s
    return pl.DataFrame(out)


def _column(s: pl.Series) -> tuple[str, list[Any], list[int]]:
    """One column for R: its kind, its values with nulls filled, the null positions (1-based)."""
    missing = (s.is_null().arg_true() + 1).to_list()
    if s.dtype == pl.Boolean:
        return "logical", s.fill_null(False).to_list(), missing
    if s.dtype.is_integer():
        lo, hi = s.min(), s.max()  # R's integers: 32 bits, NA aside (also for unsigned columns)
        fits = lo is None or (int(lo) >= -INT32 and int(hi) <= INT32)  # type: ignore[arg-type]
        vals = s.fill_null(0)
        return ("integer", vals.to_list(), missing) if fits else ("double", vals.cast(pl.Float64).to_list(), missing)
    if s.dtype.is_numeric():
        return "double", s.cast(pl.Float64).fill_null(0.0).to_list(), missing
    return "character", s.cast(pl.String).fill_null("").to_list(), missing


def from_frame(frame: Any) -> dict[str, Any]:
    """A polars frame (or anything polars reads) as {names, kinds, values, missing} for R."""
    df = frame if isinstance(frame, pl.DataFrame) else pl.DataFrame(frame)
    parts = [_column(df[c]) for c in df.columns]
    return {"names": df.columns, "kinds": [p[0] for p in parts], "values": [p[1] for p in parts],
            "missing": [p[2] for p in parts], "rows": df.height}


def call(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``fn(*args, **kwargs)`` with its warnings recorded: {value, warnings} (messages only)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    return {"value": value, "warnings": [str(w.message) for w in caught]}
